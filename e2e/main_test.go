package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/atlasmart/orderd/internal/tools/localcluster"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/atlasmart/orderd/internal/platform/cassandra"
)

// The run's shared state, set once by TestMain before any test starts.
var (
	cluster      Cluster
	orderdBinary string         // the built cmd/orderd
	keyspace     string         // migrated once for this run; dropped at the end
	shared       *orderdProcess // serves the tests that need no special settings
	broker       Broker         // the Kafka broker every orderd publishes to
	eventsTopic  string         // this run's topic of order events
)

// sharedOutputLines is how much of the shared orderd's log a failed run
// shows.
const sharedOutputLines = 100

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	ctx := context.Background()
	var err error
	cluster, err = OpenCluster(ctx, os.Stderr)
	if err != nil {
		// Never a silent skip: no cluster fails the run, in CI and out of it.
		return setupFailed("no Cassandra cluster", err)
	}
	defer func() {
		if err := cluster.Close(context.WithoutCancel(ctx)); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: stopping the cluster: %v\n", err)
		}
	}()
	fmt.Fprintf(os.Stderr, "e2e: cluster: %s\n", cluster.Describe())
	if err := logNodes(ctx); err != nil {
		return setupFailed("cluster not usable", err)
	}

	if broker, err = OpenBroker(ctx, cluster, os.Stderr); err != nil {
		return setupFailed("no Kafka broker", err)
	}
	defer func() {
		if err := broker.Close(context.WithoutCancel(ctx)); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: stopping the broker: %v\n", err)
		}
	}()
	eventsTopic = fmt.Sprintf("e2e.%d.events", time.Now().UnixNano()/1e6)
	fmt.Fprintf(os.Stderr, "e2e: kafka: %s, topic %s\n", broker.Describe(), eventsTopic)

	dir, err := os.MkdirTemp("", "orderd-e2e-")
	if err != nil {
		return setupFailed("temporary folder", err)
	}
	defer os.RemoveAll(dir)
	if err := setUpSecurity(dir); err != nil {
		return setupFailed("security setup", err)
	}
	// ORDERD_E2E_BINARY runs the suite against another build, e.g. an older
	// commit's, to show that a regression test fails there.
	orderdBinary = os.Getenv("ORDERD_E2E_BINARY")
	if orderdBinary == "" {
		orderdBinary = filepath.Join(dir, "orderd")
		// The test build: only it can arm failpoints and CQL faults.
		build := exec.Command("go", "build", "-tags", "failpoints", "-o", orderdBinary, "./cmd/orderd")
		build.Dir = repoRoot()
		out, err := build.CombinedOutput()
		if err != nil {
			return setupFailed("build orderd", err, string(out))
		}
	}

	keyspace = fmt.Sprintf("e2e_%d", time.Now().UnixNano()/1e6)
	if out, err := runOrderd(ctx, "migrate", "--keyspace", keyspace); err != nil {
		return setupFailed("migrate "+keyspace, err, out)
	}
	defer dropKeyspace(ctx, keyspace)

	// The shared orderd runs no reconciler: reconciler tests start their own,
	// so that what finishes a request is always the thing under test.
	shared, err = launchOrderd("ORDERD_RECONCILER=false")
	if err != nil {
		return setupFailed("start the shared orderd", err)
	}
	defer func() {
		if err := shared.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		}
	}()
	code := m.Run()
	if code != 0 {
		// Prefixed, so that make test-e2e shows it; the whole log is in the
		// go test output (bin/e2e.log).
		lines := strings.Split(strings.TrimRight(shared.output.String(), "\n"), "\n")
		from := max(0, len(lines)-sharedOutputLines)
		fmt.Fprintf(os.Stderr, "e2e: the shared orderd's last %d lines of %d:\n", len(lines)-from, len(lines))
		printLines("e2e: shared orderd: ", strings.Join(lines[from:], "\n"))
	}
	return code
}

