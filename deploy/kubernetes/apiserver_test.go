package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
)

// The manifests applied to a real API server: the local one
// (localapi_test.go) with the operators' CRDs of testdata/crds installed,
// or, with K8S_VALIDATE_KUBECONFIG set (make k8s-validate), a user's
// cluster, where every request is a dry run. The server runs its own
// validation of built-in kinds, the CRDs' structural schemas and CEL
// rules, defaulting, and admission, Pod Security included.

// validateKubeconfigEnv names a kubeconfig whose cluster the manifests are
// checked against instead of the local API server, with dry runs only.
const validateKubeconfigEnv = "K8S_VALIDATE_KUBECONFIG"

// restrictedLabels make a namespace enforce Pod Security restricted.
var restrictedLabels = map[string]any{
	"pod-security.kubernetes.io/enforce": "restricted",
	"pod-security.kubernetes.io/warn":    "restricted",
	"pod-security.kubernetes.io/audit":   "restricted",
}

// cluster is the API server the tests talk to.
type cluster struct {
	name     string
	dryRun   bool // a user's cluster: nothing is written
	dyn      dynamic.Interface
	mapper   *restmapper.DeferredDiscoveryRESTMapper
	warnings *warningRecorder
	local    *localServer
	crdsOnce sync.Once
	crdsErr  error
}

var (
	clusterOnce sync.Once
	shared      *cluster
	sharedErr   error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil && shared.local != nil {
		shared.local.stop()
		os.RemoveAll(shared.local.dir)
	}
	os.Exit(code)
}

// testCluster returns the cluster of this run, starting the local API
// server on first use. If it cannot, the test fails under CI=true and is
// skipped, saying why, elsewhere.
func testCluster(t *testing.T) *cluster {
	t.Helper()
	clusterOnce.Do(func() { shared, sharedErr = openCluster(t.Logf) })
	if sharedErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no API server: %v", sharedErr)
		}
		t.Skipf("no API server (CI=true fails here instead): %v", sharedErr)
	}
	return shared
}

func openCluster(logf func(string, ...any)) (*cluster, error) {
	rec := &warningRecorder{}
	if path := os.Getenv(validateKubeconfigEnv); path != "" {
		rules := &clientcmd.ClientConfigLoadingRules{Precedence: filepath.SplitList(path)}
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("%s=%s: %w", validateKubeconfigEnv, path, err)
		}
		logf("API server: the cluster of %s (%s), dry runs only", path, cfg.Host)
		return newCluster("cluster of "+path, cfg, rec, true)
	}
	etcd, err := etcdBinary() // before the build: without etcd, no minutes spent building
	if err != nil {
		return nil, err
	}
	bin, err := kubeAPIServerBinary(logf)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "orderd-apiserver-")
	if err != nil {
		return nil, err
	}
	start := time.Now()
	srv, err := startLocalServer(etcd, bin, dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	logf("API server: local kube-apiserver at %s over etcd, ready in %s", srv.cfg.Host, time.Since(start).Round(100*time.Millisecond))
	c, err := newCluster("local kube-apiserver", srv.cfg, rec, false)
	if err != nil {
		srv.stop()
		return nil, err
	}
	c.local = srv
	return c, nil
}

func newCluster(name string, cfg *rest.Config, rec *warningRecorder, dryRun bool) (*cluster, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = rec
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	v, err := disc.ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &cluster{
		name: fmt.Sprintf("%s %s", name, v.GitVersion), dryRun: dryRun, dyn: dyn, warnings: rec,
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc)),
	}, nil
}

// warningRecorder keeps the warnings the server sends (deprecations, Pod
// Security's "would violate", unknown fields): each is a test failure.
type warningRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warningRecorder) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

func (w *warningRecorder) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.msgs
	w.msgs = nil
	return m
}

