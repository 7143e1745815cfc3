package main

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/atlasmart/orderd/internal/domain/order"
)

// countered gives r rounds with these throughputs and p99s, each round of
// 100 orders having gained counters[i].
func countered(r Result, thr, p99 []float64, counters []map[string]float64) Result {
	for i := range thr {
		r.Rounds = append(r.Rounds, Round{Index: i, Requests: 100, Throughput: thr[i], P99ms: p99[i], Counters: counters[i]})
	}
	r.Throughput, r.P99ms = medianOf(thr), medianOf(p99)
	return r
}

func repeat(m map[string]float64, n int) []map[string]float64 {
	out := make([]map[string]float64, n)
	for i := range out {
		out[i] = maps.Clone(m)
	}
	return out
}

// The counters a round keeps are read from orderd's exposition format as
// Prometheus serves it: statements summed over lwt and outcome, the
// acknowledged deliveries apart from the failed ones.
func TestCountersOfOrderdMetrics(t *testing.T) {
	text := `# TYPE orderd_cql_duration_seconds histogram
orderd_cql_duration_seconds_bucket{lwt="true",outcome="ok",statement="update_reconciler_leases",le="+Inf"} 7
orderd_cql_duration_seconds_sum{lwt="true",outcome="ok",statement="update_reconciler_leases"} 0.5
orderd_cql_duration_seconds_count{lwt="true",outcome="ok",statement="update_reconciler_leases"} 7
orderd_cql_duration_seconds_bucket{lwt="true",outcome="error",statement="update_reconciler_leases",le="+Inf"} 2
orderd_cql_duration_seconds_sum{lwt="true",outcome="error",statement="update_reconciler_leases"} 0.1
orderd_cql_duration_seconds_count{lwt="true",outcome="error",statement="update_reconciler_leases"} 2
orderd_cql_duration_seconds_bucket{lwt="false",outcome="ok",statement="insert_orders_by_id",le="+Inf"} 40
orderd_cql_duration_seconds_sum{lwt="false",outcome="ok",statement="insert_orders_by_id"} 1
orderd_cql_duration_seconds_count{lwt="false",outcome="ok",statement="insert_orders_by_id"} 40
# TYPE orderd_replay_cache_hits_total counter
orderd_replay_cache_hits_total 3
# TYPE orderd_reconciler_passes_total counter
orderd_reconciler_passes_total 11
# TYPE orderd_outbox_deliveries_total counter
orderd_outbox_deliveries_total{result="acked"} 38
orderd_outbox_deliveries_total{result="failed"} 2
# TYPE orderd_outbox_publish_duration_seconds histogram
orderd_outbox_publish_duration_seconds_bucket{le="+Inf"} 40
orderd_outbox_publish_duration_seconds_sum 0.4
orderd_outbox_publish_duration_seconds_count 40
`
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	got := countersOf(families)
	want := map[string]float64{leaseStatement: 9, cqlPrefix + "insert_orders_by_id": 40, replayCacheHits: 3, reconcilerPasses: 11, deliveriesAcked: 38, publishes: 40}
	if !maps.Equal(got, want) {
		t.Errorf("countersOf = %v, want %v", got, want)
	}
	if d := counterDelta(map[string]float64{"a": 1, "b": 2}, map[string]float64{"a": 4, "b": 2, "c": 1}); !maps.Equal(d, map[string]float64{"a": 3, "c": 1}) {
		t.Errorf("counterDelta = %v, want a 3, c 1 (b unchanged left out)", d)
	}
}

// "Within 10%" is met only when every paired round is within, not met when
// none is (on either side), and needs minVerdictRounds rounds.
func TestBandVerdict(t *testing.T) {
	for _, tc := range []struct {
		ratios []float64
		want   string
	}{
		{[]float64{0.95, 1.05, 0.91, 1.09, 1}, "**met**"},
		{[]float64{0.8, 1.2, 0.85, 1.15, 0.7}, "**not met**"},
		{[]float64{0.95, 1.2, 0.91, 1.09, 1}, "not separated"},
		{[]float64{1, 1, 1}, "not separated"},
	} {
		if got := bandVerdict(0.1, tc.ratios); got != tc.want {
			t.Errorf("bandVerdict(0.1, %v) = %q, want %q", tc.ratios, got, tc.want)
		}
	}
}

