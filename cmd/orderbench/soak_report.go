package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// soakSeries is one figure of the soak over the samples that read it, with
// the floor of its flatness bound (judgeFlat) in its own unit.
type soakSeries struct {
	name   string
	values []float64
	floor  float64
}

// Floors of the flatness bound, each in its series' unit, and why: below
// them a change is the noise of one sample, not a trend.
const (
	floorRSSMB      = 8  // a few of Go's heap arenas and the driver's buffers
	floorGoroutines = 10 // gRPC streams and driver connections come and go
	floorP99ms      = 10 // one GC pause of a Cassandra JVM in the interval
	floorP50ms      = 5
	floorCompaction = 4   // a memtable flush queues a few compactions at once
	floorGCPauseMs  = 100 // one young collection more or less in the interval
	floorPaxosMB    = 16  // a flush of system.paxos, or a compaction not yet done
	// Lag: five seconds of orders, at least 100 records (the producer
	// batches, the consumer commits after each poll).
	floorLagSeconds = 5
	floorLagRecords = 100
)

// soakLagFloor is the lag floor at rate calls/s.
func soakLagFloor(rate float64) float64 { return max(rate*floorLagSeconds, floorLagRecords) }

// soakSeriesOf lists the soak's series in report order.
func soakSeriesOf(s *Soak) []soakSeries {
	// pick is f of every sample that read it (f's second result).
	pick := func(f func(SoakSample) (float64, bool)) []float64 {
		var out []float64
		for _, x := range s.Samples {
			if v, ok := f(x); ok {
				out = append(out, v)
			}
		}
		return out
	}
	always := func(f func(SoakSample) float64) []float64 {
		return pick(func(x SoakSample) (float64, bool) { return f(x), true })
	}
	perInterval := s.Rate * s.EverySeconds
	series := []soakSeries{
		{"orderd RSS (MB)", pick(func(x SoakSample) (float64, bool) { return x.RSSMB, x.RSSMB > 0 }), floorRSSMB},
		{"orderd goroutines", pick(func(x SoakSample) (float64, bool) { return x.Goroutines, x.Goroutines > 0 }), floorGoroutines},
		{"p99 (ms)", always(func(x SoakSample) float64 { return x.P99ms }), floorP99ms},
		{"p50 (ms)", always(func(x SoakSample) float64 { return x.P50ms }), floorP50ms},
		{"throughput (calls/s)", always(func(x SoakSample) float64 { return x.Throughput }), 1},
		// Errors and shed calls: up to 1% of the interval's calls is noise.
		{"errors + shed per interval", always(func(x SoakSample) float64 { return float64(x.Errors + x.Shed) }), max(perInterval/100, 1)},
	}
	for _, node := range soakNodes(s) {
		series = append(series, soakSeries{"pending compactions " + node, pick(func(x SoakSample) (float64, bool) {
			v, ok := x.PendingCompactions[node]
			return float64(v), ok
		}), floorCompaction})
	}
	for _, node := range soakPaxosNodes(s) {
		series = append(series, soakSeries{"system.paxos MB " + node, pick(func(x SoakSample) (float64, bool) {
			v, ok := x.PaxosMB[node]
			return v, ok
		}), floorPaxosMB})
	}
	for _, src := range soakGCSources(s) {
		series = append(series, soakSeries{"GC pause ms per interval " + src, pick(func(x SoakSample) (float64, bool) {
			v, ok := x.GCPauseMs[src]
			return v, ok
		}), floorGCPauseMs})
	}
	return append(series,
		soakSeries{"tombstone warnings per interval", always(func(x SoakSample) float64 { return float64(x.TombstoneWarnings) }), 0},
		soakSeries{"consumer lag (records)", pick(func(x SoakSample) (float64, bool) { return float64(x.ConsumerLag), x.ConsumerLag >= 0 }),
			soakLagFloor(s.Rate)})
}

// soakNodes are the nodes whose compactions were read, sorted.
func soakNodes(s *Soak) []string {
	return sampledKeys(s, func(x SoakSample) map[string]int { return x.PendingCompactions })
}

// soakPaxosNodes are the nodes whose system.paxos was measured, sorted.
func soakPaxosNodes(s *Soak) []string {
	return sampledKeys(s, func(x SoakSample) map[string]float64 { return x.PaxosMB })
}

// soakGCSources are the JVMs whose pauses were read, sorted.
func soakGCSources(s *Soak) []string {
	return sampledKeys(s, func(x SoakSample) map[string]float64 { return x.GCPauseMs })
}

