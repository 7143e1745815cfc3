package localcluster

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// cassandraPins are the places outside this package that name the Cassandra
// release, each with the pattern whose group 1 is the version there.
var cassandraPins = []struct{ file, pattern string }{
	{"deploy/docker/compose.yaml", `image: \$\{CASSANDRA_IMAGE:-cassandra:([0-9.]+)\}`},
	{"deploy/docker/images/build.sh", `CASSANDRA_IMAGE:=orderd/cassandra:([0-9.]+)\}`},
	{"deploy/docker/smoke.sh", `CASSANDRA_IMAGE:=orderd/cassandra:([0-9.]+)\}`},
	{"Makefile", `(?m)^IMAGE_CASSANDRA_VERSION \?= ([0-9.]+)$`},
	{"e2e/docker.go", `dockerDefaultImage = "cassandra:([0-9.]+)"`},
}

// Every place that names the Cassandra release names CassandraVersion: the
// local cluster, compose, the images and the e2e docker backend run one
// release, the one the suite passed on.
func TestOneCassandraVersionEverywhere(t *testing.T) {
	checkCassandraPins(t, cassandraPins)
	if c := (Config{}); c.setDefaults() != nil || c.Version != CassandraVersion {
		t.Errorf("the local cluster's default version is %q, want %s", c.Version, CassandraVersion)
	}
}

func checkCassandraPins(t *testing.T, pins []struct{ file, pattern string }) {
	t.Helper()
	for _, pin := range pins {
		src, err := os.ReadFile(filepath.Join("..", "..", "..", pin.file))
		if err != nil {
			t.Fatal(err)
		}
		found := regexp.MustCompile(pin.pattern).FindAllSubmatch(src, -1)
		if len(found) == 0 {
			t.Errorf("%s: no Cassandra version found (%s): update this test with the file", pin.file, pin.pattern)
		}
		for _, m := range found {
			if v := string(m[1]); v != CassandraVersion {
				t.Errorf("%s names Cassandra %s, want %s (localcluster.CassandraVersion): change every place at once", pin.file, v, CassandraVersion)
			}
		}
	}
}

// The K8ssandra example runs the same release: its CassandraDatacenter's
// serverVersion, read as text (deploy/kubernetes has its own checks of the
// manifest's structure).
func TestKubernetesRunsTheSameCassandraVersion(t *testing.T) {
	checkCassandraPins(t, []struct{ file, pattern string }{
		{"deploy/kubernetes/cassandra/cassandradatacenter.yaml", `(?m)^\s+serverVersion: "?([0-9.]+)"?\s*$`},
	})
}