// The instances section gives the three instances' throughput over one's
// with its verdict, the counters per 1,000 orders, and each round's p99
// beside its lease LWTs.
func TestWriteInstances(t *testing.T) {
	rs := []Result{
		countered(Result{Phase: "instances", Driver: "instances-1", Concurrency: 64}, []float64{100, 100, 100, 100, 100}, []float64{50, 51, 52, 53, 54},
			repeat(map[string]float64{leaseStatement: 2, cqlPrefix + "insert_orders_by_id": 100, reconcilerPasses: 1, cpuOrderd: 0.2, cpuCluster: 2}, 5)),
		countered(Result{Phase: "instances", Driver: "instances-3", Concurrency: 64}, []float64{80, 85, 82, 84, 81}, []float64{90, 91, 92, 93, 120},
			repeat(map[string]float64{leaseStatement: 6, cqlPrefix + "insert_orders_by_id": 100, reconcilerPasses: 3, lostLeases: 1}, 5)),
	}
	var b strings.Builder
	writeReport(&b, []Run{{Results: rs}}, "")
	got := b.String()
	for _, want := range []string{
		"| 64 | 1 | 100.0 (100.0–100.0) |",
		"| 1.02 | 20.00 | 10.00 | 0.00 | 0 | 2.000 | 20.000 |",
		"| 1.06 | 60.00 | 30.00 | 0.00 | 5 |",
		"- concurrency 64: throughput **not met** (median 0.82, rounds 0.80–0.85)",
		"r5 54.0/2 | 120.0/6",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
}

// The delivery cost section gives per-order statements by label, events and
// CPU of each party, and judges the goal at 64 streams only.
func TestWriteOutboxCost(t *testing.T) {
	on := map[string]float64{cqlPrefix + "insert_orders_by_id": 100, cqlPrefix + "update_due_requests": 50, deliveriesAcked: 100, publishes: 100, cpuBroker: 0.3, cpuOrderd: 0.4, cpuCluster: 3}
	off := map[string]float64{cqlPrefix + "insert_orders_by_id": 100, cqlPrefix + "update_due_requests": 20, cpuBroker: 0.05, cpuOrderd: 0.3, cpuCluster: 2.5}
	rs := []Result{
		countered(Result{Phase: "outbox", Driver: "outbox-on", Concurrency: 16}, []float64{90, 90, 90, 90, 90}, []float64{1, 1, 1, 1, 1}, repeat(on, 5)),
		countered(Result{Phase: "outbox", Driver: "outbox-off", Concurrency: 16}, []float64{100, 100, 100, 100, 100}, []float64{1, 1, 1, 1, 1}, repeat(off, 5)),
		countered(Result{Phase: "outbox", Driver: "outbox-on", Concurrency: 64}, []float64{95, 92, 91, 96, 99}, []float64{1, 1, 1, 1, 1}, repeat(on, 5)),
		countered(Result{Phase: "outbox", Driver: "outbox-off", Concurrency: 64}, []float64{100, 100, 100, 100, 100}, []float64{1, 1, 1, 1, 1}, repeat(off, 5)),
	}
	var b strings.Builder
	writeReport(&b, []Run{{Results: rs}}, "")
	got := b.String()
	for _, want := range []string{
		"| 64 | outbox-on | 1.50 | 1.00 | 1.00 | 4.00 | 30.00 | 3.00 |",
		"| 64 | outbox-off | 1.20 | 0.00 | 0.00 | 3.00 | 25.00 | 0.50 |",
		"| update_due_requests | 0.500 | 0.200 | +0.300 |",
		"- concurrency 16: throughput on / off median 0.90, rounds 0.90–0.90 (the goal is set at 64)",
		"- concurrency 64: throughput on / off median 0.95, rounds 0.91–0.99 **met**",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
}

// The outbox phase matches a topic's records and the consumer's inbox rows
// to its answers by the id orderd gives the order's event.
func TestCreatedEventIDIsTheEventsID(t *testing.T) {
	id := uuid.New()
	o := order.New(benchTenant, id, benchCommand(1), time.Now().UTC())
	if got, want := createdEventID(id.String()), order.CreatedEvent(o).ID.String(); got != want {
		t.Errorf("createdEventID(%s) = %s, want the event's id %s", id, got, want)
	}
}
