package main

import (
	"strings"
	"testing"
)

// The report puts orderd against both plans, and the storm's replays
// against its new requests, as ratios of results from the same run.
func TestReportRatios(t *testing.T) {
	run := Run{Results: []Result{
		{Phase: "compare", Driver: "orderd", Concurrency: 16, Throughput: 90, P50ms: 22, OrderdCPUPer1k: 1, ClusterCPUPer1k: 4},
		{Phase: "compare", Driver: "two-lwt", Concurrency: 16, Throughput: 100, P50ms: 20},
		{Phase: "compare", Driver: "one-lwt", Concurrency: 16, Throughput: 150, P50ms: 11},
		{Phase: "compare", Driver: "naive", Concurrency: 16, Throughput: 80, P50ms: 25},
		{Phase: "storm", Driver: "orderd", Outcome: "new", Concurrency: 64, Requests: 300, Throughput: 200, P50ms: 40},
		{Phase: "storm", Driver: "orderd", Outcome: "replayed", Concurrency: 64, Requests: 300, Throughput: 100, P50ms: 60},
	}}
	var b strings.Builder
	writeReport(&b, []Run{run}, "")
	got := b.String()
	for _, want := range []string{
		"| 16 | 0.90 | 1.10 | 0.60 | 2.00 | 1.50 | 0.55 | 0.25 |",
		"concurrency 16: p50 within 1.10x of two-lwt **met** (1.10)",
		"replay throughput / new throughput = 0.50; replay p50 / new p50 = 1.50",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
}
