package docker

import (
	"context"
	"os"
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
	details := types.ConfigDetails{
		WorkingDir:  ".",
		ConfigFiles: []types.ConfigFile{{Filename: file}},
		Environment: types.Mapping{},
	}
	return loader.LoadWithContext(context.Background(), details)
}

func TestComposeFile(t *testing.T) {
	raw, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "${") {
		t.Error("compose.yaml interpolates variables: the file should run as written")
	}
	p, err := load(t, "compose.yaml")
	if err != nil {
		t.Fatalf("compose.yaml does not load: %v", err)
	}
	if p.Name != "atlasmart-orderd" {
		t.Errorf("project name %q", p.Name)
	}
	svc := func(name string) types.ServiceConfig {
		t.Helper()
		s, err := p.GetService(name)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

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
