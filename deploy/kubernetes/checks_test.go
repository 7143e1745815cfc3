package kubernetes

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// externalSecrets are created outside kustomize (README.md, "Secrets"), so
// they are absent from the renders; every other Secret or ConfigMap a pod
// references must be rendered.
var externalSecrets = []string{
	"orderd-grpc-tls", "orderd-api-keys", "orderd-page-token-key",
	"orderd-cassandra", "orderd-cassandra-migrator", "orderd-cassandra-tls-ca",
	"orderd-kafka", "orderd-kafka-tls-ca",
}

// orderdSettings are the ORDERD_* names orderd reads, as its own help
// names them: `orderd help COMMAND` lists each flag's variable, for serve
// and for migrate (the Jobs). Built from ../../cmd/orderd, the source next
// to these manifests.
func orderdSettings(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	re := regexp.MustCompile(`ORDERD_[A-Z0-9_]+`)
	for _, cmd := range []string{"serve", "migrate"} {
		run := exec.Command("go", "run", "./cmd/orderd", "help", cmd)
		run.Dir = filepath.Join("..", "..")
		out, err := run.CombinedOutput()
		if err != nil {
			t.Fatalf("orderd help %s: %v\n%s", cmd, err, out)
		}
		for _, m := range re.FindAllString(string(out), -1) {
			names[m] = true
		}
	}
	for _, must := range []string{"ORDERD_GRPC_ADDR", "ORDERD_HEALTH_ADDR", "ORDERD_SHUTDOWN_GRACE", "ORDERD_TLS_CERT_FILE",
		"ORDERD_CASSANDRA_PASSWORD_FILE", "ORDERD_KAFKA_PASSWORD_FILE"} {
		if !names[must] {
			t.Fatalf("orderd's help names no %s: it lists its settings differently now; fix orderdSettings", must)
		}
	}
	return names
}

// podEnv is what a container's environment holds: its own env values (""
// for valueFrom) and the data of the ConfigMaps it takes whole.
func podEnv(t *testing.T, objs []object, c corev1.Container) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, from := range c.EnvFrom {
		if from.ConfigMapRef == nil {
			t.Fatalf("container %s: envFrom other than a ConfigMap", c.Name)
		}
		cm := configMap(objs, from.ConfigMapRef.Name)
		if cm == nil {
			t.Fatalf("container %s: ConfigMap %s is not rendered", c.Name, from.ConfigMapRef.Name)
		}
		for k, v := range cm.Data {
			env[k] = v
		}
	}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	return env
}

func configMap(objs []object, name string) *corev1.ConfigMap {
	for _, cm := range find[corev1.ConfigMap](objs) {
		if cm.Name == name {
			return cm
		}
	}
	return nil
}

func duration(t *testing.T, env map[string]string, name string, def time.Duration) time.Duration {
	t.Helper()
	v, ok := env[name]
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return d
}

// pods are the rendered pod templates: the Deployment's and the Job's.
func pods(objs []object) map[string]*corev1.PodTemplateSpec {
	out := map[string]*corev1.PodTemplateSpec{}
	for _, d := range find[appsv1.Deployment](objs) {
		out["Deployment/"+d.Name] = &d.Spec.Template
	}
	for _, j := range find[batchv1.Job](objs) {
		out["Job/"+j.Name] = &j.Spec.Template
	}
	return out
}

func renders(t *testing.T) map[string][]object {
	out := map[string][]object{}
	for app, migrate := range appKustomizations {
		out[app] = render(t, app)
		out[migrate] = render(t, migrate)
	}
	return out
}

// Every environment variable a pod sets, and every ConfigMap key it takes,
// is a setting orderd reads: a misspelt name would be silently ignored.
func TestEveryVariableIsAnOrderdSetting(t *testing.T) {
	settings := orderdSettings(t)
	for dir, objs := range renders(t) {
		for pod, tmpl := range pods(objs) {
			for _, c := range tmpl.Spec.Containers {
				for name := range podEnv(t, objs, c) {
					if !settings[name] {
						t.Errorf("%s %s container %s: %s is not an orderd setting (cmd/orderd)", dir, pod, c.Name, name)
					}
				}
			}
		}
	}
}

