package main

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"

	"github.com/atlasmart/orderd/internal/tools/clientcreds"
)

// instanceCount is how many orderd processes the instances phase runs
// beside the single one.
const instanceCount = 3

// instancesPhase measures one orderd against instanceCount of them at the
// same total streams: the single one on a keyspace of its own, the others
// together on another, so each keyspace's reconcilers are exactly the
// processes serving it, as in production (the run's own orderd, which
// always runs, would otherwise hold a share of the leases). Delivery is
// off in all: the outbox phase measures what it adds. Request i goes to
// instance i mod instanceCount, so the streams' requests are spread evenly
// over them. Every round keeps what the processes' counters gained:
// statements by label (the lease LWTs among them), replay-cache hits,
// reconciler passes, lost leases.
func (b *bench) instancesPhase(ctx context.Context, levels []int, requests int, orderd string, env []string, creds clientcreds.Options) ([]Result, error) {
	base := keyspaceOf(env)
	env = append(slices.Clone(env), "ORDERD_DELIVERY=false")
	oneKS, manyKS := base+"_one", base+"_many"
	var procs []*meteredOrderd
	defer func() {
		for _, p := range procs {
			p.stop()
		}
		for _, ks := range []string{oneKS, manyKS} {
			_ = b.cql.Query(`DROP KEYSPACE IF EXISTS ` + ks).Exec()
		}
	}()
	start := func(ks string) (*meteredOrderd, error) {
		p, err := startMeteredOrderd(orderd, append(slices.Clone(env), "ORDERD_KEYSPACE="+ks), creds)
		if err != nil {
			return nil, fmt.Errorf("start an orderd on %s: %w", ks, err)
		}
		procs = append(procs, p)
		return p, nil
	}
	for _, ks := range []string{oneKS, manyKS} {
		if err := migrateKeyspace(orderd, env, ks); err != nil {
			return nil, err
		}
	}
	one, err := start(oneKS)
	if err != nil {
		return nil, err
	}
	var many []*meteredOrderd
	for range instanceCount {
		p, err := start(manyKS)
		if err != nil {
			return nil, err
		}
		many = append(many, p)
	}
	drivers := []driver{
		{name: "instances-1", counters: orderdCounters(one), do: func(ctx context.Context, i int) error {
			_, err := one.client.CreateOrder(ctx, newRequest(i))
			return err
		}},
		{name: fmt.Sprintf("instances-%d", instanceCount), counters: orderdCounters(many...), do: func(ctx context.Context, i int) error {
			_, err := many[i%len(many)].client.CreateOrder(ctx, newRequest(i))
			return err
		}},
	}
	if err := b.warmUp(ctx, drivers); err != nil {
		return nil, err
	}
	var out []Result
	for _, c := range levels {
		rs, err := b.inTurns(ctx, "instances", c, requests, drivers)
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	return out, nil
}

// keyspaceOf is the ORDERD_KEYSPACE env sets (the last setting).
func keyspaceOf(env []string) string {
	ks := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "ORDERD_KEYSPACE="); ok {
			ks = v
		}
	}
	return ks
}

// migrateKeyspace creates keyspace ks with orderd's schema.
func migrateKeyspace(orderd string, env []string, ks string) error {
	cmd := exec.Command(orderd, "migrate")
	cmd.Env = append(slices.Clone(env), "ORDERD_KEYSPACE="+ks)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("migrate %s: %w\n%s", ks, err, out)
	}
	return nil
}

// instancesTolerance is the goal "throughput within 10%": several
// instances' against one's.
const instancesTolerance = 0.10

// bandVerdict judges "within tol of 1" on paired ratios as goalVerdict
// judges a bound: met when every round is within, not met when none is,
// not separated otherwise or with fewer than minVerdictRounds rounds.
func bandVerdict(tol float64, ratios []float64) string {
	if len(ratios) < minVerdictRounds {
		return "not separated"
	}
	within := 0
	for _, r := range ratios {
		if r >= 1-tol && r <= 1+tol {
			within++
		}
	}
	switch within {
	case len(ratios):
		return "**met**"
	case 0:
		return "**not met**"
	}
	return "not separated"
}

