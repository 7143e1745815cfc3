package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

func printResults(w io.Writer, rs []Result) {
	fmt.Fprintf(w, "%-8s %-8s %-8s %-9s %5s %6s %5s %10s %8s %8s %8s %10s %10s\n",
		"label", "phase", "driver", "outcome", "conc", "n", "errs", "req/s", "p50ms", "p95ms", "p99ms", "orderdCPU", "clustCPU")
	for _, r := range rs {
		fmt.Fprintf(w, "%-8s %-8s %-8s %-9s %5d %6d %5d %10.1f %8.2f %8.2f %8.2f %10.3f %10.3f\n",
			r.Label, r.Phase, r.Driver, r.Outcome, r.Concurrency, r.Requests, r.Errors, r.Throughput, r.P50ms, r.P95ms, r.P99ms, r.OrderdCPUPer1k, r.ClusterCPUPer1k)
	}
}

func reportCmd(args []string) error {
	fs := flag.NewFlagSet("orderbench report", flag.ContinueOnError)
	out := fs.String("out", "", "write the markdown report here")
	plot := fs.String("plot", "", "write the latency-vs-concurrency plot (SVG) here")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var runs []Run
	for _, path := range fs.Args() {
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var r Run
		if err := json.Unmarshal(raw, &r); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		runs = append(runs, r)
	}
	if len(runs) == 0 {
		return fmt.Errorf("no result files given")
	}
	var b strings.Builder
	writeReport(&b, runs, *plot)
	fmt.Print(b.String())
	if *out != "" {
		if err := os.WriteFile(*out, []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	if *plot != "" {
		if err := writeSoakPlots(runs, *plot); err != nil {
			return err
		}
		return os.WriteFile(*plot, []byte(latencyPlot(runs)), 0o644)
	}
	return nil
}

func all(runs []Run, keep func(Result) bool) []Result {
	var out []Result
	for _, r := range runs {
		for _, x := range r.Results {
			if keep(x) {
				out = append(out, x)
			}
		}
	}
	return out
}

func find(rs []Result, driver string, c int) (Result, bool) {
	for _, r := range rs {
		if r.Driver == driver && r.Concurrency == c {
			return r, true
		}
	}
	return Result{}, false
}

func findOutcome(rs []Result, outcome string) (Result, bool) {
	for _, r := range rs {
		if r.Outcome == outcome {
			return r, true
		}
	}
	return Result{}, false
}

func writeReport(b *strings.Builder, runs []Run, plot string) {
	fmt.Fprintf(b, "# orderd benchmarks\n\n")
	fmt.Fprintf(b, "Produced by `make bench` (cmd/orderbench); numbers from one run, side by side. Where drivers take turns in rounds, a figure is the median over the rounds, with the rounds' range (min–max) in brackets; the GC pauses inside each round are at the end. ")
	fmt.Fprintf(b, "Machine: %s. Cluster: %s, three local nodes (internal/tools/localcluster), RF 3, LOCAL_QUORUM / LOCAL_SERIAL. ", runs[0].Machine, runs[0].Cassandra)
	fmt.Fprintf(b, "orderd, the benchmark client and all three Cassandra JVMs share the same cores, so absolute numbers are low and noisy; the ratios are the point. ")
	fmt.Fprintf(b, "The figures of the two-LWT protocol orderd ran before the one-LWT one (two LWTs per new order) are kept in [benchmarks-two-lwt.md](benchmarks-two-lwt.md).\n\nCommands:\n\n")
	for _, r := range runs {
		fmt.Fprintf(b, "- `%s` (%s)\n", r.Command, r.Started.Format("2006-01-02 15:04 UTC"))
	}
	writeSetup(b, runs)
	writeTombstones(b, runs)

	cmp := all(runs, func(r Result) bool { return r.Phase == "compare" })
	if len(cmp) > 0 {
		fmt.Fprintf(b, "\n## New requests: orderd against statement plans\n\n")
		fmt.Fprintf(b, "The drivers take turns in rounds at each concurrency (the run's rounds, each driver's requests split evenly over them), each round starting with the next driver (so the cluster's periodic work, which comes at the same points of every run, falls on each in turn); each round's figures are kept. Every driver spreads its orders over the same 100 customers.\n\n")
		fmt.Fprintf(b, "- *orderd*: CreateOrder through orderd (gRPC), which runs the one-LWT protocol, with event delivery off (`ORDERD_DELIVERY=false`): none of the plans below publishes an event, so orderd is measured on the same work; what delivery adds is measured in its own section below.\n")
		fmt.Fprintf(b, "- *two-lwt*: the two-LWT protocol orderd ran before, issued by the benchmark itself, in that handler's order: due-queue entry (its own write, as then), claim LWT, LOCAL_QUORUM read of orders_by_id, the three projections (each row its own write, as then), COMPLETE LWT, entry removal (the due queue of migration 0003 marks it done where 0002 deleted it: one write either way) — the baseline.\n")
		fmt.Fprintf(b, "- *one-lwt*: orderd's protocol issued by the benchmark itself (orderd with zero overhead of its own): LOCAL_QUORUM read of orders_by_id at the same time as the due-queue entry (group-committed with the entries of the claims made while one is being written, as orderd writes it), claim LWT, orders_by_customer_time and order_events_by_order concurrently, then orders_by_id (each table's rows of orders written at the same moment group-committed, as orderd writes them: `ORDERD_PROJECTION_BATCH`); the entry is released after the answer, in the background, as orderd releases it (group-committed per due-queue partition); no COMPLETE LWT.\n")
		fmt.Fprintf(b, "- *floor*: the three projection upserts concurrently, group-committed as orderd writes them, and nothing else (no ledger, no idempotency).\n")
		fmt.Fprintf(b, "- *claim*: a new request's claim as orderd's ledger issues it (its due entry, group-committed, then the claim LWT) and nothing else: what the one Paxos round of a new order costs alone.\n")
		fmt.Fprintf(b, "- *naive*: two-lwt's statements one after another, each row its own write, in the order a request's rows are written.\n\n")
		fmt.Fprintf(b, "Each figure is the median over the driver's rounds with the rounds' range, min–max, in brackets (every round runs the same number of requests); CPU columns are per request over all rounds.\n\n")
		fmt.Fprintf(b, "| concurrency | driver | rounds | req/s | p50 ms | p95 ms | p99 ms | orderd CPU s/1k | cluster CPU s/1k | client CPU s/1k |\n|---|---|---|---|---|---|---|---|---|---|\n")
		for _, r := range cmp {
			fmt.Fprintf(b, "| %d | %s | %d | %s | %s | %s | %s | %.3f | %.3f | %.3f |\n", r.Concurrency, r.Driver, max(len(r.Rounds), 1),
				spread(r, roundThroughput, r.Throughput, 1), spread(r, roundP50, r.P50ms, 2), spread(r, roundP95, r.P95ms, 2), spread(r, roundP99, r.P99ms, 2),
				r.OrderdCPUPer1k, r.ClusterCPUPer1k, r.ClientCPUPer1k)
		}
		fmt.Fprintf(b, "\nRatios (orderd against the two-LWT plan and against its own plan issued directly; one-lwt against two-lwt is what the one-LWT plan gains with no orderd in the way). ")
		fmt.Fprintf(b, "Each is the median of the rounds' paired ratios, with their range: round i of one driver over round i of the other, which ran back to back in the same round, so drift the machine or the cluster shows over the run falls on both. ")
		fmt.Fprintf(b, "*orderd/cluster CPU* is orderd's CPU per request as a share of the cluster's CPU per request, over all rounds:\n\n")
		fmt.Fprintf(b, "| concurrency | thr orderd/two-lwt | p50 orderd/two-lwt | thr orderd/one-lwt | p50 orderd/one-lwt | thr one-lwt/two-lwt | p50 one-lwt/two-lwt | orderd/cluster CPU |\n|---|---|---|---|---|---|---|---|\n")
		levels := concurrencies(cmp)
		for _, c := range levels {
			o, _ := find(cmp, "orderd", c)
			two, _ := find(cmp, "two-lwt", c)
			one, _ := find(cmp, "one-lwt", c)
			fmt.Fprintf(b, "| %d | %s | %s | %s | %s | %s | %s | %s |\n", c,
				ratioSpread(pairedRatios(o, two, roundThroughput), o.Throughput, two.Throughput), ratioSpread(pairedRatios(o, two, roundP50), o.P50ms, two.P50ms),
				ratioSpread(pairedRatios(o, one, roundThroughput), o.Throughput, one.Throughput), ratioSpread(pairedRatios(o, one, roundP50), o.P50ms, one.P50ms),
				ratioSpread(pairedRatios(one, two, roundThroughput), one.Throughput, two.Throughput), ratioSpread(pairedRatios(one, two, roundP50), one.P50ms, two.P50ms),
				ratio(o.OrderdCPUPer1k, o.ClusterCPUPer1k))
		}
		writeGoals(b, cmp, levels)
		writeDriverBound(b, cmp, levels)
		fmt.Fprintf(b, "\norderd's own CPU per request is the *orderd CPU* column beside the *cluster CPU* column (all three Cassandra JVMs). ")
		fmt.Fprintf(b, "On this machine they share two cores, so orderd's CPU is taken from Cassandra's: once the cores are saturated (from about 8 streams) every driver's latency is the cluster's queueing, naive's sequential statements cost no more than concurrent ones, and the ratios are dominated by noise between rounds.\n")
		if plot != "" {
			fmt.Fprintf(b, "\n![p50 latency against concurrency](%s)\n", plotName(plot))
		}
	}
	storm := all(runs, func(r Result) bool { return r.Phase == "storm" })
	stormNew, ok1 := findOutcome(storm, "new")
	stormRep, ok2 := findOutcome(storm, "replayed")
	if ok1 && ok2 {
		fmt.Fprintf(b, "\n## Replay storm: one request id sent %d times at once (orderd, %d streams)\n\n", stormRep.Requests, stormRep.Concurrency)
		fmt.Fprintf(b, "One order is created, then the very same CreateOrderRequest is sent from %d concurrent streams; every answer must be a replay. ", stormRep.Concurrency)
		fmt.Fprintf(b, "New requests at the same concurrency take turns with it. The cluster CPU column shows how much of a replay's cost reaches Cassandra.\n\n")
		fmt.Fprintf(b, "| request | n | errors | req/s | p50 ms | p95 ms | p99 ms | orderd CPU s/1k | cluster CPU s/1k | orderd/cluster CPU |\n|---|---|---|---|---|---|---|---|---|---|\n")
		for _, r := range []Result{stormNew, stormRep} {
			fmt.Fprintf(b, "| %s | %d | %d | %s | %s | %s | %s | %.3f | %.3f | %s |\n", r.Outcome, r.Requests, r.Errors, spread(r, roundThroughput, r.Throughput, 1), spread(r, roundP50, r.P50ms, 2), spread(r, roundP95, r.P95ms, 2), spread(r, roundP99, r.P99ms, 2),
				r.OrderdCPUPer1k, r.ClusterCPUPer1k, ratio(r.OrderdCPUPer1k, r.ClusterCPUPer1k))
		}
		fmt.Fprintf(b, "\nreplay throughput / new throughput = %s (goal ≥ 10); replay p50 / new p50 = %s (goal ≤ 0.1)\n",
			ratio(stormRep.Throughput, stormNew.Throughput), ratio(stormRep.P50ms, stormNew.P50ms))
	}
	rep := all(runs, func(r Result) bool { return r.Phase == "replay" })
	if len(rep) == 2 {
		fmt.Fprintf(b, "\n## Replay path against a new request (orderd, concurrency %d)\n\n", rep[0].Concurrency)
		fmt.Fprintf(b, "| request | n | p50 ms | p95 ms | p99 ms |\n|---|---|---|---|---|\n")
		for _, r := range rep {
			fmt.Fprintf(b, "| %s | %d | %.2f | %.2f | %.2f |\n", r.Outcome, r.Requests, r.P50ms, r.P95ms, r.P99ms)
		}
		fmt.Fprintf(b, "\nreplayed p50 / new p50 = %.2f (goal ≤ 0.5)\n", rep[1].P50ms/rep[0].P50ms)
	}
	mix := all(runs, func(r Result) bool { return r.Phase == "mix" })
	if len(mix) > 0 {
		fmt.Fprintf(b, "\n## Mixed load through orderd (20%% duplicate retries, 5%% conflicting reuses; concurrency %d)\n\n", mix[0].Concurrency)
		fmt.Fprintf(b, "| outcome | n | p50 ms | p95 ms | p99 ms |\n|---|---|---|---|---|\n")
		for _, r := range mix {
			fmt.Fprintf(b, "| %s | %d | %.2f | %.2f | %.2f |\n", r.Outcome, r.Requests, r.P50ms, r.P95ms, r.P99ms)
		}
		fmt.Fprintf(b, "\nThroughput %.1f calls/s; orderd CPU %.3f s and cluster CPU %.3f s per 1,000 calls (orderd/cluster CPU %s).\n",
			mix[0].Throughput, mix[0].OrderdCPUPer1k, mix[0].ClusterCPUPer1k, ratio(mix[0].OrderdCPUPer1k, mix[0].ClusterCPUPer1k))
	}
	writeOutbox(b, all(runs, func(r Result) bool { return r.Phase == "outbox" }))
	writeOutboxCost(b, all(runs, func(r Result) bool { return r.Phase == "outbox" }))
	writeInstances(b, all(runs, func(r Result) bool { return r.Phase == "instances" }))
	writeCommit(b, all(runs, func(r Result) bool { return r.Phase == "commit" }))
	writeCost(b, all(runs, func(r Result) bool { return r.Phase == "cost" }))
	lwt := all(runs, func(r Result) bool { return r.Phase == "lwt" })
	if len(lwt) > 0 {
		fmt.Fprintf(b, "\n## Claim LWT latency: paxos_variant v1 against v2\n\nThe cluster was restarted with `CASSANDRA_PAXOS_VARIANT` between the phases.\n\n")
		fmt.Fprintf(b, "| variant | concurrency | n | req/s | p50 ms | p95 ms | p99 ms |\n|---|---|---|---|---|---|---|\n")
		for _, r := range lwt {
			fmt.Fprintf(b, "| %s | %d | %d | %.1f | %.2f | %.2f | %.2f |\n", r.Label, r.Concurrency, r.Requests, r.Throughput, r.P50ms, r.P95ms, r.P99ms)
		}
	}
	writeChanges(b, all(runs, func(r Result) bool { return r.Phase == "changes" }))
	writeGCPauses(b, runs)
	writeSoak(b, runs, plot)
}

// boundFrom is the fewest streams at which writeDriverBound takes its
// least share: the one-LWT protocol's goals are set at 16 and 64 streams,
// and below 16 a driver's rounds last a fraction of a second, so its CPU
// (counted by /proc in 10 ms ticks) is a few ticks and the cluster's is
// mostly its own idle work.
const boundFrom = 16

// writeDriverBound reports what issuing each kind of statement costs the
// process that issues it, against what it costs the cluster (the one-LWT
// protocol's CPU goal, ≤ 0.05): a plan made of claims and upserts costs its
// client at least the least of their ratios, since a sum's ratio is never
// below the least of its parts' (Σa/Σb ≥ min a/b). The verdict is the run's
// own.
func writeDriverBound(b *strings.Builder, cmp []Result, levels []int) {
	// share is a/b to three places, "–" where either was not measured.
	share := func(a, b float64) string {
		if a == 0 || b == 0 {
			return "–"
		}
		return fmt.Sprintf("%.3f", a/b)
	}
	type least struct {
		share  float64
		driver string
		c      int
	}
	var low *least
	var rows []string
	for _, c := range levels {
		cells := []string{fmt.Sprint(c)}
		for _, d := range []string{"claim", "floor", "one-lwt"} {
			r, _ := find(cmp, d, c)
			cells = append(cells, share(r.ClientCPUPer1k, r.ClusterCPUPer1k))
			if d == "one-lwt" || c < boundFrom || r.ClientCPUPer1k == 0 || r.ClusterCPUPer1k == 0 {
				continue
			}
			if v := r.ClientCPUPer1k / r.ClusterCPUPer1k; low == nil || v < low.share {
				low = &least{v, d, c}
			}
		}
		o, _ := find(cmp, "orderd", c)
		one, _ := find(cmp, "one-lwt", c)
		beyond := 0.0
		if o.OrderdCPUPer1k > 0 && one.ClientCPUPer1k > 0 {
			beyond = o.OrderdCPUPer1k - one.ClientCPUPer1k
		}
		cells = append(cells, share(o.OrderdCPUPer1k, o.ClusterCPUPer1k), share(beyond, o.ClusterCPUPer1k))
		rows = append(rows, "| "+strings.Join(cells, " | ")+" |")
	}
	if low == nil {
		return
	}
	fmt.Fprintf(b, "\n### What issuing a statement costs its client, against the cluster\n\n")
	fmt.Fprintf(b, "Each cell is the CPU per request of the process that issues the driver's statements (the benchmark client, through the same driver and session settings as orderd; orderd's own for *orderd*) as a share of the three JVMs' CPU per request in the same rounds. ")
	fmt.Fprintf(b, "*claim* is a new request's claim as orderd's ledger issues it (its due entry, group-committed, then the claim LWT) and nothing else; *floor* is the three projection upserts; *one-lwt* is orderd's whole statement plan. ")
	fmt.Fprintf(b, "The last column is what orderd spends beyond issuing that plan (serving gRPC over TLS, checking the caller, validating, fingerprinting, metrics): (orderd CPU − one-lwt client CPU) / orderd's cluster CPU.\n\n")
	fmt.Fprintf(b, "| concurrency | claim | floor | one-lwt | orderd | orderd beyond its statements |\n|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintln(b, r)
	}
	fmt.Fprintf(b, "\nEvery order needs a claim and the projection upserts, and a plan made of them costs its client at least the least of their shares, since a sum's share is never below the least of its parts' (Σa/Σb ≥ min a/b). ")
	fmt.Fprintf(b, "The least from %d streams up (the one-LWT protocol's goals are set at 16 and 64; with fewer streams a round lasts a fraction of a second, a few of /proc's 10 ms CPU ticks, and the cluster's CPU is mostly its own idle work) is %.3f in this run (%s at concurrency %d). ", boundFrom, low.share, low.driver, low.c)
	if low.share > 0.05 {
		fmt.Fprintf(b, "So no plan of these statements issued through this driver on this machine costs its client as little as 5%% of the cluster's CPU, before it serves a single gRPC call: the one-LWT protocol's CPU goal (≤ 0.05) is below what the driver alone costs here.\n")
	} else {
		fmt.Fprintf(b, "That is within the one-LWT protocol's CPU goal (≤ 0.05): in this run the driver's own cost does not rule the goal out.\n")
	}
}

// concurrencies lists the concurrency levels of rs in the order they were run.
func concurrencies(rs []Result) []int {
	var out []int
	for _, r := range rs {
		if !slices.Contains(out, r.Concurrency) {
			out = append(out, r.Concurrency)
		}
	}
	return out
}

// ratio formats a/b, or "–" when either is missing (zero): a driver not
// run, or CPU not measured.
func ratio(a, b float64) string {
	if a == 0 || b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", a/b)
}

func verdict(ok bool) string {
	if ok {
		return "**met**"
	}
	return "**not met**"
}

func plotName(path string) string {
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		return path[i+1:]
	}
	return path
}

// writeTombstones says what the node logs said about tombstones during each
// run (the due queue's reads must meet none).
func writeTombstones(b *strings.Builder, runs []Run) {
	fmt.Fprintf(b, "\nTombstone warnings in the Cassandra node logs during the runs (the reconciler inside orderd reads the due queue as in production, default grace):\n\n")
	for _, r := range runs {
		if r.NodeLogs == 0 {
			fmt.Fprintf(b, "- `%s`: node logs not found, not checked\n", r.Command)
			continue
		}
		fmt.Fprintf(b, "- `%s`: %d in %d node logs\n", r.Command, len(r.TombstoneWarnings), r.NodeLogs)
		for _, w := range r.TombstoneWarnings {
			fmt.Fprintf(b, "  - `%s`\n", w)
		}
	}
}

// writeOutbox reports what delivering events to Kafka costs.
func writeOutbox(b *strings.Builder, rs []Result) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Event delivery: the outbox on and off\n\n")
	fmt.Fprintf(b, "Two fresh orderd processes on the run's keyspace take turns in rounds at each concurrency: *outbox-on* publishes every new order's ORDER_CREATED event to the local Kafka broker (acks=all, idempotent producer) after answering and releases the order's due entry on the acknowledgement; *outbox-off* runs with `ORDERD_DELIVERY=false`. orderd CPU is each process's own.\n\n")
	fmt.Fprintf(b, "| concurrency | driver | req/s | p50 ms | p95 ms | p99 ms | orderd CPU s/1k | cluster CPU s/1k |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		if r.Concurrency > 0 {
			fmt.Fprintf(b, "| %d | %s | %s | %s | %s | %s | %.3f | %.3f |\n", r.Concurrency, r.Driver, spread(r, roundThroughput, r.Throughput, 1), spread(r, roundP50, r.P50ms, 2), spread(r, roundP95, r.P95ms, 2), spread(r, roundP99, r.P99ms, 2), r.OrderdCPUPer1k, r.ClusterCPUPer1k)
		}
	}
	fmt.Fprintf(b, "\n")
	for _, c := range concurrencies(rs) {
		on, ok1 := find(rs, "outbox-on", c)
		off, ok2 := find(rs, "outbox-off", c)
		if ok1 && ok2 && c > 0 {
			fmt.Fprintf(b, "- concurrency %d: throughput on / off = %s; p50 on / off = %s; orderd CPU per order on / off = %s\n", c,
				ratio(on.Throughput, off.Throughput), ratio(on.P50ms, off.P50ms), ratio(on.OrderdCPUPer1k, off.OrderdCPUPer1k))
		}
	}
	fmt.Fprintf(b, "\nDelivery latency, from the client's answer (the order is COMPLETE), over orders *outbox-on* created afterwards from %d streams (below saturation: at the levels above the cluster is the queue, and the consumer's two LWTs per event wait behind orderd's):\n\n", latencyConcurrency)
	fmt.Fprintf(b, "| up to | events | never arrived | p50 ms | p95 ms | p99 ms |\n|---|---|---|---|---|---|\n")
	for _, name := range []string{"received", "applied"} {
		if d, ok := find(rs, name, 0); ok {
			what := map[string]string{"received": "a consumer of the topic receiving it", "applied": "the reference consumer (cmd/orderconsumer) having applied it (its inbox row's applied_at)"}[name]
			fmt.Fprintf(b, "| %s | %d | %d | %.2f | %.2f | %.2f |\n", what, d.Requests, d.Errors, d.P50ms, d.P95ms, d.P99ms)
		}
	}
}