// Secrets and ConfigMaps a pod references exist: rendered, or one of the
// Secrets created by hand, each of which README.md names.
func TestReferencedSecretsAndConfigMapsExist(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	external := map[string]bool{}
	for _, s := range externalSecrets {
		external[s] = true
		if !strings.Contains(string(readme), "`"+s+"`") {
			t.Errorf("README.md does not name the Secret `%s` to create", s)
		}
	}
	for dir, objs := range renders(t) {
		secrets := map[string]bool{}
		for _, s := range find[corev1.Secret](objs) {
			secrets[s.Name] = true
		}
		for pod, tmpl := range pods(objs) {
			var refs []string
			for _, v := range tmpl.Spec.Volumes {
				if v.Secret != nil {
					refs = append(refs, "Secret/"+v.Secret.SecretName)
				}
				if v.ConfigMap != nil {
					refs = append(refs, "ConfigMap/"+v.ConfigMap.Name)
				}
			}
			for _, c := range tmpl.Spec.Containers {
				for _, e := range c.Env {
					if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
						refs = append(refs, "Secret/"+e.ValueFrom.SecretKeyRef.Name)
					}
					if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
						refs = append(refs, "ConfigMap/"+e.ValueFrom.ConfigMapKeyRef.Name)
					}
				}
				for _, f := range c.EnvFrom {
					if f.ConfigMapRef != nil {
						refs = append(refs, "ConfigMap/"+f.ConfigMapRef.Name)
					}
					if f.SecretRef != nil {
						refs = append(refs, "Secret/"+f.SecretRef.Name)
					}
				}
			}
			for _, ref := range refs {
				kind, name, _ := strings.Cut(ref, "/")
				ok := (kind == "Secret" && (secrets[name] || external[name])) || (kind == "ConfigMap" && configMap(objs, name) != nil)
				if !ok {
					t.Errorf("%s %s references %s, which is neither rendered nor in externalSecrets", dir, pod, ref)
				}
			}
		}
	}
}

// Every ORDERD_*_FILE setting names a file under one of the container's
// mounts.
func TestFileSettingsPointIntoMounts(t *testing.T) {
	for dir, objs := range renders(t) {
		for pod, tmpl := range pods(objs) {
			for _, c := range tmpl.Spec.Containers {
				for name, value := range podEnv(t, objs, c) {
					if !strings.HasSuffix(name, "_FILE") || value == "" {
						continue
					}
					mounted := false
					for _, m := range c.VolumeMounts {
						if strings.HasPrefix(value, strings.TrimSuffix(m.MountPath, "/")+"/") {
							mounted = true
						}
					}
					if !mounted {
						t.Errorf("%s %s: %s=%s is under no volume mount", dir, pod, name, value)
					}
				}
			}
		}
	}
}

// Pods run as the image's non-root user, read-only, with no capabilities
// or privilege escalation, under the runtime's seccomp profile.
func TestPodsAreLockedDown(t *testing.T) {
	for dir, objs := range renders(t) {
		for pod, tmpl := range pods(objs) {
			ps := tmpl.Spec.SecurityContext
			if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.RunAsUser == nil || *ps.RunAsUser != 65532 {
				t.Errorf("%s %s: pod must set runAsNonRoot and runAsUser 65532 (distroless nonroot)", dir, pod)
			}
			if ps == nil || ps.SeccompProfile == nil || ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("%s %s: pod seccompProfile must be RuntimeDefault", dir, pod)
			}
			if tmpl.Spec.AutomountServiceAccountToken == nil || *tmpl.Spec.AutomountServiceAccountToken {
				t.Errorf("%s %s: orderd needs no service account token", dir, pod)
			}
			for _, c := range append(tmpl.Spec.InitContainers, tmpl.Spec.Containers...) {
				sc := c.SecurityContext
				switch {
				case sc == nil:
					t.Errorf("%s %s %s: no securityContext", dir, pod, c.Name)
				case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
					t.Errorf("%s %s %s: readOnlyRootFilesystem must be true", dir, pod, c.Name)
				case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
					t.Errorf("%s %s %s: allowPrivilegeEscalation must be false", dir, pod, c.Name)
				case sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) > 0:
					t.Errorf("%s %s %s: capabilities must drop ALL and add none", dir, pod, c.Name)
				}
				if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() || c.Resources.Requests.Cpu().IsZero() {
					t.Errorf("%s %s %s: set cpu and memory requests and a memory limit", dir, pod, c.Name)
				}
			}
		}
	}
}