// sampledKeys are the keys of a per-source reading (m) that any sample of
// s holds, sorted: a source read in some intervals and not others is one.
func sampledKeys[V any](s *Soak, m func(SoakSample) map[string]V) []string {
	var out []string
	for _, x := range s.Samples {
		for k := range m(x) {
			if !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	slices.Sort(out)
	return out
}

// soakVerdicts judges every series of s.
func soakVerdicts(s *Soak) []Flatness {
	var out []Flatness
	for _, x := range soakSeriesOf(s) {
		out = append(out, judgeFlat(x.name, x.values, x.floor))
	}
	return out
}

// soakPlotPath is where the soak's plot goes: beside the latency plot.
func soakPlotPath(latencyPlot string) string {
	return filepath.Join(filepath.Dir(latencyPlot), "benchmark-soak.svg")
}

// soaks are the runs' soak phases.
func soaks(runs []Run) []*Soak {
	var out []*Soak
	for _, r := range runs {
		if r.Soak != nil {
			out = append(out, r.Soak)
		}
	}
	return out
}

// writeSoak reports the soak: how it ran, the verdicts, and the samples.
func writeSoak(b *strings.Builder, runs []Run, plot string) {
	for _, s := range soaks(runs) {
		r := s.Summary
		fmt.Fprintf(b, "\n## Soak: orderd as in production at a steady rate\n\n")
		fmt.Fprintf(b, "One orderd with event delivery on (publishing to the local broker, %s) and the reference consumer (cmd/orderconsumer, group `%s`) applying every event, under an open loop of new orders at %.1f calls/s (%s) for %.0f s: calls go out on schedule whether or not earlier ones were answered, and a call's latency counts from when it was due. ",
			s.Brokers, s.Group, s.Rate, s.RateFrom, s.Seconds)
		fmt.Fprintf(b, "Before the soak, the consumer worked off the events of the warm-up and of the maximum's measurement for %.0f s: its lag was %d at the start. ",
			s.CatchUpSeconds, s.LagAtStart)
		fmt.Fprintf(b, "%d calls, %d errors; %.1f calls/s answered; p50 %.2f ms, p95 %.2f ms, p99 %.2f ms; orderd RSS %.1f MB at the first sample, %.1f MB at the last (peak %.1f MB); orderd CPU %.3f s per 1,000 calls.\n\n",
			r.Requests, r.Errors, r.Throughput, r.P50ms, r.P95ms, r.P99ms, r.RSSStartMB, r.RSSEndMB, r.OrderdPeakRSSMB, r.OrderdCPUPer1k)
		fmt.Fprintf(b, "A sample every %.0f s: the interval's calls (p50, p99, throughput, errors, calls shed because %d were already waiting), then orderd's RSS and goroutines from its /metrics, each node's pending compactions (nodetool compactionstats) and the size of its system.paxos (nodetool tablestats, live space), the tombstone warnings the node logs gained, and the consumer group's lag (end offset − committed offset over the topic's partitions, franz-go kadm).\n\n",
			s.EverySeconds, soakMaxInFlight)
		fmt.Fprintf(b, "**Flat or not.** After a warm-up (the first tenth of the samples, at least one), the median of the last quarter of the samples is compared with the median of the first quarter: a series is flat when they differ by at most %.0f%% of the first, or by its floor where that is larger (the floor keeps near-zero series from being judged on one or two units). ", flatRelative*100)
		fmt.Fprintf(b, "Floors: RSS %d MB, goroutines %d, p99 %d ms, p50 %d ms, throughput 1 call/s, errors + shed 1%% of an interval's calls, pending compactions %d, system.paxos %d MB, GC pause %d ms per interval, tombstone warnings 0, lag %d s of calls (at least %d records). Fewer than %d samples after the warm-up: too short to judge.\n\n",
			floorRSSMB, floorGoroutines, floorP99ms, floorP50ms, floorCompaction, floorPaxosMB, floorGCPauseMs, floorLagSeconds, floorLagRecords, flatMinSamples)
		writePaxosRepairs(b, s)
		if plot != "" {
			fmt.Fprintf(b, "![soak](%s)\n\n", plotName(soakPlotPath(plot)))
		}
		fmt.Fprintf(b, "| series | first quarter | last quarter | bound | verdict |\n|---|---|---|---|---|\n")
		// Judged from the samples, as the plot is: a report never shows
		// a verdict its samples do not carry.
		for _, v := range soakVerdicts(s) {
			fmt.Fprintf(b, "| %s | %.4g | %.4g | %.4g | **%s** |\n", v.Series, v.First, v.Last, v.Bound, v.Verdict)
		}
		writeSoakSamples(b, s)
	}
}

// writePaxosRepairs says whether paxos repairs ran during the soak, and
// how they went.
func writePaxosRepairs(b *strings.Builder, s *Soak) {
	if s.PaxosRepairEverySeconds <= 0 {
		fmt.Fprintf(b, "No paxos repair ran during the soak. The local cluster purges paxos state only once a paxos repair has covered it (`paxos_state_purging: repaired`, as in production), so system.paxos kept the state of every LWT of the run.\n\n")
		return
	}
	var longest float64
	failed := 0
	for _, r := range s.PaxosRepairs {
		longest = max(longest, r.Seconds)
		if r.Error != "" {
			failed++
		}
	}
	fmt.Fprintf(b, "Every %.0f s during the soak, `nodetool repair --paxos-only -pr` ran on each node in turn (as the Kubernetes CronJob in deploy/kubernetes/cassandra/paxos-repair.yaml runs it), so that each node could purge the paxos state the repair covered (`paxos_state_purging: repaired`): %d repairs, the longest %.1f s, %d failed.\n\n",
		s.PaxosRepairEverySeconds, len(s.PaxosRepairs), longest, failed)
}

// writeSoakSamples is the per-interval table.
func writeSoakSamples(b *strings.Builder, s *Soak) {
	nodes, paxosNodes, jvms := soakNodes(s), soakPaxosNodes(s), soakGCSources(s)
	fmt.Fprintf(b, "\n| t (min) | calls | errors | shed | calls/s | p50 ms | p99 ms | RSS MB | goroutines | pending compactions (%s) | system.paxos MB (%s) | GC pause ms (%s) | tombstone warnings | lag | not read |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
		strings.Join(nodes, ", "), strings.Join(paxosNodes, ", "), strings.Join(jvms, ", "))
	for _, x := range s.Samples {
		var pend, paxos, paused []string
		for _, n := range nodes {
			v, ok := x.PendingCompactions[n]
			pend = append(pend, readOr(float64(v), ok, "%.0f"))
		}
		for _, n := range paxosNodes {
			v, ok := x.PaxosMB[n]
			paxos = append(paxos, readOr(v, ok, "%.0f"))
		}
		for _, n := range jvms {
			v, ok := x.GCPauseMs[n]
			paused = append(paused, readOr(v, ok, "%.0f"))
		}
		fmt.Fprintf(b, "| %.2f | %d | %d | %d | %.1f | %.2f | %.2f | %s | %s | %s | %s | %s | %d | %s | %s |\n",
			x.At.Sub(s.Samples[0].At).Minutes()+s.EverySeconds/60, x.Requests, x.Errors, x.Shed, x.Throughput, x.P50ms, x.P99ms,
			readOr(x.RSSMB, x.RSSMB > 0, "%.1f"), readOr(x.Goroutines, x.Goroutines > 0, "%.0f"), strings.Join(pend, ", "),
			strings.Join(paxos, ", "), strings.Join(paused, ", "), x.TombstoneWarnings, readOr(float64(x.ConsumerLag), x.ConsumerLag >= 0, "%.0f"), strings.Join(x.Problems, "; "))
	}
}

// readOr formats v, or "–" when it was not read.
func readOr(v float64, read bool, format string) string {
	if !read {
		return "–"
	}
	return fmt.Sprintf(format, v)
}

// soakPlot draws every series of the soak against time, one small panel
// each, as an SVG; each panel's title carries its verdict.
func soakPlot(s *Soak) string {
	series := soakSeriesOf(s)
	const cols, pw, ph, gap, top = 2, 300.0, 140.0, 50.0, 40.0
	rows := (len(series) + cols - 1) / cols
	w, h := cols*(pw+gap)+gap, top+float64(rows)*(ph+gap)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="11">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="20" font-size="14">Soak at %.1f calls/s, a sample every %.0f s (x: minutes)</text>`+"\n", gap, s.Rate, s.EverySeconds)
	verdicts := soakVerdicts(s)
	for k, x := range series {
		x0, y0 := gap+float64(k%cols)*(pw+gap), top+float64(k/cols)*(ph+gap)+10
		soakPanel(&b, x, verdicts[k], s.EverySeconds/60, x0, y0, pw, ph)
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// soakPanel draws one series in the box at (x0, y0), w by h.
func soakPanel(b *strings.Builder, x soakSeries, v Flatness, minutesPerSample, x0, y0, w, h float64) {
	color := map[string]string{"flat": "#2ca02c", "not flat": "#d62728"}[v.Verdict]
	if color == "" {
		color = "#7f7f7f"
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f">%s: %s</text>`+"\n", x0, y0-4, x.name, v.Verdict)
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#bbb"/>`+"\n", x0, y0, w, h)
	top := 0.0
	for _, y := range x.values {
		top = math.Max(top, y)
	}
	top = math.Max(top*1.1, 1)
	n := len(x.values)
	px := func(i int) float64 {
		if n < 2 {
			return x0 + w/2
		}
		return x0 + w*float64(i)/float64(n-1)
	}
	py := func(y float64) float64 { return y0 + h*(1-y/top) }
	var pts []string
	for i, y := range x.values {
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(i), py(y)))
	}
	fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", color, strings.Join(pts, " "))
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end">%.4g</text><text x="%.1f" y="%.1f" text-anchor="end">0</text>`+"\n", x0-3, y0+8, top, x0-3, y0+h)
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f">%.1f</text><text x="%.1f" y="%.1f" text-anchor="end">%.1f</text>`+"\n",
		x0, y0+h+12, minutesPerSample, x0+w, y0+h+12, float64(n)*minutesPerSample)
}

// writeSoakPlots writes the soak's plot beside the latency plot, if a run
// has a soak.
func writeSoakPlots(runs []Run, latencyPlot string) error {
	for _, s := range soaks(runs) {
		if err := os.WriteFile(soakPlotPath(latencyPlot), []byte(soakPlot(s)), 0o644); err != nil {
			return fmt.Errorf("write the soak's plot: %w", err)
		}
	}
	return nil
}