// resource is the client for obj's kind, in namespace ns if the kind is
// namespaced and obj names none.
func (c *cluster) resource(obj *unstructured.Unstructured, ns string) (dynamic.ResourceInterface, error) {
	gvk := obj.GroupVersionKind()
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", gvk, err)
	}
	if m.Scope.Name() != meta.RESTScopeNameNamespace {
		return c.dyn.Resource(m.Resource), nil
	}
	if obj.GetNamespace() == "" {
		obj.SetNamespace(ns)
	}
	return c.dyn.Resource(m.Resource).Namespace(obj.GetNamespace()), nil
}

// apply creates or updates obj by server-side apply with strict field
// validation (an unknown or duplicate field is an error) and returns the
// object as the server stored it, or would on a dry run.
func (c *cluster) apply(ctx context.Context, obj *unstructured.Unstructured, ns string) (*unstructured.Unstructured, error) {
	ri, err := c.resource(obj, ns)
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return nil, err
	}
	force := true
	opts := metav1.PatchOptions{FieldManager: "orderd-manifest-test", Force: &force, FieldValidation: "Strict"}
	if c.dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	got, err := ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, opts)
	if err != nil {
		return nil, err
	}
	if w := c.warnings.take(); len(w) > 0 {
		return got, fmt.Errorf("the server warned: %s", strings.Join(w, "; "))
	}
	if c.dryRun {
		return got, nil
	}
	return ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
}

// namespace creates a namespace of the local server that enforces Pod
// Security restricted.
func (c *cluster) namespace(ctx context.Context, name string) error {
	ns := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": name, "labels": restrictedLabels},
	}}
	_, err := c.apply(ctx, ns, "")
	return err
}

// installCRDs applies every CRD under testdata/crds to the local server
// and waits until each is established, once per run.
func (c *cluster) installCRDs(t *testing.T) {
	t.Helper()
	c.crdsOnce.Do(func() { c.crdsErr = c.doInstallCRDs(t) })
	if c.crdsErr != nil {
		t.Fatal(c.crdsErr)
	}
}

func (c *cluster) doInstallCRDs(t *testing.T) error {
	files, err := filepath.Glob("testdata/crds/*/*.yaml")
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no CRDs in testdata/crds: %v", err)
	}
	ctx := context.Background()
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	for _, f := range files {
		crd, err := readObject(f)
		if err != nil {
			return err
		}
		if _, err := c.apply(ctx, crd, ""); err != nil {
			return fmt.Errorf("install %s: %w", f, err)
		}
		if err := waitEstablished(ctx, c.dyn.Resource(crdGVR), crd.GetName()); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		t.Logf("CRD %s established (%s)", crd.GetName(), filepath.Base(filepath.Dir(f)))
	}
	c.mapper.Reset()
	return nil
}

func readObject(path string) (*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var obj map[string]any
	if err := utilyaml.NewYAMLOrJSONDecoder(f, 4096).Decode(&obj); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &unstructured.Unstructured{Object: obj}, nil
}

func waitEstablished(ctx context.Context, ri dynamic.ResourceInterface, name string) error {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		crd, err := ri.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("CRD %s not established after a minute", name)
}

// fieldDiffs lists every field of want that got lacks or holds another
// value: a field the server pruned or changed instead of keeping. A field
// set to its zero value may be missing (the server omits it), and a list
// may have items after want's (admission adds some, e.g. the service
// account token's volume of a Pod).
func fieldDiffs(path string, want, got any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: want an object, got %v", path, got)}
		}
		var diffs []string
		for k, v := range w {
			gv, ok := g[k]
			if !ok {
				if v != nil && !reflect.ValueOf(v).IsZero() {
					diffs = append(diffs, fmt.Sprintf("%s.%s: missing", path, k))
				}
				continue
			}
			diffs = append(diffs, fieldDiffs(path+"."+k, v, gv)...)
		}
		return diffs
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) < len(w) {
			return []string{fmt.Sprintf("%s: want %d items, got %v", path, len(w), got)}
		}
		var diffs []string
		for i := range w {
			diffs = append(diffs, fieldDiffs(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])...)
		}
		return diffs
	default:
		if !reflect.DeepEqual(want, got) {
			return []string{fmt.Sprintf("%s: want %v, got %v", path, want, got)}
		}
		return nil
	}
}

