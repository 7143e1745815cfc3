// Package kubernetes holds no code: its tests check the Kubernetes
// manifests in this directory (README.md). They render every kustomization
// with kustomize's Go API, decode each object of a built-in kind strictly
// into its upstream Go type, apply everything to a real kube-apiserver
// (built from apiserver/go.mod, over etcd) with the operators' CRDs of
// testdata/crds installed, and check what the manifests must agree on with
// orderd itself: its settings, ports, probes, shutdown grace and alert
// rules.
//
// It is a Go module of its own so that kustomize and the Kubernetes API
// types stay out of orderd's dependencies; `make test` runs it
// (test-deploy).
package kubernetes
