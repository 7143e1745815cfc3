package metrics

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"
	"google.golang.org/grpc"

	"github.com/atlasmart/orderd/reconciler"
)

// catalogRegistry is the registry of an orderd serve with a reconciler, every
// vector with a series, as a running process has.
func catalogRegistry(t *testing.T) *prometheus.Registry {
	t.Helper()
	m, reg := newMetrics(t)
	if err := m.RegisterReconciler(func() reconciler.Stats { return reconciler.Stats{} }); err != nil {
		t.Fatal(err)
	}
	// A vector is gathered only once it has a child: give every one a
	// series, as a running process does.
	_, _ = m.UnaryServerInterceptor()(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/x/Y"},
		func(context.Context, any) (any, error) { return nil, nil })
	NewCQLObserver(m, nil).ObserveQuery(context.Background(),
		gocql.ObservedQuery{Statement: "SELECT * FROM t", Start: time.Now(), End: time.Now()})
	m.Served("default", "/x/Y", "OK")
	exerciseKafkaHook(t, m)

	return reg
}

func mustGather(t *testing.T, reg *prometheus.Registry) []*dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

var update = flag.Bool("update", false, "rewrite the metric catalog (deploy/monitoring/testdata/metrics.txt)")

// catalogFile is where the monitoring module (deploy/monitoring, its own Go
// module) reads the names its alert rules and dashboard may use.
var catalogFile = filepath.Join("..", "..", "..", "deploy", "monitoring", "testdata", "metrics.txt")

const catalogHeader = `# Every metric series name orderd exports (orderd serve with a reconciler),
# sorted; histograms and summaries with their _bucket, _sum and _count.
# Generated: go test ./internal/adapters/metrics/ -run TestMetricCatalog -update
`

// TestMetricCatalog keeps the catalog of exported names, which the
// monitoring module checks every alert rule and dashboard query against,
// equal to what New and RegisterReconciler register: a metric renamed here
// fails this test until the catalog is regenerated, and then the rules or
// panels that still use the old name fail theirs.
func TestMetricCatalog(t *testing.T) {
	if runtime.GOOS != "linux" {
		// The process collector exports a different set elsewhere; orderd
		// runs on Linux.
		t.Skip("the catalog is of a Linux process")
	}
	mfs := mustGather(t, catalogRegistry(t))
	var names []string
	for _, mf := range mfs {
		n := mf.GetName()
		switch mf.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			names = append(names, n+"_bucket", n+"_sum", n+"_count")
		case dto.MetricType_SUMMARY:
			names = append(names, n, n+"_sum", n+"_count")
		default:
			names = append(names, n)
		}
	}
	slices.Sort(names)
	got := catalogHeader + strings.Join(names, "\n") + "\n"

	if *update {
		if err := os.MkdirAll(filepath.Dir(catalogFile), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(catalogFile, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(catalogFile)
	if err != nil {
		t.Fatalf("%v (regenerate: go test ./internal/adapters/metrics/ -run TestMetricCatalog -update)", err)
	}
	if string(want) != got {
		wantSet := strings.Split(strings.TrimSpace(string(want)), "\n")
		for _, n := range names {
			if !slices.Contains(wantSet, n) {
				t.Errorf("exported but not in %s: %s", catalogFile, n)
			}
		}
		for _, n := range wantSet {
			if !strings.HasPrefix(n, "#") && !slices.Contains(names, n) {
				t.Errorf("in %s but not exported: %s", catalogFile, n)
			}
		}
		t.Errorf("%s is out of date: go test ./internal/adapters/metrics/ -run TestMetricCatalog -update", catalogFile)
	}
}

// exerciseKafkaHook gives the Kafka client metrics the series a publisher
// that connects, fails once and produces has. The client is made (which
// registers them) and never dials: no broker is needed.
func exerciseKafkaHook(t *testing.T, m *Metrics) {
	hook := m.KafkaHook()
	client, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.WithHooks(hook))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close) // Close unregisters the metrics: after the gather
	k := hook.(*kprom.Metrics)
	broker, failed := kgo.BrokerMetadata{NodeID: 1}, errors.New("refused")
	for _, err := range []error{nil, failed} {
		k.OnBrokerConnect(broker, 0, nil, err)
		k.OnBrokerE2E(broker, 0, kgo.BrokerE2E{BytesWritten: 1, BytesRead: 1, WriteErr: err})
		k.OnBrokerE2E(broker, 0, kgo.BrokerE2E{BytesWritten: 1, ReadErr: err})
	}
	k.OnBrokerDisconnect(broker, nil)
	k.OnProduceBatchWritten(broker, "events", 0, kgo.ProduceBatchMetrics{NumRecords: 1, CompressedBytes: 1, UncompressedBytes: 1})
}