// The Deployment's probes, ports, listen addresses and shutdown agree
// with orderd.
func TestDeploymentAgreesWithOrderd(t *testing.T) {
	for app := range appKustomizations {
		t.Run(app, func(t *testing.T) {
			objs := render(t, app)
			d := one[appsv1.Deployment](t, objs)
			if len(d.Spec.Template.Spec.Containers) != 1 {
				t.Fatalf("want one container, got %d", len(d.Spec.Template.Spec.Containers))
			}
			c := d.Spec.Template.Spec.Containers[0]
			env := podEnv(t, objs, c)

			ports := map[string]int32{}
			for _, p := range c.Ports {
				ports[p.Name] = p.ContainerPort
			}
			for name, setting := range map[string]string{"grpc": "ORDERD_GRPC_ADDR", "health": "ORDERD_HEALTH_ADDR", "metrics": "ORDERD_METRICS_ADDR"} {
				want := map[string]int32{"grpc": 8080, "health": 8081, "metrics": 9090}[name]
				if ports[name] != want {
					t.Errorf("container port %s is %d, want %d", name, ports[name], want)
				}
				if addr := env[setting]; addr != fmt.Sprintf("0.0.0.0:%d", want) {
					t.Errorf("%s=%q, want 0.0.0.0:%d (all interfaces, the %s port)", setting, addr, want, name)
				}
			}

			grpcProbe := func(what string, p *corev1.Probe, service string) {
				if p == nil || p.GRPC == nil {
					t.Errorf("%s: want a native gRPC probe", what)
					return
				}
				if p.GRPC.Port != ports["health"] {
					t.Errorf("%s probes port %d, want the plaintext health port %d", what, p.GRPC.Port, ports["health"])
				}
				got := ""
				if p.GRPC.Service != nil {
					got = *p.GRPC.Service
				}
				if got != service {
					t.Errorf("%s probes service %q, want %q", what, got, service)
				}
			}
			grpcProbe("readinessProbe", c.ReadinessProbe, "")
			grpcProbe("livenessProbe", c.LivenessProbe, "liveness")
			grpcProbe("startupProbe", c.StartupProbe, "liveness")
			if s := c.StartupProbe; s != nil {
				window := time.Duration(s.PeriodSeconds*s.FailureThreshold) * time.Second
				if wait := duration(t, env, "ORDERD_CONNECT_WAIT", 60*time.Second); window <= wait {
					t.Errorf("startupProbe allows %s, not longer than ORDERD_CONNECT_WAIT %s: a slow cluster start gets the pod killed", window, wait)
				}
			}

			if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil || c.Lifecycle.PreStop.Sleep.Seconds < 5 {
				t.Fatal("want a preStop sleep handler of at least 5 s (endpoints drop the pod before SIGTERM)")
			}
			preStop := time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
			grace := duration(t, env, "ORDERD_SHUTDOWN_GRACE", 20*time.Second)
			// After the calls, the deliveries they started finish: a
			// publication (ORDERD_PUBLISH_TIMEOUT) and its entry's release
			// (5 s); then the producer closes (5 s).
			publish := duration(t, env, "ORDERD_PUBLISH_TIMEOUT", 10*time.Second)
			drain := preStop + grace + publish + 5*time.Second + 5*time.Second
			var tgps time.Duration // none set: Kubernetes' default, 30 s
			if p := d.Spec.Template.Spec.TerminationGracePeriodSeconds; p != nil {
				tgps = time.Duration(*p) * time.Second
			}
			if tgps <= drain {
				t.Errorf("terminationGracePeriodSeconds %s must exceed preStop %s + ORDERD_SHUTDOWN_GRACE %s + ORDERD_PUBLISH_TIMEOUT %s + 5 s for the last releases + 5 s to close the producer = %s",
					tgps, preStop, grace, publish, drain)
			}

			if d.Spec.Strategy.RollingUpdate == nil || d.Spec.Strategy.RollingUpdate.MaxUnavailable == nil || d.Spec.Strategy.RollingUpdate.MaxUnavailable.IntValue() != 0 {
				t.Error("rolling updates must keep every pod until its replacement is ready (maxUnavailable 0)")
			}
			if len(d.Spec.Template.Spec.TopologySpreadConstraints) != 2 {
				t.Errorf("want topology spread over zones and hosts, got %d constraints", len(d.Spec.Template.Spec.TopologySpreadConstraints))
			}
		})
	}
}

