// Package apiserver holds no code. Its go.mod pins the Kubernetes release
// whose kube-apiserver the manifest tests (../apiserver_test.go) build and
// run: k8s.io/kubernetes, with each of its staging modules (k8s.io/api,
// k8s.io/apiserver, ...) replaced by the matching published v0.x release,
// as the Kubernetes module itself names them only as local directories.
// To move to another release, change every version in go.mod together,
// then run `go mod tidy` here.
package apiserver