// asJSON is obj as encoding/json decodes it (numbers as float64), so two
// objects compare by value whatever decoded them.
func asJSON(t *testing.T, obj map[string]any) map[string]any {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func describe(u *unstructured.Unstructured) string {
	s := u.GetAPIVersion() + " " + u.GetKind() + " "
	if u.GetNamespace() != "" {
		s += u.GetNamespace() + "/"
	}
	return s + u.GetName()
}

// applyAndReadBack applies obj, reads it back and checks the server kept
// every field the manifest sets.
func applyAndReadBack(t *testing.T, c *cluster, obj *unstructured.Unstructured, ns string) {
	t.Helper()
	want := asJSON(t, obj.Object)
	got, err := c.apply(context.Background(), obj, ns)
	if err != nil {
		t.Errorf("%s: %v", describe(obj), err)
		return
	}
	want["metadata"].(map[string]any)["namespace"] = obj.GetNamespace()
	if obj.GetNamespace() == "" {
		delete(want["metadata"].(map[string]any), "namespace")
	}
	if diffs := fieldDiffs("", want, asJSON(t, got.Object)); len(diffs) > 0 {
		sort.Strings(diffs)
		t.Errorf("%s: read back differs from the manifest:\n  %s", describe(obj), strings.Join(diffs, "\n  "))
		return
	}
	verb := "created"
	if c.dryRun {
		verb = "accepted (dry run)"
	}
	t.Logf("%-18s %s (uid %s)", verb, describe(got), got.GetUID())
}

// Every rendered kustomization is applied, read back and kept as written;
// then every workload's pod template is created as a Pod in a namespace
// enforcing Pod Security restricted (the server only warns about a
// Deployment's or Job's template; it refuses a Pod).
func TestManifestsOnAPIServer(t *testing.T) {
	c := testCluster(t)
	t.Logf("validating against %s", c.name)
	if !c.dryRun {
		c.installCRDs(t)
	}
	ctx := context.Background()
	var templates []podTemplate
	for _, dir := range allKustomizations() {
		// Objects of a kustomization that sets no namespace go to one of
		// their own (on a user's cluster: default).
		ns := "default"
		if !c.dryRun {
			ns = "test-" + strings.ReplaceAll(dir, "/", "-")
			if err := c.namespace(ctx, ns); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("== %s", dir)
		for _, o := range render(t, dir) {
			obj := &unstructured.Unstructured{}
			if err := obj.UnmarshalJSON(o.JSON); err != nil {
				t.Fatal(err)
			}
			applyAndReadBack(t, c, obj, ns)
			if tmpl, ok := podTemplateOf(t, dir, obj); ok {
				templates = append(templates, tmpl)
			}
		}
	}
	if c.dryRun {
		t.Log("pod templates: not created as Pods on a user's cluster (their service accounts exist only after a real apply); Pod Security warnings on the workloads above fail the run instead")
		return
	}
	createPodTemplates(t, c, templates)
}

// podTemplate is a workload's pod template, to be created as a Pod.
type podTemplate struct {
	name string // <kustomization>-<kind>-<name>
	tmpl map[string]any
}

func podTemplateOf(t *testing.T, dir string, obj *unstructured.Unstructured) (podTemplate, bool) {
	t.Helper()
	var path []string
	switch obj.GetKind() {
	case "Deployment", "Job", "StatefulSet", "DaemonSet", "ReplicaSet":
		path = []string{"spec", "template"}
	case "CronJob":
		path = []string{"spec", "jobTemplate", "spec", "template"}
	default:
		return podTemplate{}, false
	}
	tmpl, found, err := unstructured.NestedMap(obj.Object, path...)
	if err != nil || !found {
		t.Fatalf("%s: no pod template at %s: %v", describe(obj), strings.Join(path, "."), err)
	}
	name := strings.ToLower(strings.ReplaceAll(dir, "/", "-") + "-" + obj.GetKind() + "-" + obj.GetName())
	return podTemplate{name: name, tmpl: tmpl}, true
}

// createPodTemplates creates each template as a Pod in namespace
// pod-templates (Pod Security restricted), with the service account it
// runs as (no controller here makes them).
func createPodTemplates(t *testing.T, c *cluster, templates []podTemplate) {
	ctx := context.Background()
	const ns = "pod-templates"
	if err := c.namespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Logf("== pod templates as Pods in namespace %s (Pod Security restricted enforced)", ns)
	for _, p := range templates {
		spec, _ := p.tmpl["spec"].(map[string]any)
		sa, _ := spec["serviceAccountName"].(string)
		if sa == "" {
			sa = "default"
		}
		account := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": sa, "namespace": ns},
		}}
		if _, err := c.apply(ctx, account, ns); err != nil {
			t.Fatal(err)
		}
		meta, _ := p.tmpl["metadata"].(map[string]any)
		podMeta := map[string]any{"name": p.name, "namespace": ns}
		if labels, ok := meta["labels"]; ok {
			podMeta["labels"] = labels
		}
		pod := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Pod", "metadata": podMeta, "spec": spec,
		}}
		applyAndReadBack(t, c, pod, ns)
	}
}

