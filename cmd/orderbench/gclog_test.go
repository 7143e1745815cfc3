package main

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// g1Log is a real gc.log: a one-node local cluster (Apache Cassandra 5.0.9
// on OpenJDK 17.0.15, G1, 512 MB heap) starting, as
// templates/jvm17.options.tmpl of internal/tools/localcluster logs it.
const g1Log = `[2026-12-06T21:00:53.842+0000][0.005s][info][gc] Using G1
[2026-12-06T21:00:58.033+0000][4.196s][info][gc] GC(0) Pause Young (Normal) (G1 Evacuation Pause) 26M->8M(512M) 126.932ms
[2026-12-06T21:01:08.757+0000][14.919s][info][gc] GC(3) Pause Young (Concurrent Start) (Metadata GC Threshold) 19M->13M(512M) 113.879ms
[2026-12-06T21:01:08.757+0000][14.919s][info][gc] GC(4) Concurrent Mark Cycle
[2026-12-06T21:01:09.003+0000][15.166s][info][gc] GC(4) Pause Remark 14M->14M(512M) 80.890ms
[2026-12-06T21:01:09.216+0000][15.379s][info][gc] GC(4) Pause Cleanup 14M->14M(512M) 0.115ms
[2026-12-06T21:01:09.232+0000][15.395s][info][gc] GC(4) Concurrent Mark Cycle 475.129ms
[2026-12-06T21:01:22.782+0000][28.945s][info][gc] GC(6) Pause Young (Mixed) (Metadata GC Threshold) 24M->17M(512M) 41.239ms
[2026-12-06T21:01:27.834+0000][33.997s][info][gc] GC(9) Pause Young (Normal) (G1 Evacuation Pause) 80M->35M(512M) 177.544ms
`

// zgcLog is a real gc.log of the same node started with CASSANDRA_GC=zgc:
// ZGC logs its pauses under gc+phases, beside concurrent phases that do
// not stop the JVM (its tags padded to a column).
const zgcLog = `[2026-12-06T21:03:55.748+0000][1.850s][info][gc] Using The Z Garbage Collector
[2026-12-06T21:04:07.896+0000][13.999s][info][gc,phases] GC(0) Pause Mark Start 0.014ms
[2026-12-06T21:04:08.090+0000][14.192s][info][gc,phases] GC(0) Concurrent Mark 193.532ms
[2026-12-06T21:04:08.090+0000][14.193s][info][gc,phases] GC(0) Pause Mark End 0.016ms
[2026-12-06T21:04:08.102+0000][14.204s][info][gc,phases] GC(0) Concurrent Select Relocation Set 4.940ms
[2026-12-06T21:04:08.270+0000][14.372s][info][gc,phases] GC(0) Pause Relocate Start 0.012ms
[2026-12-06T21:04:08.497+0000][14.599s][info][gc,phases] GC(0) Concurrent Relocate 227.224ms
[2026-12-06T21:04:08.497+0000][14.599s][info][gc       ] GC(0) Garbage Collection (Warmup) 52M(10%)->32M(6%)
`

func TestParseGCLinesZGC(t *testing.T) {
	var got []time.Duration
	for _, line := range strings.Split(zgcLog, "\n") {
		if p, ok := parseGCLine(line); ok {
			got = append(got, p.dur)
		}
	}
	want := []time.Duration{14 * time.Microsecond, 16 * time.Microsecond, 12 * time.Microsecond}
	if !slices.Equal(got, want) {
		t.Errorf("ZGC pauses = %v, want %v (the three Pause phases, none of the concurrent ones)", got, want)
	}
}

// A ZGC allocation stall holds its thread as a pause would: it is read as
// one, with its length.
func TestParseGCLinesZGCAllocationStall(t *testing.T) {
	line := "[2026-12-06T22:36:33.604+0000][255.342s][info][gc       ] Allocation Stall (CompactionExecutor:2) 724.359ms"
	p, ok := parseGCLine(line)
	if !ok || p.dur != 724359*time.Microsecond || !p.end.Equal(at("2026-12-06T22:36:33.604+0000")) {
		t.Errorf("parseGCLine(%q) = %v, %v; want a 724.359 ms stall ending at its stamp", line, p, ok)
	}
}

