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

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/atlasmart/orderd/internal/cassandra"
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

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	ctx := context.Background()
	var err error
	cluster, err = OpenCluster(ctx, os.Stderr)
	if err != nil {
		// Never a silent skip: no cluster fails the run, in CI and out of it.
		fmt.Fprintf(os.Stderr, "e2e: FAIL: no Cassandra cluster: %v\n", err)
		return 1
	}
	defer func() {
		if err := cluster.Close(context.WithoutCancel(ctx)); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: stopping the cluster: %v\n", err)
		}
	}()
	fmt.Fprintf(os.Stderr, "e2e: cluster: %s\n", cluster.Describe())
	if err := logNodes(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: FAIL: cluster not usable: %v\n", err)
		return 1
	}

	if broker, err = OpenBroker(ctx, cluster, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: FAIL: no Kafka broker: %v\n", err)
		return 1
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
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := setUpSecurity(dir); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: FAIL: security setup: %v\n", err)
		return 1
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
			fmt.Fprintf(os.Stderr, "e2e: FAIL: build orderd: %v\n%s", err, out)
			return 1
		}
	}

	keyspace = fmt.Sprintf("e2e_%d", time.Now().UnixNano()/1e6)
	if out, err := runOrderd(ctx, "migrate", "--keyspace", keyspace); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: FAIL: migrate %s: %v\n%s", keyspace, err, out)
		return 1
	}
	defer dropKeyspace(ctx, keyspace)

	// The shared orderd runs no reconciler: reconciler tests start their own,
	// so that what finishes a request is always the thing under test.
	shared, err = launchOrderd("ORDERD_RECONCILER=false")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: FAIL: start the shared orderd: %v\n", err)
		return 1
	}
	defer func() {
		if err := shared.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		}
	}()
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "e2e: shared orderd output:\n%s\n", shared.output.String())
	}
	return code
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

// runOrderd runs the orderd binary to completion against the cluster.
func runOrderd(ctx context.Context, args ...string) (string, error) {
	return runOrderdEnv(ctx, nil, args...)
}

// runOrderdEnv is runOrderd with extra ORDERD_* settings (later ones win).
func runOrderdEnv(ctx context.Context, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, orderdBinary, args...)
	base := append(os.Environ(), "ORDERD_CASSANDRA_CONTACT_POINTS="+strings.Join(cluster.ContactPoints(), ","), "ORDERD_LOG_FORMAT=text")
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
