package main

import (
	"fmt"
	"slices"
	"strings"
)

// writeSetup says how the runs were measured: rounds, the cluster's
// collector, and what was pinned to which cores.
func writeSetup(b *strings.Builder, runs []Run) {
	fmt.Fprintf(b, "\nSetup of each run:\n\n")
	for _, r := range runs {
		var parts []string
		if r.Rounds > 0 && slices.ContainsFunc(r.Results, func(x Result) bool { return x.Phase != "soak" }) {
			parts = append(parts, fmt.Sprintf("drivers that take turns run %d rounds per concurrency, each driver's requests split evenly over them", r.Rounds))
		}
		if r.Soak != nil {
			parts = append(parts, fmt.Sprintf("the soak an open loop at %.1f calls/s, a sample every %.0f s", r.Soak.Rate, r.Soak.EverySeconds))
		}
		if r.ClusterJVM != "" {
			parts = append(parts, "Cassandra JVMs: `"+r.ClusterJVM+"`")
		}
		if len(r.GCLogs) > 0 {
			parts = append(parts, "GC pauses read from the logs of "+strings.Join(r.GCLogs, ", "))
		} else {
			parts = append(parts, "no GC log found: pauses not measured")
		}
		if r.Pinning != "" {
			parts = append(parts, r.Pinning)
		} else {
			parts = append(parts, "not pinned: every process may run on every core")
		}
		fmt.Fprintf(b, "- `%s`: %s\n", r.Command, strings.Join(parts, "; "))
	}
}

// compareGoals are the goals orderd is held to in the compare phase: each
// a ratio of orderd's figure to a plan's, and its bound.
var compareGoals = []struct {
	text    string
	against string
	metric  func(Round) float64
	goal    goal
}{
	{"throughput ≥ 1.5x two-lwt", "two-lwt", roundThroughput, goal{1.5, true}},
	{"throughput ≥ 0.9x one-lwt", "one-lwt", roundThroughput, goal{0.9, true}},
	{"p50 ≤ 1.1x one-lwt", "one-lwt", roundP50, goal{1.1, false}},
	{"p50 ≤ 0.7x two-lwt", "two-lwt", roundP50, goal{0.7, false}},
}

// writeGoals gives each goal at each concurrency its verdict on the
// rounds' paired ratios (goalVerdict), with the ratios' median and range.
func writeGoals(b *strings.Builder, cmp []Result, levels []int) {
	fmt.Fprintf(b, "\nGoals (orderd throughput ≥ 1.5 × two-lwt and ≥ 0.9 × one-lwt; p50 ≤ 1.1 × one-lwt, i.e. orderd adds at most 10%% to its own plan; p50 ≤ 0.7 × two-lwt). ")
	fmt.Fprintf(b, "A verdict is given only where the rounds separate: *met* when the paired ratio of every round meets the goal, *not met* when none does, *not separated* when the rounds fall on both sides of it (or are fewer than %d). ", minVerdictRounds)
	fmt.Fprintf(b, "If the true ratio sat exactly on the goal, each round would fall on either side with even odds, and %d rounds all on one side would happen 2 times in %d by chance (an exact sign test); the further the ratio is from the goal, the rarer a wrong verdict.\n\n", minVerdictRounds, 1<<minVerdictRounds)
	for _, c := range levels {
		o, ok := find(cmp, "orderd", c)
		if !ok {
			continue
		}
		var parts []string
		for _, g := range compareGoals {
			other, ok := find(cmp, g.against, c)
			if !ok {
				continue
			}
			rs := pairedRatios(o, other, g.metric)
			parts = append(parts, fmt.Sprintf("%s %s (%s)", g.text, goalVerdict(g.goal, rs), ratioRounds(rs, g.metric(pooledRound(o)), g.metric(pooledRound(other)))))
		}
		fmt.Fprintf(b, "- concurrency %d: %s; orderd CPU %s of the cluster's\n", c, strings.Join(parts, "; "), ratio(o.OrderdCPUPer1k, o.ClusterCPUPer1k))
		if one, ok := find(cmp, "one-lwt", c); ok && one.ClientCPUPer1k > 0 && o.ClusterCPUPer1k > 0 {
			fmt.Fprintf(b, "  - the same statements issued by the benchmark client (one-lwt, same driver, no gRPC) cost %.3f s per 1,000, %.3f of orderd's cluster CPU: the driver's share alone\n",
				one.ClientCPUPer1k, one.ClientCPUPer1k/o.ClusterCPUPer1k)
		}
	}
}

