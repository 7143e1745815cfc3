package main

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/atlasmart/orderd/internal/tools/clientcreds"
	"github.com/atlasmart/orderd/internal/tools/freeport"
)

// Counter names a round keeps (Round.Counters). Statements are keyed by
// their orderd_cql_duration_seconds label under cqlPrefix; CPU seconds of
// each party under cpuPrefix.
const (
	cqlPrefix        = "cql:"
	cpuPrefix        = "cpu:"
	cpuOrderd        = cpuPrefix + "orderd"
	cpuCluster       = cpuPrefix + "cluster"
	cpuBroker        = cpuPrefix + "broker"
	replayCacheHits  = "replay_cache_hits"
	reconcilerPasses = "reconciler_passes"
	lostLeases       = "reconciler_lost_leases"
	deliveriesAcked  = "outbox_acked"
	publishes        = "outbox_publishes"
	leaseStatement   = cqlPrefix + "update_reconciler_leases"
)

// meteredOrderd is an orderd whose /metrics the benchmark reads.
type meteredOrderd struct {
	*orderdProc
	metrics string // host:port of /metrics
}

// startMeteredOrderd starts orderd with its metrics on a port of its own.
func startMeteredOrderd(bin string, env []string, creds clientcreds.Options) (*meteredOrderd, error) {
	addr, err := freeport.Addr()
	if err != nil {
		return nil, err
	}
	p, err := startOrderd(bin, append(slices.Clone(env), "ORDERD_METRICS_ADDR="+addr), creds)
	if err != nil {
		return nil, err
	}
	return &meteredOrderd{orderdProc: p, metrics: addr}, nil
}

// scrape reads the counters orderd exports that say what a round cost it:
// statements by label (every attempt, every outcome), replay-cache hits,
// reconciler passes and lost leases, events published and acknowledged.
// A failed read is an empty map: the round then shows no counters.
func (m *meteredOrderd) scrape() map[string]float64 {
	out := map[string]float64{}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+m.metrics+"/metrics", nil)
	if err != nil {
		return out
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(os.Stderr, "orderbench: read the metrics of orderd (pid %d): %v\n", m.pid(), err)
		return out
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		fmt.Fprintf(os.Stderr, "orderbench: parse the metrics of orderd (pid %d): %v\n", m.pid(), err)
		return out
	}
	return countersOf(families)
}

// countersOf picks the counters scrape keeps out of parsed metric families.
func countersOf(families map[string]*dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	if f, ok := families["orderd_cql_duration_seconds"]; ok {
		for _, m := range f.GetMetric() {
			out[cqlPrefix+label(m, "statement")] += float64(m.GetHistogram().GetSampleCount())
		}
	}
	single := map[string]string{
		"orderd_replay_cache_hits_total":         replayCacheHits,
		"orderd_reconciler_passes_total":         reconcilerPasses,
		"orderd_reconciler_lost_leases_total":    lostLeases,
		"orderd_outbox_publish_duration_seconds": publishes,
	}
	for name, key := range single {
		for _, m := range families[name].GetMetric() {
			out[key] += m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
		}
	}
	for _, m := range families["orderd_outbox_deliveries_total"].GetMetric() {
		if label(m, "result") == "acked" {
			out[deliveriesAcked] += m.GetCounter().GetValue()
		}
	}
	return out
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// orderdCounters sums the counters of several orderd processes and adds
// the CPU seconds so far of them, of the Cassandra JVMs and of the broker.
func orderdCounters(ps ...*meteredOrderd) func() map[string]float64 {
	return func() map[string]float64 {
		out := map[string]float64{cpuCluster: clusterCPU().Seconds(), cpuBroker: brokerCPU().Seconds()}
		for _, p := range ps {
			for k, v := range p.scrape() {
				out[k] += v
			}
			out[cpuOrderd] += procCPU(p.pid()).Seconds()
		}
		return out
	}
}

// brokerCPU sums the CPU time of every Kafka broker on this machine.
func brokerCPU() time.Duration {
	var total time.Duration
	for _, pid := range javaProcesses("kafka.Kafka") {
		total += procCPU(pid)
	}
	return total
}

func readCounters(d driver) map[string]float64 {
	if d.counters == nil {
		return nil
	}
	return d.counters()
}

// counterDelta is what every counter of after gained since before; nil
// when there is nothing to compare.
func counterDelta(before, after map[string]float64) map[string]float64 {
	if before == nil || after == nil {
		return nil
	}
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// perOrder is counter key's total over r's rounds per request of them.
func perOrder(r Result, key string) float64 {
	total, n := 0.0, 0
	for _, x := range r.Rounds {
		total += x.Counters[key]
		n += x.Requests
	}
	if n == 0 {
		return 0
	}
	return total / float64(n)
}

// statementLabels lists, sorted, the statements any round of rs ran.
func statementLabels(rs ...Result) []string {
	seen := map[string]bool{}
	for _, r := range rs {
		for _, x := range r.Rounds {
			for k := range x.Counters {
				if strings.HasPrefix(k, cqlPrefix) {
					seen[k] = true
				}
			}
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// hasCounters says whether any round of r kept counters.
func hasCounters(r Result) bool {
	return slices.ContainsFunc(r.Rounds, func(x Round) bool { return len(x.Counters) > 0 })
}