// writeChanges reports the changes phase: a change against a new order.
func writeChanges(b *strings.Builder, rs []Result) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Changes: AmendOrder against CreateOrder, through orderd\n\n")
	fmt.Fprintf(b, "The drivers take turns in rounds at each concurrency, always in this order (the replays need the amends of their round). *create*: a new order (one Paxos round, the claim; `order_versions` is not written). ")
	fmt.Fprintf(b, "*amend*: a change of an order at version 1 (two Paxos rounds: the claim and the version check on `order_versions`, after the order and history reads; then the projections). ")
	fmt.Fprintf(b, "*amend-replay*: the same changes again, answered from the change's recorded row (reads only).\n\n")
	fmt.Fprintf(b, "| concurrency | request | n | errors | req/s | p50 ms | p95 ms | p99 ms | orderd CPU s/1k | cluster CPU s/1k |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		fmt.Fprintf(b, "| %d | %s | %d | %d | %s | %s | %s | %s | %.3f | %.3f |\n", r.Concurrency, r.Outcome, r.Requests, r.Errors,
			spread(r, roundThroughput, r.Throughput, 1), spread(r, roundP50, r.P50ms, 2), spread(r, roundP95, r.P95ms, 2), spread(r, roundP99, r.P99ms, 2),
			r.OrderdCPUPer1k, r.ClusterCPUPer1k)
	}
	fmt.Fprintf(b, "\n")
	for _, c := range concurrencies(rs) {
		var at []Result
		for _, r := range rs {
			if r.Concurrency == c {
				at = append(at, r)
			}
		}
		create, ok1 := findOutcome(at, "create")
		amend, ok2 := findOutcome(at, "amend")
		replay, ok3 := findOutcome(at, "amend-replay")
		if ok1 && ok2 && ok3 {
			fmt.Fprintf(b, "- concurrency %d: amend/create throughput %s, p50 %s, cluster CPU %s; amend-replay/amend throughput %s\n", c,
				ratio(amend.Throughput, create.Throughput), ratio(amend.P50ms, create.P50ms),
				ratio(amend.ClusterCPUPer1k, create.ClusterCPUPer1k), ratio(replay.Throughput, amend.Throughput))
		}
	}
}