// pooledRound is a result's own figures as a round: what a goal is judged
// on when the result has no rounds.
func pooledRound(r Result) Round {
	return Round{Throughput: r.Throughput, P50ms: r.P50ms, P95ms: r.P95ms, P99ms: r.P99ms}
}

// gcCell is a round's longest pause over every JVM whose log was read,
// with the JVM's name ("412 node2"), "0" when none stopped, "–" when no
// log was read.
func gcCell(r Round) (string, float64) {
	if len(r.GCMaxMs) == 0 {
		return "–", 0
	}
	names := make([]string, 0, len(r.GCMaxMs))
	for n := range r.GCMaxMs {
		names = append(names, n)
	}
	slices.Sort(names)
	longest, who := 0.0, ""
	for _, n := range names {
		if v := r.GCMaxMs[n]; v > longest {
			longest, who = v, n
		}
	}
	if who == "" {
		return "0", 0
	}
	return fmt.Sprintf("%.0f %s", longest, who), longest
}

// writeGCPauses reports the longest stop-the-world pause of every round of
// every driver that took turns, and each JVM's longest over the run.
func writeGCPauses(b *strings.Builder, runs []Run) {
	rs := all(runs, func(r Result) bool { return len(r.Rounds) > 0 })
	if len(rs) == 0 {
		return
	}
	rounds := 0
	for _, r := range rs {
		rounds = max(rounds, len(r.Rounds))
	}
	fmt.Fprintf(b, "\n## GC pauses per round\n\n")
	if !slices.ContainsFunc(rs, func(r Result) bool {
		return slices.ContainsFunc(r.Rounds, func(x Round) bool { return len(x.GCMaxMs) > 0 })
	}) {
		fmt.Fprintf(b, "No GC log of a Cassandra node or the broker was found during the runs (they log to `logs/gc.log` from their next start, internal/tools/localcluster): pauses not measured.\n")
		return
	}
	fmt.Fprintf(b, "The longest stop-the-world pause (or, under ZGC, allocation stall: a thread waiting for memory), in ms, of any Cassandra node or the Kafka broker that overlapped each round, from their GC logs (`-Xlog:gc`, internal/tools/localcluster), with the JVM that paused; 0: none paused; –: no GC log was read. ")
	fmt.Fprintf(b, "A pause stalls every request that needs that JVM: a round with a pause a large part of its length measures the collector, not the driver.\n\n")
	head := []string{"phase", "concurrency", "driver"}
	for i := range rounds {
		head = append(head, fmt.Sprintf("round %d", i+1))
	}
	head = append(head, "longest")
	fmt.Fprintf(b, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat("---|", len(head)))
	longest := map[string]float64{}
	for _, r := range rs {
		cells := []string{r.Phase, fmt.Sprint(r.Concurrency), r.Driver + outcomeSuffix(r.Outcome)}
		worst := "–"
		most := -1.0
		for i := range rounds {
			if i >= len(r.Rounds) {
				cells = append(cells, "")
				continue
			}
			cell, v := gcCell(r.Rounds[i])
			cells = append(cells, cell)
			if cell != "–" && v > most {
				worst, most = cell, v
			}
			for n, ms := range r.Rounds[i].GCMaxMs {
				longest[n] = max(longest[n], ms)
			}
		}
		fmt.Fprintf(b, "| %s |\n", strings.Join(append(cells, worst), " | "))
	}
	if len(longest) == 0 {
		return
	}
	names := make([]string, 0, len(longest))
	for n := range longest {
		names = append(names, n)
	}
	slices.Sort(names)
	var parts []string
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %.0f ms", n, longest[n]))
	}
	fmt.Fprintf(b, "\nLongest pause inside any round, per JVM: %s.\n", strings.Join(parts, ", "))
}
