package main

import (
	"fmt"
	"math"
)

// Flatness rule of the soak's series. A soak's figures drift when something
// accumulates: memory or goroutines that leak, compactions that fall
// behind, a consumer that lags more every minute. The rule compares the
// median of the last quarter of a series with the median of its first
// quarter, both after a warm-up (the first tenth of the samples, at least
// one): connection pools, caches and the JIT of the cluster settle in the
// first minutes and are not a trend. Medians, so that one slow minute (a
// GC pause, a compaction) moves neither end.
//
// A series is flat when |last − first| ≤ max(flatRelative × |first|,
// its absolute floor): the floor keeps near-zero series (pending
// compactions, tombstone warnings, lag) from being judged on noise of one
// or two units.
const (
	// flatRelative is the change between the quarters a series may show and
	// still be flat.
	flatRelative = 0.10
	// flatMinSamples is the fewest samples after the warm-up the rule judges
	// (a quarter of them is then at least one).
	flatMinSamples = 4
)

// Flatness is a series' verdict under the rule above.
type Flatness struct {
	Series string  `json:"series"`
	First  float64 `json:"first_quarter_median"`
	Last   float64 `json:"last_quarter_median"`
	Bound  float64 `json:"bound"`
	// Verdict is "flat", "not flat" or "too short" (fewer than
	// flatMinSamples samples after the warm-up).
	Verdict string `json:"verdict"`
}

// judgeFlat applies the rule to values, sampled at even intervals, with
// floor the series' absolute floor.
func judgeFlat(series string, values []float64, floor float64) Flatness {
	f := Flatness{Series: series, Verdict: "too short"}
	warm := max(len(values)/10, 1)
	if len(values)-warm < flatMinSamples {
		return f
	}
	rest := values[warm:]
	q := len(rest) / 4
	f.First, f.Last = medianOf(rest[:q]), medianOf(rest[len(rest)-q:])
	f.Bound = max(flatRelative*math.Abs(f.First), floor)
	f.Verdict = "flat"
	if math.Abs(f.Last-f.First) > f.Bound {
		f.Verdict = "not flat"
	}
	return f
}

// String says the verdict with the figures it rests on.
func (f Flatness) String() string {
	if f.Verdict == "too short" {
		return fmt.Sprintf("%s: too short to judge (fewer than %d samples after the warm-up)", f.Series, flatMinSamples)
	}
	return fmt.Sprintf("%s: %s (first-quarter median %.4g, last-quarter median %.4g, change %.4g, bound %.4g)",
		f.Series, f.Verdict, f.First, f.Last, f.Last-f.First, f.Bound)
}