func at(s string) time.Time {
	t, err := time.Parse(gcTimeLayout, s)
	if err != nil {
		panic(err)
	}
	return t
}

// Every stop-the-world pause is read with its end and length; concurrent
// phases (which do not stop the JVM) and other lines are not pauses.
func TestParseGCLinesG1(t *testing.T) {
	var got []gcPause
	for _, line := range strings.Split(g1Log, "\n") {
		if p, ok := parseGCLine(line); ok {
			got = append(got, p)
		}
	}
	want := []gcPause{
		{at("2026-12-06T21:00:58.033+0000"), 126932 * time.Microsecond},
		{at("2026-12-06T21:01:08.757+0000"), 113879 * time.Microsecond},
		{at("2026-12-06T21:01:09.003+0000"), 80890 * time.Microsecond},
		{at("2026-12-06T21:01:09.216+0000"), 115 * time.Microsecond},
		{at("2026-12-06T21:01:22.782+0000"), 41239 * time.Microsecond},
		{at("2026-12-06T21:01:27.834+0000"), 177544 * time.Microsecond},
	}
	if len(got) != len(want) {
		t.Fatalf("parsed %d pauses, want %d: %v", len(got), len(want), got)
	}
	for i := range want {
		if !got[i].end.Equal(want[i].end) || got[i].dur != want[i].dur {
			t.Errorf("pause %d = %v %v, want %v %v", i, got[i].end, got[i].dur, want[i].end, want[i].dur)
		}
	}
}