func selects(t *testing.T, sel *metav1.LabelSelector, l map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatal(err)
	}
	return !s.Empty() && s.Matches(labels.Set(l))
}

// Services, the disruption budget, the network policy, the autoscaler and
// the ServiceMonitor all reach the Deployment's pods.
func TestSelectorsReachThePods(t *testing.T) {
	for app := range appKustomizations {
		t.Run(app, func(t *testing.T) {
			objs := render(t, app)
			d := one[appsv1.Deployment](t, objs)
			podLabels := d.Spec.Template.Labels
			if !selects(t, d.Spec.Selector, podLabels) {
				t.Error("the Deployment's selector does not match its own pods")
			}
			var headless int
			for _, s := range find[corev1.Service](objs) {
				if len(s.Spec.Selector) == 0 || !labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(podLabels)) {
					t.Errorf("Service %s selects %v, not the pods %v", s.Name, s.Spec.Selector, podLabels)
				}
				if s.Spec.ClusterIP == corev1.ClusterIPNone {
					headless++
				}
				for _, p := range s.Spec.Ports {
					if !containerHasPort(d.Spec.Template.Spec.Containers[0], p.TargetPort.String()) {
						t.Errorf("Service %s port %s targets %s, which the container does not expose", s.Name, p.Name, p.TargetPort.String())
					}
				}
			}
			if headless != 1 {
				t.Errorf("want one headless Service (clusterIP: None) for round_robin clients, got %d", headless)
			}
			pdb := one[policyv1.PodDisruptionBudget](t, objs)
			if !selects(t, pdb.Spec.Selector, podLabels) {
				t.Error("the PodDisruptionBudget does not select the pods")
			}
			np := one[networkingv1.NetworkPolicy](t, objs)
			if !selects(t, &np.Spec.PodSelector, podLabels) {
				t.Error("the NetworkPolicy does not select the pods")
			}
			hpa := one[autoscalingv2.HorizontalPodAutoscaler](t, objs)
			if hpa.Spec.ScaleTargetRef.Kind != "Deployment" || hpa.Spec.ScaleTargetRef.Name != d.Name {
				t.Errorf("the HorizontalPodAutoscaler scales %s/%s, not Deployment/%s", hpa.Spec.ScaleTargetRef.Kind, hpa.Spec.ScaleTargetRef.Name, d.Name)
			}
			if hpa.Spec.MinReplicas == nil || *hpa.Spec.MinReplicas < 3 {
				t.Error("minReplicas must be at least 3 (one pod per zone)")
			}
			if d.Spec.Replicas != nil {
				t.Error("the Deployment sets replicas while an autoscaler owns the count: every apply would reset it")
			}
			sm := one[monitoringv1.ServiceMonitor](t, objs)
			var scraped []string
			for _, s := range find[corev1.Service](objs) {
				if selects(t, &sm.Spec.Selector, s.Labels) {
					for _, e := range sm.Spec.Endpoints {
						for _, p := range s.Spec.Ports {
							if p.Name == e.Port {
								scraped = append(scraped, s.Name+":"+p.Name)
							}
						}
					}
				}
			}
			if len(scraped) != 1 || !strings.HasSuffix(scraped[0], ":metrics") {
				t.Errorf("the ServiceMonitor must scrape one Service's metrics port (else pods are scraped twice), got %v", scraped)
			}
		})
	}
}

