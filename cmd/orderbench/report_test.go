package main

import (
	"slices"
	"strings"
	"testing"
)

// rounded gives r five rounds with these throughputs and p50s, r's own
// figures their medians, as turns sets them.
func rounded(r Result, thr, p50 []float64) Result {
	for i := range thr {
		r.Rounds = append(r.Rounds, Round{Index: i, Throughput: thr[i], P50ms: p50[i]})
	}
	r.Throughput, r.P50ms = medianOf(thr), medianOf(p50)
	return r
}

// The report gives each driver's median over its rounds with their range,
// and judges orderd's goals on the rounds' paired ratios: met where every
// round meets a goal, not met where none does, "not separated" where the
// rounds fall on both sides. The storm's ratios are of the medians.
func TestReportRatios(t *testing.T) {
	run := Run{Results: []Result{
		// 16 streams: orderd/two-lwt throughput 0.90 every round (not met);
		// orderd/one-lwt throughput 0.85, 0.95, 0.90, 0.92, 0.88 (both
		// sides of 0.9: not separated).
		rounded(Result{Phase: "compare", Driver: "orderd", Concurrency: 16, OrderdCPUPer1k: 1, ClusterCPUPer1k: 4},
			[]float64{90, 95, 90, 92, 88}, []float64{22, 21, 23, 22, 24}),
		rounded(Result{Phase: "compare", Driver: "two-lwt", Concurrency: 16},
			[]float64{100, 105.56, 100, 102.22, 97.78}, []float64{20, 20, 20, 20, 20}),
		rounded(Result{Phase: "compare", Driver: "one-lwt", Concurrency: 16},
			[]float64{105.88, 100, 100, 100, 100}, []float64{20, 20, 20, 20, 20}),
		// 64 streams: every goal met in every round.
		rounded(Result{Phase: "compare", Driver: "orderd", Concurrency: 64, OrderdCPUPer1k: 0.1, ClusterCPUPer1k: 4},
			[]float64{160, 170, 150, 165, 155}, []float64{6, 6, 6, 6, 6}),
		rounded(Result{Phase: "compare", Driver: "two-lwt", Concurrency: 64},
			[]float64{100, 100, 100, 100, 100}, []float64{10, 10, 10, 10, 10}),
		rounded(Result{Phase: "compare", Driver: "one-lwt", Concurrency: 64},
			[]float64{170, 180, 160, 175, 165}, []float64{6, 5.8, 6, 6, 5.7}),
		{Phase: "storm", Driver: "orderd", Outcome: "new", Concurrency: 64, Requests: 300, Throughput: 200, P50ms: 40},
		{Phase: "storm", Driver: "orderd", Outcome: "replayed", Concurrency: 64, Requests: 300, Throughput: 100, P50ms: 60},
	}}
	var b strings.Builder
	writeReport(&b, []Run{run}, "")
	got := b.String()
	for _, want := range []string{
		"| 16 | orderd | 5 | 90.0 (88.0–95.0) | 22.00 (21.00–24.00) |",
		"| 16 | 0.90 (0.90–0.90) | 1.10 (1.05–1.20) | 0.90 (0.85–0.95) | 1.10 (1.05–1.20) |",
		"- concurrency 16: throughput ≥ 1.5x two-lwt **not met** (median 0.90, rounds 0.90–0.90); throughput ≥ 0.9x one-lwt not separated (median 0.90, rounds 0.85–0.95); p50 ≤ 1.1x one-lwt not separated (median 1.10, rounds 1.05–1.20); p50 ≤ 0.7x two-lwt **not met** (median 1.10, rounds 1.05–1.20); orderd CPU 0.25 of the cluster's",
		"- concurrency 64: throughput ≥ 1.5x two-lwt **met** (median 1.60, rounds 1.50–1.70); throughput ≥ 0.9x one-lwt **met** (median 0.94, rounds 0.94–0.94); p50 ≤ 1.1x one-lwt **met** (median 1.00, rounds 1.00–1.05); p50 ≤ 0.7x two-lwt **met** (median 0.60, rounds 0.60–0.60)",
		"replay throughput / new throughput = 0.50 (goal ≥ 10); replay p50 / new p50 = 1.50 (goal ≤ 0.1)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
}

// A verdict needs minVerdictRounds paired rounds all on one side of the
// goal; anything else is "not separated".
func TestGoalVerdict(t *testing.T) {
	atLeast := goal{value: 0.9, atLeast: true}
	atMost := goal{value: 1.1}
	for _, tc := range []struct {
		g      goal
		ratios []float64
		want   string
	}{
		{atLeast, []float64{0.91, 0.95, 1.2, 0.9, 1.0}, "**met**"},
		{atLeast, []float64{0.5, 0.89, 0.7, 0.8, 0.6}, "**not met**"},
		{atLeast, []float64{0.91, 0.95, 1.2, 0.89, 1.0}, "not separated"},
		{atLeast, []float64{1.5, 1.6, 1.7, 1.8}, "not separated"}, // four rounds: too few
		{atMost, []float64{1.0, 1.05, 1.1, 0.9, 1.02}, "**met**"},
		{atMost, []float64{1.2, 1.3, 1.11, 1.4, 1.5}, "**not met**"},
	} {
		if got := goalVerdict(tc.g, tc.ratios); got != tc.want {
			t.Errorf("goalVerdict(%+v, %v) = %q, want %q", tc.g, tc.ratios, got, tc.want)
		}
	}
}

// Paired ratios match rounds by their index, not by their place in the
// list, and skip rounds where either figure is missing.
func TestPairedRatios(t *testing.T) {
	a := Result{Rounds: []Round{{Index: 0, Throughput: 100}, {Index: 1, Throughput: 120}, {Index: 2, Throughput: 90}}}
	b := Result{Rounds: []Round{{Index: 1, Throughput: 60}, {Index: 0, Throughput: 50}, {Index: 2}}}
	got := pairedRatios(a, b, roundThroughput)
	if !slices.Equal(got, []float64{2, 2}) {
		t.Errorf("pairedRatios = %v, want [2 2]", got)
	}
}

// The GC table gives each round's longest pause over the JVMs with the one
// that paused, the driver's longest, and each JVM's longest.
func TestReportGCPauses(t *testing.T) {
	run := Run{GCLogs: []string{"broker", "node1", "node2"}, Results: []Result{
		{Phase: "compare", Driver: "orderd", Concurrency: 16, Rounds: []Round{
			{Index: 0, GCMaxMs: map[string]float64{"node1": 12.4, "node2": 312.6, "broker": 0}},
			{Index: 1, GCMaxMs: map[string]float64{"node1": 0, "node2": 0, "broker": 0}},
			{Index: 2, GCMaxMs: map[string]float64{"node1": 48, "node2": 3, "broker": 51}},
		}},
		{Phase: "storm", Driver: "orderd", Outcome: "replayed", Concurrency: 64, Rounds: []Round{{Index: 0}, {Index: 1}}},
	}}
	var b strings.Builder
	writeReport(&b, []Run{run}, "")
	got := b.String()
	if strings.Contains(got, "pauses not measured") {
		t.Errorf("report says pauses were not measured:\n%s", got)
	}
	for _, want := range []string{
		"| phase | concurrency | driver | round 1 | round 2 | round 3 | longest |",
		"| compare | 16 | orderd | 313 node2 | 0 | 51 broker | 313 node2 |",
		"| storm | 64 | orderd/replayed | – | – |  | – |",
		"Longest pause inside any round, per JVM: broker 51 ms, node1 48 ms, node2 313 ms.",
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

// Without a GC log the report says the pauses were not measured, rather
// than a table of dashes.
func TestReportGCPausesNotMeasured(t *testing.T) {
	run := Run{Results: []Result{{Phase: "compare", Driver: "orderd", Concurrency: 1, Rounds: []Round{{Index: 0}, {Index: 1}}}}}
	var b strings.Builder
	writeReport(&b, []Run{run}, "")
	got := b.String()
	if !strings.Contains(got, "pauses not measured") || strings.Contains(got, "| compare | 1 | orderd |") {
		t.Errorf("report does not say plainly that pauses were not measured:\n%s", got)
	}
}
