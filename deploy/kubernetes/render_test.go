package kubernetes

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// Every kustomization in this directory. Each app kustomization is paired
// with the migrate kustomization applied before it.
var (
	appKustomizations     = map[string]string{"base": "migrate", "overlays/production": "overlays/production/migrate"}
	operatorKustomization = []string{"cassandra", "kafka"}
)

func allKustomizations() []string {
	var dirs []string
	for app, migrate := range appKustomizations {
		dirs = append(dirs, app, migrate)
	}
	dirs = append(dirs, operatorKustomization...)
	sort.Strings(dirs)
	return dirs
}

// object is one rendered resource: its JSON and, for a built-in kind, the
// strictly decoded Go value.
type object struct {
	APIVersion, Kind, Name, Namespace string
	JSON                              []byte
	Typed                             any // nil for a custom resource
}

func (o object) String() string { return o.Kind + "/" + o.Name }

// knownKinds are the kinds the manifests may use, by apiVersion and kind:
// built-in and prometheus-operator kinds with the Go type they decode into
// strictly, custom resources of the other operators with nil (their
// modules are not importable here; the API server test checks them
// against their CRDs, testdata/crds). A rendered kind not listed fails the
// tests.
var knownKinds = map[string]func() any{
	"v1/Namespace":                      func() any { return &corev1.Namespace{} },
	"v1/ConfigMap":                      func() any { return &corev1.ConfigMap{} },
	"v1/Secret":                         func() any { return &corev1.Secret{} },
	"v1/Service":                        func() any { return &corev1.Service{} },
	"v1/ServiceAccount":                 func() any { return &corev1.ServiceAccount{} },
	"apps/v1/Deployment":                func() any { return &appsv1.Deployment{} },
	"batch/v1/Job":                      func() any { return &batchv1.Job{} },
	"batch/v1/CronJob":                  func() any { return &batchv1.CronJob{} },
	"rbac.authorization.k8s.io/v1/Role": func() any { return &rbacv1.Role{} },
	"rbac.authorization.k8s.io/v1/RoleBinding":           func() any { return &rbacv1.RoleBinding{} },
	"policy/v1/PodDisruptionBudget":                      func() any { return &policyv1.PodDisruptionBudget{} },
	"autoscaling/v2/HorizontalPodAutoscaler":             func() any { return &autoscalingv2.HorizontalPodAutoscaler{} },
	"networking.k8s.io/v1/NetworkPolicy":                 func() any { return &networkingv1.NetworkPolicy{} },
	"scheduling.k8s.io/v1/PriorityClass":                 func() any { return &schedulingv1.PriorityClass{} },
	"monitoring.coreos.com/v1/ServiceMonitor":            func() any { return &monitoringv1.ServiceMonitor{} },
	"monitoring.coreos.com/v1/PrometheusRule":            func() any { return &monitoringv1.PrometheusRule{} },
	"cassandra.datastax.com/v1beta1/CassandraDatacenter": nil,
	"kafka.strimzi.io/v1/Kafka":                          nil,
	"kafka.strimzi.io/v1/KafkaNodePool":                  nil,
	"kafka.strimzi.io/v1/KafkaTopic":                     nil,
	"kafka.strimzi.io/v1/KafkaUser":                      nil,
}

// decodeStrict decodes JSON into v, failing on unknown and duplicate
// fields; the error names every such field by its path.
func decodeStrict(data []byte, v any) error {
	strict, err := sigsjson.UnmarshalStrict(data, v, sigsjson.DisallowUnknownFields, sigsjson.DisallowDuplicateFields)
	if err != nil {
		return err
	}
	if len(strict) > 0 {
		msgs := make([]string, len(strict))
		for i, e := range strict {
			msgs[i] = e.Error()
		}
		return fmt.Errorf("%s", strings.Join(msgs, "; "))
	}
	return nil
}

// renderDir runs kustomize over dir (relative to this directory, on disk)
// and decodes every resource of a built-in kind strictly into its Go type.
func renderDir(dir string) ([]object, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	rm, err := k.Run(filesys.MakeFsOnDisk(), abs)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	var objs []object
	var errs []string
	for _, r := range rm.Resources() {
		data, err := r.MarshalJSON()
		if err != nil {
			return nil, err
		}
		o := object{APIVersion: r.GetApiVersion(), Kind: r.GetKind(), Name: r.GetName(), Namespace: r.GetNamespace(), JSON: data}
		key := o.APIVersion + "/" + o.Kind
		newObj, known := knownKinds[key]
		switch {
		case !known:
			errs = append(errs, fmt.Sprintf("%s: unknown kind %s (add it to knownKinds, and its CRD to testdata/crds)", o, key))
		case newObj != nil:
			o.Typed = newObj()
			if err := decodeStrict(data, o.Typed); err != nil {
				errs = append(errs, fmt.Sprintf("%s: %v", o, err))
			}
		}
		objs = append(objs, o)
	}
	if len(errs) > 0 {
		return objs, fmt.Errorf("%s:\n  %s", dir, strings.Join(errs, "\n  "))
	}
	return objs, nil
}

