package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/atlasmart/orderd/internal/tools/clientcreds"
)

// commitPhase measures what committing the claim at ANY gains (the aim: a
// claim as cheap as Paxos v2 allows): new orders through an orderd whose
// claims commit at LOCAL_QUORUM (the default) against one
// with ORDERD_CLAIM_COMMIT=any, two fresh processes on the run's keyspace
// taking turns at each level. Both publish nothing (ORDERD_DELIVERY=false),
// so the claim is the only difference. The cluster must purge Paxos state
// as `repaired` (internal/tools/localcluster does), or the ANY process refuses to start.
func (b *bench) commitPhase(ctx context.Context, levels []int, requests int, orderd string, env []string, creds clientcreds.Options) ([]Result, error) {
	base := append(slices.Clone(env), "ORDERD_DELIVERY=false")
	lq, err := startOrderd(orderd, append(slices.Clone(base), "ORDERD_CLAIM_COMMIT=local_quorum"), creds)
	if err != nil {
		return nil, fmt.Errorf("start an orderd committing claims at LOCAL_QUORUM: %w", err)
	}
	defer lq.stop()
	anyCommit, err := startOrderd(orderd, append(slices.Clone(base), "ORDERD_CLAIM_COMMIT=any"), creds)
	if err != nil {
		return nil, fmt.Errorf("start an orderd committing claims at ANY: %w", err)
	}
	defer anyCommit.stop()
	via := func(p *orderdProc) func(context.Context, int) error {
		return func(ctx context.Context, i int) error {
			_, err := p.client.CreateOrder(ctx, newRequest(i))
			return err
		}
	}
	drivers := []driver{
		{name: "commit-local-quorum", do: via(lq), orderd: lq},
		{name: "commit-any", do: via(anyCommit), orderd: anyCommit},
	}
	if err := b.warmUp(ctx, drivers); err != nil {
		return nil, err
	}
	var out []Result
	for _, c := range levels {
		rs, err := b.inTurns(ctx, "commit", c, requests, drivers)
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	return out, nil
}

// writeCommit reports the commit phase.
func writeCommit(b *strings.Builder, rs []Result) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Claim commit: LOCAL_QUORUM against ANY\n\n")
	fmt.Fprintf(b, "Two fresh orderd processes on the run's keyspace (delivery off in both) take turns in rounds at each concurrency: *commit-local-quorum* (the default) waits for the claim's Paxos commit on a quorum; *commit-any* (`ORDERD_CLAIM_COMMIT=any`, on this cluster's `paxos_state_purging: repaired`) answers once the proposal is accepted and sends the commit without waiting. The cluster does the same work either way; what changes is one round trip on the claim's path.\n\n")
	fmt.Fprintf(b, "| concurrency | driver | req/s | p50 ms | p95 ms | p99 ms | orderd CPU s/1k | cluster CPU s/1k |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		fmt.Fprintf(b, "| %d | %s | %s | %s | %s | %s | %.3f | %.3f |\n", r.Concurrency, r.Driver, spread(r, roundThroughput, r.Throughput, 1), spread(r, roundP50, r.P50ms, 2), spread(r, roundP95, r.P95ms, 2), spread(r, roundP99, r.P99ms, 2), r.OrderdCPUPer1k, r.ClusterCPUPer1k)
	}
	fmt.Fprintf(b, "\n")
	for _, c := range concurrencies(rs) {
		lq, ok1 := find(rs, "commit-local-quorum", c)
		an, ok2 := find(rs, "commit-any", c)
		if ok1 && ok2 {
			fmt.Fprintf(b, "- concurrency %d: throughput ANY / LOCAL_QUORUM = %s; p50 ANY / LOCAL_QUORUM = %s; cluster CPU per order ANY / LOCAL_QUORUM = %s\n", c,
				ratio(an.Throughput, lq.Throughput), ratio(an.P50ms, lq.P50ms), ratio(an.ClusterCPUPer1k, lq.ClusterCPUPer1k))
		}
	}
}