func containerHasPort(c corev1.Container, target string) bool {
	for _, p := range c.Ports {
		if p.Name == target || strconv.Itoa(int(p.ContainerPort)) == target {
			return true
		}
	}
	return false
}

// The migrate Job of each app kustomization runs the same image against
// the same cluster, datacenter and keyspace, in the same namespace.
func TestMigrateJobMatchesItsDeployment(t *testing.T) {
	for app, migrate := range appKustomizations {
		t.Run(app, func(t *testing.T) {
			appObjs, migObjs := render(t, app), render(t, migrate)
			d := one[appsv1.Deployment](t, appObjs)
			j := one[batchv1.Job](t, migObjs)
			dc, jc := d.Spec.Template.Spec.Containers[0], j.Spec.Template.Spec.Containers[0]
			if dc.Image != jc.Image {
				t.Errorf("the Job runs %s, the Deployment %s", jc.Image, dc.Image)
			}
			if d.Namespace != j.Namespace {
				t.Errorf("the Job is in namespace %q, the Deployment in %q", j.Namespace, d.Namespace)
			}
			if len(jc.Args) != 1 || jc.Args[0] != "migrate" {
				t.Errorf("the Job runs %v, want [migrate]", jc.Args)
			}
			denv, jenv := podEnv(t, appObjs, dc), podEnv(t, migObjs, jc)
			for _, name := range []string{"ORDERD_CASSANDRA_CONTACT_POINTS", "ORDERD_LOCAL_DC", "ORDERD_KEYSPACE", "ORDERD_CASSANDRA_TLS_CA_FILE", "ORDERD_CASSANDRA_TLS_SKIP_HOST_VERIFICATION"} {
				if denv[name] != jenv[name] {
					t.Errorf("%s: the Job has %q, the Deployment %q", name, jenv[name], denv[name])
				}
			}
			if j.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever && j.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyOnFailure {
				t.Errorf("restartPolicy %q", j.Spec.Template.Spec.RestartPolicy)
			}
		})
	}
}

// What the production overlay promises over the base.
func TestProductionOverlay(t *testing.T) {
	objs := render(t, "overlays/production")
	d := one[appsv1.Deployment](t, objs)
	img := d.Spec.Template.Spec.Containers[0].Image
	if !regexp.MustCompile(`@sha256:[0-9a-f]{64}$`).MatchString(img) {
		t.Errorf("image %s is not pinned by digest", img)
	}
	for _, o := range objs {
		clusterScoped := o.Kind == "PriorityClass" || o.Kind == "Namespace"
		if o.Namespace != "orderd" && !clusterScoped {
			t.Errorf("%s is in namespace %q, want orderd", o, o.Namespace)
		}
	}
	ns := one[corev1.Namespace](t, objs)
	if ns.Name != "orderd" || ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Errorf("the overlay must create namespace orderd enforcing Pod Security restricted, got %s %v", ns.Name, ns.Labels)
	}
	for _, c := range d.Spec.Template.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable != corev1.DoNotSchedule {
			t.Errorf("spread over %s is %s, want DoNotSchedule", c.TopologyKey, c.WhenUnsatisfiable)
		}
	}
	pdb := one[policyv1.PodDisruptionBudget](t, objs)
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MaxUnavailable != nil {
		t.Error("the production budget must set minAvailable (and not maxUnavailable)")
	}
	hpa := one[autoscalingv2.HorizontalPodAutoscaler](t, objs)
	if *hpa.Spec.MinReplicas < 6 {
		t.Errorf("production minReplicas %d, want at least 6", *hpa.Spec.MinReplicas)
	}
	if pc := d.Spec.Template.Spec.PriorityClassName; pc != "" {
		found := false
		for _, o := range objs {
			found = found || (o.Kind == "PriorityClass" && o.Name == pc)
		}
		if !found {
			t.Errorf("priorityClassName %s is not rendered", pc)
		}
	}
}

