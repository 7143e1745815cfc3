package main

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// gcPause is one stop-the-world pause of a JVM, as its unified GC log
// (-Xlog:gc with the time decoration) records it: the line is written when
// the pause ends.
type gcPause struct {
	end time.Time
	dur time.Duration
}

func (p gcPause) start() time.Time { return p.end.Add(-p.dur) }

// gcTimeLayout is the time decoration of a unified JVM log line
// ("[2026-12-06T21:14:03.512+0000]").
const gcTimeLayout = "2006-01-02T15:04:05.000-0700"

// gcPauseLine matches a pause's message after the decorations: G1's "GC(12)
// Pause Young (Normal) (G1 Evacuation Pause) 210M->48M(1024M) 12.345ms",
// "GC(13) Pause Remark 3.2ms", "GC(14) Pause Full (...) ... 1234.5ms", and
// ZGC's "GC(3) Pause Mark Start 0.012ms" (JDK 21's generational ZGC puts
// "y: " or "O: " before "Pause").
var gcPauseLine = regexp.MustCompile(`GC\(\d+\) (?:[yYO]: )?Pause .* (\d+(?:\.\d+)?)ms$`)

// gcStallLine matches ZGC's "Allocation Stall (MutationStage-12)
// 370.622ms": a thread that needed memory waited for the collector that
// long. ZGC stops no thread for more than a millisecond, but a stalled
// thread serves nothing meanwhile, so a stall counts as a pause here:
// counting only the Pause phases would call a collector that stalls
// request threads for 700 ms pause-free.
var gcStallLine = regexp.MustCompile(`Allocation Stall \(.*\) (\d+(?:\.\d+)?)ms$`)

// parseGCLine reads one line of a unified GC log; ok is false for every
// line that is not a pause (or an allocation stall) with its wall-clock time (concurrent phases,
// heap summaries, lines without the time decoration).
func parseGCLine(line string) (p gcPause, ok bool) {
	line = strings.TrimRight(line, " \r")
	if !strings.HasPrefix(line, "[") {
		return p, false
	}
	stamp, rest, found := strings.Cut(line[1:], "]")
	if !found {
		return p, false
	}
	end, err := time.Parse(gcTimeLayout, stamp)
	if err != nil {
		return p, false
	}
	m := gcPauseLine.FindStringSubmatch(rest)
	if m == nil {
		m = gcStallLine.FindStringSubmatch(rest)
	}
	if m == nil {
		return p, false
	}
	msec, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return p, false
	}
	return gcPause{end: end, dur: time.Duration(msec * float64(time.Millisecond))}, true
}

// readGCLog returns the pauses in a GC log and the files it rotated to
// (path.0, path.1, ...: -Xlog's filecount), sorted by their end. A missing
// file yields none.
func readGCLog(path string) []gcPause {
	rotated, _ := filepath.Glob(path + ".*")
	var out []gcPause
	for _, f := range append(rotated, path) {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			if p, ok := parseGCLine(sc.Text()); ok {
				out = append(out, p)
			}
		}
		fh.Close()
	}
	slices.SortFunc(out, func(a, b gcPause) int { return a.end.Compare(b.end) })
	return out
}

// longestPause is the longest of pauses that overlap [from, to], and 0
// when none does.
func longestPause(pauses []gcPause, from, to time.Time) time.Duration {
	var longest time.Duration
	for _, p := range pauses {
		if !p.end.Before(from) && !p.start().After(to) {
			longest = max(longest, p.dur)
		}
	}
	return longest
}

// gcSources names the GC logs a run reads: every Cassandra node's matching
// nodeGlob, named by its node folder (node1, node2, ...), and the broker's
// at brokerLog (named "broker") when it exists.
func gcSources(nodeGlob, brokerLog string) map[string]string {
	out := map[string]string{}
	nodes, _ := filepath.Glob(nodeGlob)
	for _, f := range nodes {
		out[filepath.Base(filepath.Dir(filepath.Dir(f)))] = f
	}
	if brokerLog != "" {
		if _, err := os.Stat(brokerLog); err == nil {
			out["broker"] = brokerLog
		}
	}
	return out
}

// readGCLogs reads the pauses of every source (name → GC log path), once
// for every use a run makes of them.
func readGCLogs(sources map[string]string) map[string][]gcPause {
	out := map[string][]gcPause{}
	for name, path := range sources {
		out[name] = readGCLog(path)
	}
	return out
}

// attachGCPauses sets, on every round of every result, the longest pause
// of each source that overlapped the round. A source with no pause in a
// round gets 0: its log was read and the JVM did not stop.
func attachGCPauses(results []Result, pauses map[string][]gcPause) {
	for i := range results {
		for j := range results[i].Rounds {
			rd := &results[i].Rounds[j]
			rd.GCMaxMs = map[string]float64{}
			for name, ps := range pauses {
				rd.GCMaxMs[name] = ms(longestPause(ps, rd.Start, rd.End))
			}
		}
	}
}

// attachSoakGCPauses sets, on every sample of s, each source's pause time
// in the sample's interval (its At minus the sampling interval, to its At):
// what a JVM that allocates more per order as the hour goes on shows.
func attachSoakGCPauses(s *Soak, pauses map[string][]gcPause) {
	every := time.Duration(s.EverySeconds * float64(time.Second))
	for name, ps := range pauses {
		for i := range s.Samples {
			x := &s.Samples[i]
			if x.GCPauseMs == nil {
				x.GCPauseMs = map[string]float64{}
			}
			x.GCPauseMs[name] = ms(pausedIn(ps, x.At.Add(-every), x.At))
		}
	}
}

// pausedIn sums the pauses that ended in (from, to].
func pausedIn(pauses []gcPause, from, to time.Time) time.Duration {
	var total time.Duration
	for _, p := range pauses {
		if p.end.After(from) && !p.end.After(to) {
			total += p.dur
		}
	}
	return total
}
