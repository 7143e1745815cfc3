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
		{Phase: "compare", Driver: "orderd", Concurrency: 64, Throughput: 160, P50ms: 6, OrderdCPUPer1k: 0.1, ClusterCPUPer1k: 4},
		{Phase: "compare", Driver: "two-lwt", Concurrency: 64, Throughput: 100, P50ms: 10},
		{Phase: "compare", Driver: "one-lwt", Concurrency: 64, Throughput: 170, P50ms: 5},
		{Phase: "storm", Driver: "orderd", Outcome: "new", Concurrency: 64, Requests: 300, Throughput: 200, P50ms: 40},
		{Phase: "storm", Driver: "orderd", Outcome: "replayed", Concurrency: 64, Requests: 300, Throughput: 100, P50ms: 60},
	}}
	var b strings.Builder
	writeReport(&b, []Run{run}, "")
	got := b.String()
	for _, want := range []string{
		"| 16 | 0.90 | 1.10 | 0.60 | 2.00 | 1.50 | 0.55 | 0.25 |",
		"concurrency 16: throughput ≥ 1.5x two-lwt **not met** (0.90); ≥ 0.9x one-lwt **not met** (0.60); p50 ≤ 0.7x two-lwt **not met** (1.10); CPU ≤ 5% **not met** (0.250)",
		"concurrency 64: throughput ≥ 1.5x two-lwt **met** (1.60); ≥ 0.9x one-lwt **met** (0.94); p50 ≤ 0.7x two-lwt **met** (0.60); CPU ≤ 5% **met** (0.025)",
		"replay throughput / new throughput = 0.50 (goal ≥ 10); replay p50 / new p50 = 1.50 (goal ≤ 0.1)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
}

// The driver bound is each statement kind's client CPU as a share of the
// cluster's, and its verdict follows the least share of the run, whichever
// way it falls.
func TestReportDriverBound(t *testing.T) {
	results := func(claimClient float64) []Result {
		return []Result{
			// One stream is shown but not taken for the bound.
			{Phase: "compare", Driver: "claim", Concurrency: 1, ClientCPUPer1k: 0.01, ClusterCPUPer1k: 2},
			{Phase: "compare", Driver: "orderd", Concurrency: 16, OrderdCPUPer1k: 0.6, ClusterCPUPer1k: 5},
			{Phase: "compare", Driver: "one-lwt", Concurrency: 16, ClientCPUPer1k: 0.5, ClusterCPUPer1k: 5},
			{Phase: "compare", Driver: "floor", Concurrency: 16, ClientCPUPer1k: 0.2, ClusterCPUPer1k: 1},
			{Phase: "compare", Driver: "claim", Concurrency: 16, ClientCPUPer1k: claimClient, ClusterCPUPer1k: 2},
			{Phase: "compare", Driver: "orderd", Concurrency: 64, OrderdCPUPer1k: 0.4, ClusterCPUPer1k: 4},
			{Phase: "compare", Driver: "floor", Concurrency: 64, ClientCPUPer1k: 0.15, ClusterCPUPer1k: 1},
		}
	}
	for _, tc := range []struct {
		name        string
		claimClient float64
		want        []string
	}{
		{"every kind above the goal", 0.18, []string{
			"| 16 | 0.090 | 0.200 | 0.100 | 0.120 | 0.020 |",
			"| 64 | – | 0.150 | – | 0.100 | – |",
			"| 1 | 0.005 | – | – | – | – |",
			"is 0.090 in this run (claim at concurrency 16).",
			"the one-LWT protocol's CPU goal (≤ 0.05) is below what the driver alone costs here",
		}},
		{"a kind under the goal", 0.08, []string{
			"| 16 | 0.040 | 0.200 | 0.100 | 0.120 | 0.020 |",
			"is 0.040 in this run (claim at concurrency 16).",
			"in this run the driver's own cost does not rule the goal out",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			writeReport(&b, []Run{{Results: results(tc.claimClient)}}, "")
			got := b.String()
			for _, want := range tc.want {
				if !strings.Contains(got, want) {
					t.Errorf("report lacks %q:\n%s", want, got)
				}
			}
		})
	}
}