// writeInstances reports the instances phase.
func writeInstances(b *strings.Builder, rs []Result) {
	if len(rs) == 0 {
		return
	}
	many := fmt.Sprintf("instances-%d", instanceCount)
	fmt.Fprintf(b, "\n## Several instances: one orderd against %d\n\n", instanceCount)
	fmt.Fprintf(b, "One orderd on a keyspace of its own takes turns in rounds with %d orderd processes (the same binary, each on its own loopback port, each running its reconciler as in production) sharing another keyspace, at the same total streams; request *i* goes to instance *i* mod %d, so the streams' requests are spread evenly over them. Delivery is off in all. ", instanceCount, instanceCount)
	fmt.Fprintf(b, "Figures are medians over the rounds with their range; the counters (from each process's `/metrics`, summed over the processes of the driver) are per order over all rounds: *lease LWTs* are `update_reconciler_leases` statements, *passes* reconciler passes, *cache hits* replays answered from the in-process cache, *lost leases* shards a reconciler lost.\n\n")
	fmt.Fprintf(b, "| concurrency | instances | req/s | p50 ms | p99 ms | CQL statements/order | lease LWTs/1k orders | passes/1k orders | cache hits/1k orders | lost leases | orderd CPU s/1k | cluster CPU s/1k |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		fmt.Fprintf(b, "| %d | %s | %s | %s | %s | %.2f | %.2f | %.2f | %.2f | %.0f | %.3f | %.3f |\n", r.Concurrency, strings.TrimPrefix(r.Driver, "instances-"),
			spread(r, roundThroughput, r.Throughput, 1), spread(r, roundP50, r.P50ms, 2), spread(r, roundP99, r.P99ms, 2),
			statementsPerOrder(r), 1000*perOrder(r, leaseStatement), 1000*perOrder(r, reconcilerPasses), 1000*perOrder(r, replayCacheHits),
			roundsTotal(r, lostLeases), 1000*perOrder(r, cpuOrderd), 1000*perOrder(r, cpuCluster))
	}
	fmt.Fprintf(b, "\nThroughput of %d instances over one's, paired by round (goal: within %.0f%%, judged as the other goals: met only when every round is within):\n\n", instanceCount, 100*instancesTolerance)
	for _, c := range concurrencies(rs) {
		one, ok1 := find(rs, "instances-1", c)
		m, ok2 := find(rs, many, c)
		if !ok1 || !ok2 {
			continue
		}
		thr := pairedRatios(m, one, roundThroughput)
		fmt.Fprintf(b, "- concurrency %d: throughput %s (%s); p50 %s; p99 %s\n", c, bandVerdict(instancesTolerance, thr), ratioRounds(thr, m.Throughput, one.Throughput),
			ratioRounds(pairedRatios(m, one, roundP50), m.P50ms, one.P50ms), ratioRounds(pairedRatios(m, one, roundP99), m.P99ms, one.P99ms))
		fmt.Fprintf(b, "  - p99 ms and lease LWTs per round, one | %d: %s\n", instanceCount, leaseRounds(one, m))
	}
	fmt.Fprintf(b, "\nA lease or cache effect in the p99 would show as rounds whose p99 rises with their lease LWTs or lost leases, or with fewer cache hits, on the %d instances' side only.\n", instanceCount)
}

// statementsPerOrder is every CQL statement the driver's processes ran
// per order.
func statementsPerOrder(r Result) float64 {
	total := 0.0
	for _, k := range statementLabels(r) {
		total += perOrder(r, k)
	}
	return total
}

// roundsTotal is key summed over r's rounds.
func roundsTotal(r Result, key string) float64 {
	total := 0.0
	for _, x := range r.Rounds {
		total += x.Counters[key]
	}
	return total
}

// leaseRounds lists each round's p99 and lease LWTs of both drivers:
// "r1 41.2/3 | 55.0/9; r2 ...".
func leaseRounds(one, many Result) string {
	var parts []string
	for i := range max(len(one.Rounds), len(many.Rounds)) {
		cell := func(r Result) string {
			if i >= len(r.Rounds) {
				return "–"
			}
			x := r.Rounds[i]
			return fmt.Sprintf("%.1f/%.0f", x.P99ms, x.Counters[leaseStatement])
		}
		parts = append(parts, fmt.Sprintf("r%d %s | %s", i+1, cell(one), cell(many)))
	}
	return strings.Join(parts, "; ")
}
