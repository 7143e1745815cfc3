package docker

import (
	"context"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
)

// load reads a compose file as `docker compose` does: schema validation,
// normalisation and the consistency check on, interpolated from an empty
// environment so that nothing on the test machine leaks in.
func load(t *testing.T, file string) (*types.Project, error) {
	t.Helper()
	return loadWith(t, types.Mapping{}, file)
}

// loadWith reads files as `docker compose -f A -f B` does (each later file
// overriding the earlier ones), interpolated from env.
func loadWith(t *testing.T, env types.Mapping, files ...string) (*types.Project, error) {
	t.Helper()
	details := types.ConfigDetails{WorkingDir: ".", Environment: env}
	for _, f := range files {
		details.ConfigFiles = append(details.ConfigFiles, types.ConfigFile{Filename: f})
	}
	return loader.LoadWithContext(context.Background(), details)
}

// interpolation is a ${...} compose reads (not $${...}, which it leaves
// to the container's shell); defaulted is one with a default.
var (
	interpolation = regexp.MustCompile(`(^|[^$])\$\{[^}]*\}`)
	defaulted     = regexp.MustCompile(`\$\{[A-Z_]+:-[^}]+\}$`)
)

// service is the project's service name; the test stops if there is none.
func service(t *testing.T, p *types.Project, name string) types.ServiceConfig {
	t.Helper()
	s, err := p.GetService(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestComposeFile(t *testing.T) {
	raw, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The file runs as written: a variable only replaces a default (the
	// images, for machines that build their own).
	for _, m := range interpolation.FindAllString(string(raw), -1) {
		if !defaulted.MatchString(m) {
			t.Errorf("compose.yaml interpolates %q without a default: the file should run as written", m)
		}
	}
	p, err := load(t, "compose.yaml")
	if err != nil {
		t.Fatalf("compose.yaml does not load: %v", err)
	}
	if p.Name != "atlasmart-orderd" {
		t.Errorf("project name %q", p.Name)
	}
	svc := func(name string) types.ServiceConfig { return service(t, p, name) }

	// Three Cassandra nodes, one per rack, with Paxos v2, each with a
	// volume; the later ones start after the earlier ones are healthy.
	racks := map[string]bool{}
	for i, name := range []string{"cassandra-1", "cassandra-2", "cassandra-3"} {
		c := svc(name)
		if !strings.HasPrefix(c.Image, "cassandra:5.0") {
			t.Errorf("%s runs %s, want cassandra:5.0", name, c.Image)
		}
		if c.HealthCheck == nil || len(c.HealthCheck.Test) == 0 {
			t.Errorf("%s has no healthcheck", name)
		}
		if !strings.Contains(strings.Join(c.Entrypoint, "\n"), "paxos_variant: v2") {
			t.Errorf("%s does not set paxos_variant: v2", name)
		}
		if !strings.Contains(strings.Join(c.Entrypoint, "\n"), "paxos_state_purging: repaired") {
			t.Errorf("%s does not set paxos_state_purging: repaired", name)
		}
		racks[envValue(c, "CASSANDRA_RACK")] = true
		if len(c.Volumes) != 1 || c.Volumes[0].Target != "/var/lib/cassandra" {
			t.Errorf("%s: want its data in a volume at /var/lib/cassandra", name)
		}
		if envValue(c, "CASSANDRA_DC") != "dc1" {
			t.Errorf("%s: CASSANDRA_DC %q, want dc1 (orderd's ORDERD_LOCAL_DC default)", name, envValue(c, "CASSANDRA_DC"))
		}
		for _, before := range []string{"cassandra-1", "cassandra-2"}[:i] {
			if d, ok := c.DependsOn[before]; !ok || d.Condition != types.ServiceConditionHealthy {
				t.Errorf("%s must wait for %s to be healthy (one bootstrap at a time)", name, before)
			}
		}
	}
	if len(racks) != 3 {
		t.Errorf("want three racks, got %v", racks)
	}

	// orderd: migrated before it serves, TLS from the dev-setup volume, the
	// listen addresses and published ports, run as the image's non-root user.
	orderd, migrate := svc("orderd"), svc("orderd-migrate")
	for _, dep := range []string{"orderd-migrate", "orderd-dev-setup"} {
		if d, ok := orderd.DependsOn[dep]; !ok || d.Condition != types.ServiceConditionCompletedSuccessfully {
			t.Errorf("orderd must wait for %s to complete successfully", dep)
		}
	}
	if d, ok := orderd.DependsOn["kafka"]; !ok || d.Condition != types.ServiceConditionHealthy {
		t.Error("orderd must wait for kafka to be healthy")
	}
	for _, n := range []string{"cassandra-1", "cassandra-2", "cassandra-3"} {
		if d, ok := migrate.DependsOn[n]; !ok || d.Condition != types.ServiceConditionHealthy {
			t.Errorf("orderd-migrate must wait for %s to be healthy", n)
		}
	}
	if !slices.Equal([]string(migrate.Command), []string{"migrate"}) || migrate.Restart != "no" {
		t.Errorf("orderd-migrate runs %v (restart %q), want [migrate] once", migrate.Command, migrate.Restart)
	}
	if !slices.Equal([]string(orderd.Command), []string{"serve"}) {
		t.Errorf("orderd runs %v, want [serve]", orderd.Command)
	}
	for k, want := range map[string]string{
		"ORDERD_GRPC_ADDR":                "0.0.0.0:8080",
		"ORDERD_HEALTH_ADDR":              "0.0.0.0:8081",
		"ORDERD_METRICS_ADDR":             "0.0.0.0:9090",
		"ORDERD_CASSANDRA_CONTACT_POINTS": "cassandra-1,cassandra-2,cassandra-3",
		"ORDERD_KAFKA_BROKERS":            "kafka:9092",
		"ORDERD_KAFKA_PLAINTEXT":          "true", // orderd refuses a broker without a login otherwise
	} {
		if got := envValue(orderd, k); got != want {
			t.Errorf("orderd %s=%q, want %q", k, got, want)
		}
	}
	if envValue(orderd, "ORDERD_TLS_CERT_FILE") == "" || envValue(orderd, "ORDERD_API_KEYS_FILE") == "" {
		t.Error("orderd must serve TLS and authenticate callers (docs/security.md)")
	}
	if envValue(orderd, "ORDERD_INSECURE") != "" {
		t.Error("orderd must not run -insecure")
	}
	if envValue(migrate, "ORDERD_KEYSPACE") != envValue(orderd, "ORDERD_KEYSPACE") || envValue(migrate, "ORDERD_CASSANDRA_CONTACT_POINTS") != envValue(orderd, "ORDERD_CASSANDRA_CONTACT_POINTS") {
		t.Error("orderd-migrate must migrate the keyspace and cluster orderd serves")
	}
	published := map[string]bool{}
	for _, port := range orderd.Ports {
		if port.HostIP != "127.0.0.1" {
			t.Errorf("orderd publishes %s on %q: publish on 127.0.0.1 only", port.Published, port.HostIP)
		}
		published[port.Published+":"+strconv.FormatUint(uint64(port.Target), 10)] = true
	}
	for _, want := range []string{"8080:8080", "8081:8081"} {
		if !published[want] {
			t.Errorf("orderd does not publish %s (have %v)", want, published)
		}
	}
	for _, name := range []string{"orderd", "orderd-migrate", "orderd-dev-setup"} {
		s := svc(name)
		if s.User != "" && s.User != "nonroot" && !strings.HasPrefix(s.User, "65532") {
			t.Errorf("%s runs as %q: the image's nonroot user (65532) is expected", name, s.User)
		}
		if s.Build == nil || s.Build.Dockerfile != "Dockerfile" {
			t.Errorf("%s must build the repo-root Dockerfile", name)
		}
		if s.Privileged {
			t.Errorf("%s is privileged", name)
		}
	}
}

// Every image can be swapped for one built elsewhere (deploy/docker/images)
// through its variable; unset, the official images are used.
func TestComposeImagesAreOverridable(t *testing.T) {
	p, err := loadWith(t, types.Mapping{
		"CASSANDRA_IMAGE": "orderd/cassandra:5.0.9",
		"KAFKA_IMAGE":     "orderd/kafka:4.4.0",
		"ORDERD_IMAGE":    "atlasmart/orderd:test",
	}, "compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"cassandra-1": "orderd/cassandra:5.0.9", "cassandra-2": "orderd/cassandra:5.0.9", "cassandra-3": "orderd/cassandra:5.0.9",
		"kafka":  "orderd/kafka:4.4.0",
		"orderd": "atlasmart/orderd:test", "orderd-migrate": "atlasmart/orderd:test", "orderd-dev-setup": "atlasmart/orderd:test",
	}
	for name, image := range want {
		if s, err := p.GetService(name); err != nil || s.Image != image {
			t.Errorf("%s runs %q (%v), want %s", name, s.Image, err, image)
		}
	}
	// The healthcheck works in both Cassandra images: no cqlsh.
	c, _ := p.GetService("cassandra-1")
	if test := strings.Join(c.HealthCheck.Test, " "); strings.Contains(test, "cqlsh") {
		t.Errorf("cassandra healthcheck %q needs cqlsh, which orderd/cassandra lacks", test)
	}
}

// compose.host.yaml: every service on the host's network on its own
// loopback address, nothing on 127.0.0.1's ports a local cluster or
// broker uses, and each client pointed at the addresses its servers listen on.
func TestComposeHostOverride(t *testing.T) {
	p, err := loadWith(t, types.Mapping{}, "compose.yaml", "compose.host.yaml")
	if err != nil {
		t.Fatalf("compose.yaml with compose.host.yaml does not load: %v", err)
	}
	for _, s := range p.Services {
		if s.NetworkMode != "host" {
			t.Errorf("%s: network_mode %q, want host", s.Name, s.NetworkMode)
		}
		if len(s.Ports) != 0 || s.Hostname != "" {
			t.Errorf("%s: a host-network service publishes no ports (%v) and sets no hostname (%q)", s.Name, s.Ports, s.Hostname)
		}
	}
	svc := func(name string) types.ServiceConfig { return service(t, p, name) }
	var rpc []string
	jmx := map[string]bool{}
	for i, name := range []string{"cassandra-1", "cassandra-2", "cassandra-3"} {
		c := svc(name)
		addr := "127.0.0.2" + strconv.Itoa(i+1)
		for _, k := range []string{"CASSANDRA_LISTEN_ADDRESS", "CASSANDRA_BROADCAST_ADDRESS", "CASSANDRA_RPC_ADDRESS"} {
			if got := envValue(c, k); got != addr {
				t.Errorf("%s %s=%q, want %s", name, k, got, addr)
			}
		}
		if envValue(c, "CASSANDRA_SEEDS") != "127.0.0.21,127.0.0.22" {
			t.Errorf("%s seeds %q", name, envValue(c, "CASSANDRA_SEEDS"))
		}
		port := envValue(c, "JMX_PORT")
		if port == "" || port == "7199" || jmx[port] {
			t.Errorf("%s JMX_PORT %q: each node needs its own, not the default 7199", name, port)
		}
		jmx[port] = true
		rpc = append(rpc, addr)
	}
	kafka := svc("kafka")
	for _, k := range []string{"KAFKA_LISTENERS", "KAFKA_ADVERTISED_LISTENERS", "KAFKA_CONTROLLER_QUORUM_VOTERS"} {
		v := envValue(kafka, k)
		if !strings.Contains(v, "127.0.0.24:") || strings.Contains(v, "127.0.0.1") || strings.Contains(v, "://:") {
			t.Errorf("kafka %s=%q: want it on 127.0.0.24 only", k, v)
		}
	}
	if test := strings.Join(kafka.HealthCheck.Test, " "); !strings.Contains(test, "127.0.0.24:9092") {
		t.Errorf("kafka healthcheck %q does not ask the broker on 127.0.0.24:9092", test)
	}
	for _, name := range []string{"orderd", "orderd-migrate"} {
		s := svc(name)
		if got := envValue(s, "ORDERD_CASSANDRA_CONTACT_POINTS"); got != strings.Join(rpc, ",") {
			t.Errorf("%s contact points %q, want %s", name, got, strings.Join(rpc, ","))
		}
		if got := envValue(s, "ORDERD_KAFKA_BROKERS"); got != "127.0.0.24:9092" {
			t.Errorf("%s brokers %q, want 127.0.0.24:9092", name, got)
		}
		if got := envValue(s, "ORDERD_KAFKA_PLAINTEXT"); got != "true" {
			t.Errorf("%s ORDERD_KAFKA_PLAINTEXT=%q, want true: the broker serves PLAINTEXT", name, got)
		}
	}
	orderd := svc("orderd")
	for k, want := range map[string]string{
		"ORDERD_GRPC_ADDR": "127.0.0.25:8080", "ORDERD_HEALTH_ADDR": "127.0.0.25:8081", "ORDERD_METRICS_ADDR": "127.0.0.25:9090",
	} {
		if got := envValue(orderd, k); got != want {
			t.Errorf("orderd %s=%q, want %s", k, got, want)
		}
	}
	if cmd := strings.Join(svc("orderd-dev-setup").Command, " "); !strings.Contains(cmd, "-hosts 127.0.0.25") {
		t.Errorf("orderd-dev-setup runs %q: its server certificate must name 127.0.0.25", cmd)
	}
}

// The loader refuses what the Compose specification does not define, so a
// misspelt key in compose.yaml fails TestComposeFile.
func TestComposeLoaderRefusesUnknownFields(t *testing.T) {
	dir := t.TempDir()
	file := dir + "/compose.yaml"
	if err := os.WriteFile(file, []byte("name: x\nservices:\n  a:\n    image: busybox\n    depends_no: [b]\n  b:\n    image: busybox\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := load(t, file)
	if err == nil || !strings.Contains(err.Error(), "depends_no") {
		t.Fatalf("a misspelt key: got %v, want an error naming depends_no", err)
	}
}

func envValue(s types.ServiceConfig, k string) string {
	if v, ok := s.Environment[k]; ok && v != nil {
		return *v
	}
	return ""
}