// Strimzi 1.x removed kafka.strimzi.io/v1beta2: the Kafka manifests in
// that version are refused by the server with the CRDs of testdata/crds,
// and the same manifests in v1 are accepted. If a refresh of the CRDs
// served v1beta2 again, this test would say so.
func TestStrimziV1beta2IsRefused(t *testing.T) {
	c := testCluster(t)
	if c.dryRun {
		t.Skip("about the CRDs in testdata/crds, which are installed on the local API server only")
	}
	c.installCRDs(t)
	ctx := context.Background()
	var checked int
	for _, o := range render(t, "kafka") {
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(o.JSON); err != nil {
			t.Fatal(err)
		}
		gvk := obj.GroupVersionKind()
		if gvk.Group != "kafka.strimzi.io" {
			continue
		}
		checked++
		obj.SetNamespace("default")
		m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s as %s: %v", describe(obj), gvk.Version, err)
		}
		if _, err := c.mapper.RESTMapping(gvk.GroupKind(), "v1beta2"); !meta.IsNoMatchError(err) {
			t.Errorf("%s: discovery offers v1beta2 (err %v); Strimzi 1.x serves v1 only", gvk.Kind, err)
		}
		old := obj.DeepCopy()
		old.SetAPIVersion("kafka.strimzi.io/v1beta2")
		data, _ := json.Marshal(old.Object)
		gvr := m.Resource.GroupResource().WithVersion("v1beta2")
		opts := metav1.PatchOptions{FieldManager: "orderd-manifest-test", FieldValidation: "Strict", DryRun: []string{metav1.DryRunAll}}
		_, err = c.dyn.Resource(gvr).Namespace("default").Patch(ctx, old.GetName(), types.ApplyPatchType, data, opts)
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s in kafka.strimzi.io/v1beta2: want the server to refuse it as not found, got %v", old.GetKind(), err)
			continue
		}
		t.Logf("refused  kafka.strimzi.io/v1beta2 %s %s: %v", old.GetKind(), old.GetName(), err)
		if _, err := c.dyn.Resource(m.Resource).Namespace("default").Patch(ctx, obj.GetName(), types.ApplyPatchType, mustJSON(t, obj), opts); err != nil {
			t.Errorf("%s in %s: %v", obj.GetKind(), gvk.GroupVersion(), err)
			continue
		}
		t.Logf("accepted %s %s %s (dry run)", gvk.GroupVersion(), obj.GetKind(), obj.GetName())
		c.warnings.take()
	}
	if checked == 0 {
		t.Fatal("kafka renders no kafka.strimzi.io resource")
	}
}

func mustJSON(t *testing.T, obj *unstructured.Unstructured) []byte {
	t.Helper()
	data, err := json.Marshal(obj.Object)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