// isolated marks a test that shares nothing another test can disturb or be
// disturbed by: it works in a keyspace (or a cluster) of its own, starts no
// reconciler on the run's keyspace and kills nothing. go test runs such
// tests side by side once every other test has run (make test-e2e's
// -parallel), so the node kills, pauses and broker restarts of the others
// never overlap them. Most of their time is schema changes and process
// starts, which wait more than they compute.
func isolated(t *testing.T) { t.Parallel() }

// setupFailed reports why the run could not start, and returns its exit code.
// Every line carries the "e2e:" prefix because make test-e2e shows only such
// lines, and the lines under the first (a Java tool's usage error, a compiler
// error) are the ones that say why.
func setupFailed(what string, err error, output ...string) int {
	text := fmt.Sprintf("FAIL: %s: %v", what, err)
	for _, out := range output {
		text += "\n" + out
	}
	printLines("e2e: ", text)
	return 1
}

// printLines writes text to stderr with prefix before each of its lines.
func printLines(prefix, text string) {
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		fmt.Fprintf(os.Stderr, "%s%s\n", prefix, line)
	}
}

// logNodes prints every node the driver sees, so the test output names the
// live nodes the run used.
func logNodes(ctx context.Context) error {
	s, err := cassandra.NewSession(cassandra.Config{Hosts: cluster.ContactPoints()})
	if err != nil {
		return err
	}
	defer s.Close()
	// Each node describes itself (system.local), so every live node is named
	// once whichever coordinator the driver picks.
	var nodes []string
	for _, h := range s.GetHosts() {
		var addr, dc, rack, version string
		if err := s.Query(`SELECT listen_address, data_center, rack, release_version FROM system.local`).
			Consistency(gocql.One).SetHostID(h.HostID()).ScanContext(ctx, &addr, &dc, &rack, &version); err != nil {
			return fmt.Errorf("read system.local on %s: %w", h.ConnectAddress(), err)
		}
		nodes = append(nodes, fmt.Sprintf("%s (%s/%s, Cassandra %s)", addr, dc, rack, version))
	}
	slices.Sort(nodes)
	fmt.Fprintf(os.Stderr, "e2e: %d live nodes: %s\n", len(nodes), strings.Join(nodes, ", "))
	return nil
}

// orderdEnv is the environment every orderd process starts from: this
// process's, with GOCOVERDIR set to ORDERD_E2E_GOCOVERDIR if that is set
// (scripts/cover.sh, with a binary built with -cover): `go test -cover`
// gives the test process a GOCOVERDIR of its own, which a child would
// otherwise inherit and whose data nothing reads.
func orderdEnv() []string {
	env := os.Environ()
	if dir := os.Getenv("ORDERD_E2E_GOCOVERDIR"); dir != "" {
		env = append(env, "GOCOVERDIR="+dir)
	}
	return env
}

// runOrderd runs the orderd binary to completion against the cluster.
func runOrderd(ctx context.Context, args ...string) (string, error) {
	return runOrderdEnv(ctx, nil, args...)
}

// runOrderdEnv is runOrderd with extra ORDERD_* settings (later ones win).
func runOrderdEnv(ctx context.Context, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, orderdBinary, args...)
	base := append(orderdEnv(), "ORDERD_CASSANDRA_CONTACT_POINTS="+strings.Join(cluster.ContactPoints(), ","), "ORDERD_LOG_FORMAT=text")
	base = append(base, kafkaEnv("ORDERD_", localcluster.OrderdUser)...)
	cmd.Env = append(append(base, sec.serverEnv()...), env...) // serve needs its TLS and keys
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func dropKeyspace(ctx context.Context, ks string) {
	s, err := cassandra.NewSession(cassandra.Config{Hosts: cluster.ContactPoints(), Timeout: 30 * time.Second})
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: drop keyspace %s: %v\n", ks, err)
		return
	}
	defer s.Close()
	if err := s.Query(`DROP KEYSPACE IF EXISTS ` + ks).ExecContext(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: drop keyspace %s: %v\n", ks, err)
	}
}
