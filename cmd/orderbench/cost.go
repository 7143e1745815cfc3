package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/atlasmart/orderd/internal/tools/clientcreds"
)

// costVariant is one orderd configuration of the cost phase: a name, the
// environment it adds, and the binary it runs (empty: the run's -orderd).
type costVariant struct {
	name, orderd string
	env          []string
}

// parseCostVariants reads -cost-variants: variants separated by ";", each
// "name" or "name:K=V,K=V", where the key "orderd" names the binary to run
// instead of the run's -orderd (a build of another commit) and every other
// key is an environment variable of the process.
func parseCostVariants(s string) ([]costVariant, error) {
	var out []costVariant
	for _, spec := range strings.Split(s, ";") {
		spec = strings.TrimSpace(spec)
		if spec == "" {
			continue
		}
		name, settings, _ := strings.Cut(spec, ":")
		v := costVariant{name: name}
		for _, kv := range strings.Split(settings, ",") {
			if kv = strings.TrimSpace(kv); kv == "" {
				continue
			}
			k, val, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return nil, fmt.Errorf("cost variant %q: setting %q is not K=V", name, kv)
			}
			if k == "orderd" {
				v.orderd = val
				continue
			}
			v.env = append(v.env, kv)
		}
		if name == "" || slices.ContainsFunc(out, func(o costVariant) bool { return o.name == name }) {
			return nil, fmt.Errorf("cost variant %q: names must be given and distinct", spec)
		}
		out = append(out, v)
	}
	if len(out) < 2 {
		return nil, fmt.Errorf("cost variants %q: need at least two to compare", s)
	}
	return out, nil
}

// costPhase measures orderd's own CPU per new order under each variant
// (orderd's own cost, which the one-LWT protocol's goals cap at 5% of the
// cluster's CPU): one fresh process per variant on the run's keyspace,
// delivery off in all, taking turns in rounds at each level, so the
// variants' CPU per order and the cluster's are compared within one run. The first variant is the reference of the ratios.
func (b *bench) costPhase(ctx context.Context, levels []int, requests int, orderd string, variants []costVariant, env []string, creds clientcreds.Options) ([]Result, error) {
	var drivers []driver
	for _, v := range variants {
		bin := v.orderd
		if bin == "" {
			bin = orderd
		}
		p, err := startOrderd(bin, append(append(slices.Clone(env), "ORDERD_DELIVERY=false"), v.env...), creds)
		if err != nil {
			return nil, fmt.Errorf("start the orderd of cost variant %s: %w", v.name, err)
		}
		defer p.stop()
		drivers = append(drivers, driver{name: "cost-" + v.name, orderd: p, do: func(ctx context.Context, i int) error {
			_, err := p.client.CreateOrder(ctx, newRequest(i))
			return err
		}})
	}
	if err := b.warmUp(ctx, drivers); err != nil {
		return nil, err
	}
	var out []Result
	for _, c := range levels {
		rs, err := b.inTurns(ctx, "cost", c, requests, drivers)
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	return out, nil
}

// writeCost reports the cost phase.
func writeCost(b *strings.Builder, rs []Result) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## orderd's own cost: configurations side by side\n\n")
	fmt.Fprintf(b, "Fresh orderd processes, one per configuration, on the run's keyspace (delivery off in all) take turns in rounds at each concurrency, creating new orders; *default* is orderd as shipped, the others change one Go runtime setting an operator may set (`GOGC`, `GOMAXPROCS`). *orderd/cluster CPU* is the process's CPU per order as a share of the three JVMs' CPU per order in the same rounds (the one-LWT protocol's goal: ≤ 0.05); the cluster's CPU per order moves from round to round with its own background work, so orderd's CPU per order is the figure to compare between configurations.\n\n")
	fmt.Fprintf(b, "| concurrency | configuration | req/s | p50 ms | p99 ms | orderd CPU s/1k | cluster CPU s/1k | orderd/cluster CPU |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		fmt.Fprintf(b, "| %d | %s | %s | %s | %s | %.3f | %.3f | %s |\n", r.Concurrency, strings.TrimPrefix(r.Driver, "cost-"), spread(r, roundThroughput, r.Throughput, 1), spread(r, roundP50, r.P50ms, 2), spread(r, roundP99, r.P99ms, 2),
			r.OrderdCPUPer1k, r.ClusterCPUPer1k, ratio(r.OrderdCPUPer1k, r.ClusterCPUPer1k))
	}
	fmt.Fprintf(b, "\n")
	for _, c := range concurrencies(rs) {
		var at []Result
		for _, r := range rs {
			if r.Concurrency == c {
				at = append(at, r)
			}
		}
		if len(at) < 2 {
			continue
		}
		ref := at[0]
		var parts []string
		for _, r := range at[1:] {
			parts = append(parts, fmt.Sprintf("%s: orderd CPU per order %s, throughput %s", strings.TrimPrefix(r.Driver, "cost-"),
				ratio(r.OrderdCPUPer1k, ref.OrderdCPUPer1k), ratio(r.Throughput, ref.Throughput)))
		}
		fmt.Fprintf(b, "- concurrency %d, against %s: %s\n", c, strings.TrimPrefix(ref.Driver, "cost-"), strings.Join(parts, "; "))
	}
}

// defaultCostVariants: orderd as shipped against the Go runtime settings an
// operator could change (collector pacing, scheduler width).
const defaultCostVariants = "default;gogc-400:GOGC=400;procs-1:GOMAXPROCS=1"
