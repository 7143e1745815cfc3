package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

// Every metric orderd exports (the catalog's registry: orderd's own, the
// standard gRPC server metrics, the Go runtime and process collectors)
// passes promlint, the Prometheus client library's linter of names, units,
// suffixes and help texts: what `promtool check metrics` reports to an
// operator who runs it against /metrics.
func TestEveryMetricPassesPromlint(t *testing.T) {
	reg := catalogRegistry(t)
	problems, err := promlint.NewWithMetricFamilies(mustGather(t, reg)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}
