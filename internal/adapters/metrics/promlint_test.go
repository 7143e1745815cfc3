package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

// Every metric orderd exports (the catalog's registry: orderd's own, the
// standard gRPC server metrics, the Go runtime and process collectors)
// passes promlint, the Prometheus client library's linter of names, units,
// suffixes and help texts: what `promtool check metrics` reports to an
// operator who runs it against /metrics. The one exception is two gauges
// franz-go's Prometheus plugin (kprom) names itself, with a _total suffix
// it cannot be told to drop: renaming them here would hide them from the
// plugin's users' dashboards, and dropping them would hide the producer's
// buffer.
func TestEveryMetricPassesPromlint(t *testing.T) {
	namedByKprom := map[string]bool{
		Namespace + "_kafka_buffered_produce_records_total": true,
		Namespace + "_kafka_buffered_fetch_records_total":   true,
	}
	reg := catalogRegistry(t)
	problems, err := promlint.NewWithMetricFamilies(mustGather(t, reg)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if namedByKprom[p.Metric] {
			continue
		}
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}