// orderd's settings name the Cassandra datacenter and the Kafka cluster
// and topic of ../cassandra and ../kafka as those operators name them, by
// names that resolve from orderd's namespace, and its network policy lets
// it reach them.
func TestSettingsMatchTheDataServices(t *testing.T) {
	base := render(t, "base")
	env := podEnv(t, base, one[appsv1.Deployment](t, base).Spec.Template.Spec.Containers[0])
	migrate := render(t, "migrate")
	migEnv := podEnv(t, migrate, one[batchv1.Job](t, migrate).Spec.Template.Spec.Containers[0])
	egress := egressPeers(one[networkingv1.NetworkPolicy](t, base))

	for _, o := range render(t, "cassandra") {
		if o.Kind != "CassandraDatacenter" {
			continue
		}
		spec := fields(t, o)["spec"].(map[string]any)
		cluster, dc := spec["clusterName"].(string), o.Name
		want := cluster + "-" + dc + "-service." + o.Namespace + ".svc"
		for name, e := range map[string]map[string]string{"serve": env, "migrate": migEnv} {
			if e["ORDERD_CASSANDRA_CONTACT_POINTS"] != want {
				t.Errorf("%s: ORDERD_CASSANDRA_CONTACT_POINTS=%s, want cass-operator's service %s", name, e["ORDERD_CASSANDRA_CONTACT_POINTS"], want)
			}
		}
		if env["ORDERD_LOCAL_DC"] != dc {
			t.Errorf("ORDERD_LOCAL_DC=%s, the datacenter is %s", env["ORDERD_LOCAL_DC"], dc)
		}
		if !egress[o.Namespace+":9042"] {
			t.Errorf("the NetworkPolicy lets orderd reach no pod of namespace %s on 9042 (have %v)", o.Namespace, egress)
		}
		racks := len(spec["racks"].([]any))
		if rf, _ := strconv.Atoi(migEnv["ORDERD_REPLICATION_FACTOR"]); rf != racks {
			t.Errorf("ORDERD_REPLICATION_FACTOR=%d, want one replica per rack (%d)", rf, racks)
		}
		yaml := spec["config"].(map[string]any)["cassandra-yaml"].(map[string]any)
		if yaml["paxos_variant"] != "v2" || yaml["paxos_state_purging"] != "repaired" {
			t.Errorf("want paxos_variant v2 and paxos_state_purging repaired, got %v and %v", yaml["paxos_variant"], yaml["paxos_state_purging"])
		}
	}

	var topics []string
	for _, o := range render(t, "kafka") {
		m := fields(t, o)
		switch o.Kind {
		case "Kafka":
			port := scramTLSListenerPort(t, m)
			want := fmt.Sprintf("%s-kafka-bootstrap.%s.svc:%d", o.Name, o.Namespace, port)
			if env["ORDERD_KAFKA_BROKERS"] != want {
				t.Errorf("ORDERD_KAFKA_BROKERS=%s, want Strimzi's bootstrap service on the SCRAM-over-TLS listener, %s", env["ORDERD_KAFKA_BROKERS"], want)
			}
			if !egress[fmt.Sprintf("%s:%d", o.Namespace, port)] {
				t.Errorf("the NetworkPolicy lets orderd reach no pod of namespace %s on %d (have %v)", o.Namespace, port, egress)
			}
		case "KafkaTopic":
			topics = append(topics, o.Name)
			if o.Name != env["ORDERD_KAFKA_TOPIC"] {
				continue
			}
			parts := m["spec"].(map[string]any)["partitions"].(float64)
			if want, _ := strconv.Atoi(env["ORDERD_KAFKA_PARTITIONS"]); int(parts) != want {
				t.Errorf("topic %s has %v partitions, ORDERD_KAFKA_PARTITIONS is %d", o.Name, parts, want)
			}
		}
	}
	sort.Strings(topics)
	if i := sort.SearchStrings(topics, env["ORDERD_KAFKA_TOPIC"]); i == len(topics) || topics[i] != env["ORDERD_KAFKA_TOPIC"] {
		t.Errorf("no KafkaTopic for ORDERD_KAFKA_TOPIC=%s (have %v)", env["ORDERD_KAFKA_TOPIC"], topics)
	}
}

