package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// noisy is n samples of level with uniform noise of ±spread, reproducible.
func noisy(n int, level, spread float64, seed uint64) []float64 {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]float64, n)
	for i := range out {
		out[i] = level + spread*(2*r.Float64()-1)
	}
	return out
}

// An hour sampled every minute: steady series are flat, a leak is not, and
// one bad minute does not make a steady series not flat.
func TestJudgeFlat(t *testing.T) {
	leak := noisy(60, 0, 2, 7)
	for i := range leak {
		leak[i] += 60 + 1.5*float64(i) // RSS growing 1.5 MB a minute from 60 MB
	}
	slowLeak := noisy(60, 0, 1, 8)
	for i := range slowLeak {
		slowLeak[i] += 300 + float64(i) // a goroutine a minute: +60 over the hour
	}
	// Below the rule's resolution: +30 over the hour on 300 moves the
	// quarters' medians by less than 10%.
	slowerLeak := noisy(60, 0, 1, 8)
	for i := range slowerLeak {
		slowerLeak[i] += 300 + 0.5*float64(i)
	}
	spike := noisy(60, 40, 3, 9)
	spike[50] = 900 // one minute with a long GC pause
	warmUp := noisy(60, 80, 2, 10)
	warmUp[0], warmUp[1] = 20, 50 // the first minutes before the pools fill
	for _, c := range []struct {
		name   string
		values []float64
		floor  float64
		want   string
	}{
		{"steady RSS", noisy(60, 80, 4, 1), 8, "flat"},
		{"steady p99", noisy(60, 45, 15, 2), 10, "flat"},
		{"zero tombstone warnings", make([]float64, 60), 0, "flat"},
		{"compactions wandering near zero", noisy(60, 2, 2, 3), 4, "flat"},
		{"one slow minute", spike, 10, "flat"},
		{"warm-up then steady", warmUp, 8, "flat"},
		{"RSS leak", leak, 8, "not flat"},
		{"goroutine leak", slowLeak, 10, "not flat"},
		{"goroutine leak below the resolution", slowerLeak, 10, "flat"},
		{"lag that keeps growing", func() []float64 {
			v := make([]float64, 60)
			for i := range v {
				v[i] = 50 * float64(i)
			}
			return v
		}(), 500, "not flat"},
		{"tombstone warnings that start mid-run", append(make([]float64, 30), noisy(30, 5, 1, 4)...), 0, "not flat"},
		{"throughput that falls by a third", append(noisy(30, 150, 3, 5), noisy(30, 100, 3, 6)...), 1, "not flat"},
		{"four samples", noisy(4, 1, 0, 1), 0, "too short"},
	} {
		got := judgeFlat(c.name, c.values, c.floor)
		if got.Verdict != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

// The bound is 10% of the first quarter's median, or the floor where that
// is larger; the medians skip the warm-up.
func TestJudgeFlatFigures(t *testing.T) {
	// 10 samples: warm-up 1, then 9; quarters of 2: [10, 10] and [11, 12].
	got := judgeFlat("x", []float64{1000, 10, 10, 11, 11, 11, 11, 11, 11, 12}, 1)
	if got.First != 10 || got.Last != 11.5 || got.Bound != 1 || got.Verdict != "not flat" {
		t.Errorf("judgeFlat = %+v, want first 10, last 11.5, bound 1 (10%% of 10), not flat", got)
	}
	got = judgeFlat("x", []float64{1000, 10, 10, 11, 11, 11, 11, 11, 11, 12}, 2)
	if got.Bound != 2 || got.Verdict != "flat" {
		t.Errorf("with floor 2: %+v, want bound 2, flat", got)
	}
}

// orderd's /metrics, as the Prometheus client writes it: the soak reads its
// resident memory and goroutines.
func TestProcessGauges(t *testing.T) {
	const exposition = `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 143
# HELP grpc_server_handled_total Total number of RPCs completed on the server, regardless of success or failure.
# TYPE grpc_server_handled_total counter
grpc_server_handled_total{grpc_code="OK",grpc_method="CreateOrder",grpc_service="atlasmart.orders.v1.OrderService",grpc_type="unary"} 2000
# HELP process_resident_memory_bytes Resident memory size in bytes.
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 5.1478528e+07
`
	rss, gr, err := processGauges(strings.NewReader(exposition))
	if err != nil || rss != 51478528 || gr != 143 {
		t.Errorf("processGauges = %v, %v, %v; want 51478528, 143, nil", rss, gr, err)
	}
	_, _, err = processGauges(strings.NewReader("# TYPE go_goroutines gauge\ngo_goroutines 3\n"))
	if err == nil || !strings.Contains(err.Error(), "process_resident_memory_bytes") {
		t.Errorf("without the RSS gauge: err = %v, want it named", err)
	}
}

// nodetool compactionstats of Cassandra 5.0 (a table of settings) and of
// 4.x ("pending tasks: N", then the tables with pending work).
func TestPendingCompactions(t *testing.T) {
	const v5 = `concurrent compactors            1           
pending tasks                    7           
- bench_1.orders_by_id: 3
- bench_1.due_requests: 4
compactions completed            1637        
compaction throughput (MiB/s)    64.0        
`
	const v4 = "pending tasks: 2\n- ks.t: 2\n\nid   compaction type keyspace table completed total unit progress\n"
	for _, c := range []struct {
		out  string
		want int
	}{{v5, 7}, {v4, 2}} {
		if got, err := pendingCompactions(c.out); err != nil || got != c.want {
			t.Errorf("pendingCompactions(%q) = %d, %v; want %d", c.out, got, err, c.want)
		}
	}
	if _, err := pendingCompactions("error: JMX connection refused"); err == nil {
		t.Error("no pending tasks line: want an error")
	}
}

// nodetool tablestats of Cassandra 5.0, without -H: bytes.
func TestLiveSpace(t *testing.T) {
	const out = `Total number of tables: 1
----------------
Keyspace : system
	Read Count: 2213
		Table: paxos
		SSTable count: 4
		Space used (live): 146800640
		Space used (total): 146800640
		Space used by snapshots (total): 0
`
	if got, err := liveSpace(out); err != nil || got != 146800640 {
		t.Errorf("liveSpace = %d, %v; want 146800640", got, err)
	}
	if _, err := liveSpace("Unknown table/keyspace system.paxos"); err == nil {
		t.Error("no live space line: want an error")
	}
}

// The report gives every series a verdict, the per-sample table and a plot
// panel per series, each panel titled with its verdict.
func TestSoakReport(t *testing.T) {
	s := &Soak{Rate: 100, RateFrom: "-soak-rate", EverySeconds: 60, Seconds: 600, Brokers: "127.0.0.1:19092", Group: "g"}
	start := time.Date(2026, 12, 6, 22, 0, 0, 0, time.UTC)
	for i := range 10 {
		s.Samples = append(s.Samples, SoakSample{At: start.Add(time.Duration(i+1) * time.Minute), Requests: 6000, Throughput: 100,
			P50ms: 20, P99ms: 60, RSSMB: 60 + 10*float64(i), Goroutines: 120,
			PendingCompactions: map[string]int{"node1": 1, "node2": 0}, ConsumerLag: 40, PaxosMB: map[string]float64{"node1": 20 * float64(i)},
			GCPauseMs: map[string]float64{"node1": 300 + 50*float64(i), "broker": 5}})
	}
	// The first sample could not read the lag nor node2: it counts in
	// neither series, and the table says so.
	s.Samples[0].ConsumerLag, s.Samples[0].Problems = -1, []string{"lag of group g: unable to dial"}
	delete(s.Samples[0].PendingCompactions, "node2")
	// No stored verdicts: the report judges the samples itself, so a soak
	// judged before its GC pauses were read still shows theirs.
	var b strings.Builder
	writeSoak(&b, []Run{{Soak: s}}, "docs/benchmark-latency.svg")
	report := b.String()
	for _, want := range []string{
		"| system.paxos MB node1 | 30 | 170 | 16 | **not flat** |",
		"No paxos repair ran during the soak.",
		"| orderd RSS (MB) | 75 | 145 | 8 | **not flat** |",
		"| orderd goroutines | 120 | 120 | 12 | **flat** |",
		"| pending compactions node2 | 0 | 0 | 4 | **flat** |",
		"| consumer lag (records) | 40 | 40 | 500 | **flat** |",
		"| GC pause ms per interval node1 | 375 | 725 | 100 | **not flat** |",
		"| GC pause ms per interval broker | 5 | 5 | 100 | **flat** |",
		"![soak](benchmark-soak.svg)",
		"| GC pause ms (broker, node1) |",
		"| 10.00 | 6000 | 0 | 0 | 100.0 | 20.00 | 60.00 | 150.0 | 120 | 1, 0 | 180 | 5, 750 | 0 | 40 |  |",
		"| 1.00 | 6000 | 0 | 0 | 100.0 | 20.00 | 60.00 | 60.0 | 120 | 1, – | 0 | 5, 300 | 0 | – | lag of group g: unable to dial |",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	for _, x := range soakSeriesOf(s) {
		want := 10
		if x.name == "consumer lag (records)" || x.name == "pending compactions node2" {
			want = 9
		}
		if len(x.values) != want {
			t.Errorf("series %s has %d values, want %d", x.name, len(x.values), want)
		}
	}
	s.judge()
	plot := soakPlot(s)
	if n := strings.Count(plot, "<polyline"); n != len(s.Verdicts) {
		t.Errorf("plot has %d series, want %d", n, len(s.Verdicts))
	}
	if !strings.Contains(plot, "orderd RSS (MB): not flat") {
		t.Error("plot does not title the RSS panel with its verdict")
	}
	if math.IsNaN(s.Verdicts[0].First) {
		t.Error("NaN verdict")
	}
	s.PaxosRepairEverySeconds = 300
	s.PaxosRepairs = []PaxosRepair{{Node: 1, Seconds: 2.5}, {Node: 2, Seconds: 4.25, Error: "exit status 2"}, {Node: 3, Seconds: 1}}
	b.Reset()
	writeSoak(&b, []Run{{Soak: s}}, "")
	if want := "Every 300 s during the soak, `nodetool repair --paxos-only -pr` ran on each node in turn"; !strings.Contains(b.String(), want) {
		t.Errorf("report lacks %q", want)
	}
	if want := "3 repairs, the longest 4.2 s, 1 failed."; !strings.Contains(b.String(), want) {
		t.Errorf("report lacks %q:\n%s", want, b.String())
	}
}

// The setup line of a soak-only run speaks of its open loop, not of rounds
// it did not run; a run with rounds still names them.
func TestSetupNamesRoundsOnlyWhereTheyRan(t *testing.T) {
	soak := Run{Command: "soak-run", Rounds: 5, Results: []Result{{Phase: "soak"}}, Soak: &Soak{Rate: 70, EverySeconds: 60}}
	compare := Run{Command: "compare-run", Rounds: 5, Results: []Result{{Phase: "compare"}}}
	var b strings.Builder
	writeSetup(&b, []Run{soak, compare})
	lines := strings.Split(b.String(), "\n")
	i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "- `soak-run`") })
	j := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "- `compare-run`") })
	if i < 0 || j < 0 {
		t.Fatalf("setup lacks a run:\n%s", b.String())
	}
	if strings.Contains(lines[i], "rounds") || !strings.Contains(lines[i], "open loop at 70.0 calls/s, a sample every 60 s") {
		t.Errorf("soak setup = %q, want its open loop and no rounds", lines[i])
	}
	if !strings.Contains(lines[j], "run 5 rounds per concurrency") {
		t.Errorf("compare setup = %q, want its rounds", lines[j])
	}
}