// A round's longest pause counts every pause that overlaps it, including
// one that began before the round and ended inside it, and one that began
// inside and ended after.
func TestLongestPauseInWindow(t *testing.T) {
	pauses := []gcPause{
		{at("2026-12-06T21:00:10.000+0000"), 300 * time.Millisecond}, // 09.700-10.000
		{at("2026-12-06T21:00:12.000+0000"), 50 * time.Millisecond},
		{at("2026-12-06T21:00:20.100+0000"), 200 * time.Millisecond}, // 19.900-20.100
	}
	for _, tc := range []struct {
		from, to string
		want     time.Duration
	}{
		{"21:00:09.800", "21:00:11.000", 300 * time.Millisecond},
		{"21:00:10.001", "21:00:19.000", 50 * time.Millisecond},
		{"21:00:13.000", "21:00:19.950", 200 * time.Millisecond},
		{"21:00:12.001", "21:00:19.899", 0},
	} {
		from, to := at("2026-12-06T"+tc.from+"+0000"), at("2026-12-06T"+tc.to+"+0000")
		if got := longestPause(pauses, from, to); got != tc.want {
			t.Errorf("longestPause %s-%s = %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
}

// The run reads every node's log and the broker's, rotated files too, and
// gives each round each JVM's longest pause: 0 for a JVM that did not stop.
func TestAttachGCPausesPerRoundAndNode(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, text string) {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("cluster/node1/logs/gc.log", g1Log)
	// node2's first pause is in the file -Xlog rotated away.
	write("cluster/node2/logs/gc.log.0", "[2026-12-06T21:00:58.500+0000][4.1s][info][gc] GC(0) Pause Young (Normal) (G1 Evacuation Pause) 26M->8M(512M) 250.000ms\n")
	write("cluster/node2/logs/gc.log", "[2026-12-06T21:01:22.000+0000][9.1s][info][gc] GC(1) Pause Young (Normal) (G1 Evacuation Pause) 26M->8M(512M) 12.500ms\n")
	write("kafka/logs/gc.log", "[2026-12-06T21:01:27.000+0000][1.0s][info][gc] GC(0) Pause Young (Normal) (G1 Evacuation Pause) 6M->2M(512M) 3.000ms\n")
	sources := gcSources(filepath.Join(dir, "cluster/node*/logs/gc.log"), filepath.Join(dir, "kafka/logs/gc.log"))
	if len(sources) != 3 || sources["broker"] == "" || sources["node1"] == "" || sources["node2"] == "" {
		t.Fatalf("sources = %v, want node1, node2 and broker", sources)
	}
	rs := []Result{{Rounds: []Round{
		{Index: 0, Start: at("2026-12-06T21:00:55.000+0000"), End: at("2026-12-06T21:01:00.000+0000")},
		{Index: 1, Start: at("2026-12-06T21:01:20.000+0000"), End: at("2026-12-06T21:01:30.000+0000")},
		{Index: 2, Start: at("2026-12-06T21:01:40.000+0000"), End: at("2026-12-06T21:01:50.000+0000")},
	}}}
	attachGCPauses(rs, readGCLogs(sources))
	want := []map[string]float64{
		{"node1": 126.932, "node2": 250, "broker": 0},
		{"node1": 177.544, "node2": 12.5, "broker": 3},
		{"node1": 0, "node2": 0, "broker": 0},
	}
	for i, w := range want {
		got := rs[0].Rounds[i].GCMaxMs
		for name, ms := range w {
			if v, ok := got[name]; !ok || v != ms {
				t.Errorf("round %d: %s longest pause = %v (present %v), want %v", i, name, v, ok, ms)
			}
		}
	}
}

// A soak sample gets each JVM's pause time in its interval: the pauses
// that ended in it, summed (a pause is counted in one interval only).
func TestAttachSoakGCPausesSumsEachInterval(t *testing.T) {
	log := filepath.Join(t.TempDir(), "gc.log")
	if err := os.WriteFile(log, []byte(g1Log), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &Soak{EverySeconds: 10, Samples: []SoakSample{
		{At: at("2026-12-06T21:01:00.000+0000")}, // GC(0)
		{At: at("2026-12-06T21:01:10.000+0000")}, // GC(3) and its remark and cleanup
		{At: at("2026-12-06T21:01:30.000+0000")}, // GC(6) and GC(9)
	}}
	attachSoakGCPauses(s, readGCLogs(map[string]string{"node1": log}))
	want := []float64{126.932, 113.879 + 80.890 + 0.115, 41.239 + 177.544}
	for i, w := range want {
		if got, ok := s.Samples[i].GCPauseMs["node1"]; !ok || math.Abs(got-w) > 1e-9 {
			t.Errorf("sample %d: node1 paused %v ms (present %v), want %v", i, got, ok, w)
		}
	}
	// Judged after the pauses are in, the soak has a verdict on them.
	s.judge()
	if !slices.ContainsFunc(s.Verdicts, func(v Flatness) bool { return v.Series == "GC pause ms per interval node1" }) {
		t.Errorf("verdicts %v lack node1's GC pause time", s.Verdicts)
	}
}

// The report names how the nodes keep their memtables, read from the
// cassandra.yaml they run with: the allocation type, and the default
// configuration's inheritance when one is set.
func TestMemtableSettings(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct {
		yaml string
		want []string
	}{
		"skip lists": {"cluster_name: x\nmemtable_allocation_type: heap_buffers\nconcurrent_reads: 8\n",
			[]string{"memtable_allocation_type: heap_buffers"}},
		"tries": {"memtable_allocation_type: offheap_objects\nmemtable:\n  configurations:\n    skiplist:\n      class_name: SkipListMemtable\n    default:\n      inherits: trie\n# c\nconcurrent_reads: 8\n  inherits: other\n",
			[]string{"memtable_allocation_type: offheap_objects", "memtable inherits: trie"}},
		"neither": {"cluster_name: x\n", nil},
	} {
		conf := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".yaml")
		if err := os.WriteFile(conf, []byte(tc.yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := memtableSettings(conf); !slices.Equal(got, tc.want) {
			t.Errorf("%s: memtableSettings = %q, want %q", name, got, tc.want)
		}
	}
	if got := memtableSettings(filepath.Join(dir, "missing.yaml")); got != nil {
		t.Errorf("a missing file: %q, want nothing", got)
	}
}