// render is renderDir for tests: any error fails the test.
func render(t *testing.T, dir string) []object {
	t.Helper()
	objs, err := renderDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func TestEveryKustomizationRendersAndDecodesStrictly(t *testing.T) {
	for _, dir := range allKustomizations() {
		t.Run(dir, func(t *testing.T) {
			objs := render(t, dir)
			if len(objs) == 0 {
				t.Fatal("renders nothing")
			}
		})
	}
}

// Every kustomization.yaml under this directory is one the tests render.
func TestNoKustomizationIsLeftUnchecked(t *testing.T) {
	known := map[string]bool{}
	for _, d := range allKustomizations() {
		known[d] = true
	}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == "kustomization.yaml" && !known[filepath.Dir(path)] {
			t.Errorf("%s is not rendered by the tests: add its directory to appKustomizations or operatorKustomization", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The strict decoder is what catches a misspelt field: prove it.
func TestStrictDecodingRefusesAMisspeltField(t *testing.T) {
	doc := []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"x"},
		"spec":{"template":{"spec":{"containers":[{"name":"c","readinesProbe":{}}]}}}}`)
	err := decodeStrict(doc, &appsv1.Deployment{})
	if err == nil || !strings.Contains(err.Error(), `spec.template.spec.containers[0].readinesProbe`) {
		t.Fatalf("decodeStrict of a Deployment with readinesProbe: got %v, want an unknown field error naming its path", err)
	}
	dup := []byte(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"x","name":"y"}}`)
	if err := decodeStrict(dup, &corev1.Service{}); err == nil {
		t.Fatal("decodeStrict accepted a duplicate field")
	}
}

func TestAnUnknownKindFails(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "kustomization.yaml"), "resources: [thing.yaml]\n")
	write(t, filepath.Join(dir, "thing.yaml"), "apiVersion: example.com/v1\nkind: Thing\nmetadata: {name: x}\n")
	if _, err := renderDir(dir); err == nil || !strings.Contains(err.Error(), "unknown kind example.com/v1/Thing") {
		t.Fatalf("rendering an unknown kind: got %v", err)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// find returns the rendered objects of one kind.
func find[T any](objs []object) []*T {
	var out []*T
	for _, o := range objs {
		if v, ok := o.Typed.(*T); ok {
			out = append(out, v)
		}
	}
	return out
}

// one returns the single rendered object of a kind.
func one[T any](t *testing.T, objs []object) *T {
	t.Helper()
	all := find[T](objs)
	if len(all) != 1 {
		var zero T
		t.Fatalf("want one %T, got %d", zero, len(all))
	}
	return all[0]
}

// fields decodes a rendered object's JSON for reading.
func fields(t *testing.T, o object) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(o.JSON, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// Every custom resource kind the manifests may use is served, in that
// version, by a CRD of testdata/crds, which the API server test installs.
func TestCustomKindsHaveTheirCRDs(t *testing.T) {
	type crd struct {
		Spec struct {
			Group string `json:"group"`
			Names struct {
				Kind string `json:"kind"`
			} `json:"names"`
			Versions []struct {
				Name   string `json:"name"`
				Served bool   `json:"served"`
			} `json:"versions"`
		} `json:"spec"`
	}
	served := map[string]bool{}
	files, err := filepath.Glob("testdata/crds/*/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in testdata/crds: %v", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var c crd
		if err := yaml.Unmarshal(data, &c); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, v := range c.Spec.Versions {
			if v.Served {
				served[c.Spec.Group+"/"+v.Name+"/"+c.Spec.Names.Kind] = true
			}
		}
	}
	for key := range knownKinds {
		// A custom kind's group has a dot and is not Kubernetes' own.
		group, _, _ := strings.Cut(key, "/")
		custom := strings.Count(key, "/") == 2 && strings.Contains(group, ".") && !strings.HasSuffix(group, ".k8s.io")
		if custom && !served[key] {
			t.Errorf("%s: no CRD in testdata/crds serves it", key)
		}
	}
}