// egressPeers are the "namespace:port" pairs a NetworkPolicy's egress
// rules allow to a namespace chosen by name.
func egressPeers(np *networkingv1.NetworkPolicy) map[string]bool {
	out := map[string]bool{}
	for _, rule := range np.Spec.Egress {
		for _, to := range rule.To {
			if to.NamespaceSelector == nil {
				continue
			}
			ns := to.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"]
			for _, p := range rule.Ports {
				if p.Port != nil {
					out[ns+":"+p.Port.String()] = true
				}
			}
		}
	}
	return out
}

// scramTLSListenerPort is the port of the Kafka's listener that takes TLS
// and SCRAM-SHA-512; it fails the test if there is none, or if another
// listener takes anything less.
func scramTLSListenerPort(t *testing.T, kafka map[string]any) int {
	t.Helper()
	listeners := kafka["spec"].(map[string]any)["kafka"].(map[string]any)["listeners"].([]any)
	port := 0
	for _, l := range listeners {
		l := l.(map[string]any)
		auth, _ := l["authentication"].(map[string]any)
		if l["tls"] != true || auth["type"] != "scram-sha-512" {
			t.Errorf("listener %v: want TLS and SCRAM-SHA-512 on every listener", l["name"])
			continue
		}
		port = int(l["port"].(float64))
	}
	if port == 0 {
		t.Fatal("the Kafka has no TLS listener with SCRAM-SHA-512 authentication")
	}
	authz, _ := kafka["spec"].(map[string]any)["kafka"].(map[string]any)["authorization"].(map[string]any)
	if authz["type"] != "simple" {
		t.Errorf("Kafka authorization is %v, want simple (the KafkaUsers' ACLs are enforced)", authz)
	}
	return port
}

// strimziKafkaVersions are the Kafka versions Strimzi 1.2.0 runs
// (testdata/crds/README.md): the CRD takes any string, the operator
// refuses the others.
var strimziKafkaVersions = []string{"4.2.0", "4.2.1", "4.3.0", "4.3.1"}

func TestKafkaVersionIsOneStrimziRuns(t *testing.T) {
	for _, o := range render(t, "kafka") {
		if o.Kind != "Kafka" {
			continue
		}
		v, _ := fields(t, o)["spec"].(map[string]any)["kafka"].(map[string]any)["version"].(string)
		if !slices.Contains(strimziKafkaVersions, v) {
			t.Errorf("Kafka %s runs version %q; Strimzi 1.2.0 runs %v", o.Name, v, strimziKafkaVersions)
		}
	}
}

// Each KafkaUser may touch the events topic and, for a consumer, its own
// group, and nothing else: no other topic, no prefix or wildcard, no
// cluster-wide operation.
func TestKafkaUsersReachOnlyTheEventsTopic(t *testing.T) {
	base := render(t, "base")
	topic := podEnv(t, base, one[appsv1.Deployment](t, base).Spec.Template.Spec.Containers[0])["ORDERD_KAFKA_TOPIC"]
	users := map[string]bool{}
	for _, o := range render(t, "kafka") {
		if o.Kind != "KafkaUser" {
			continue
		}
		users[o.Name] = true
		spec := fields(t, o)["spec"].(map[string]any)
		if auth := spec["authentication"].(map[string]any); auth["type"] != "scram-sha-512" {
			t.Errorf("KafkaUser %s authenticates by %v, want scram-sha-512", o.Name, auth["type"])
		}
		for _, a := range spec["authorization"].(map[string]any)["acls"].([]any) {
			r := a.(map[string]any)["resource"].(map[string]any)
			ok := r["patternType"] == "literal" &&
				((r["type"] == "topic" && r["name"] == topic) || (r["type"] == "group" && r["name"] == o.Name))
			if !ok {
				t.Errorf("KafkaUser %s: ACL on %v %v (%v): want only the literal topic %s or the group %s", o.Name, r["type"], r["name"], r["patternType"], topic, o.Name)
			}
		}
	}
	for _, want := range []string{"orderd", "orderconsumer"} {
		if !users[want] {
			t.Errorf("no KafkaUser %s", want)
		}
	}
}
