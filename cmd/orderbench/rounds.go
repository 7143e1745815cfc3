package main

import (
	"fmt"
	"slices"
)

// median is the median of f over rounds (the mean of the middle two when
// their number is even), 0 with no rounds.
func median(rounds []Round, f func(Round) float64) float64 {
	vs := make([]float64, len(rounds))
	for i, r := range rounds {
		vs[i] = f(r)
	}
	return medianOf(vs)
}

func medianOf(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// spread formats f over a result's rounds as "median (min–max)" with the
// given number of decimals, or the result's own figure (pooled) when it
// has no rounds (a phase that does not take turns).
func spread(r Result, f func(Round) float64, pooled float64, decimals int) string {
	if len(r.Rounds) == 0 {
		return fmt.Sprintf("%.*f", decimals, pooled)
	}
	vs := make([]float64, len(r.Rounds))
	for i, x := range r.Rounds {
		vs[i] = f(x)
	}
	return fmt.Sprintf("%.*f (%.*f–%.*f)", decimals, medianOf(vs), decimals, slices.Min(vs), decimals, slices.Max(vs))
}

func roundThroughput(r Round) float64 { return r.Throughput }
func roundP50(r Round) float64        { return r.P50ms }
func roundP95(r Round) float64        { return r.P95ms }
func roundP99(r Round) float64        { return r.P99ms }

// pairedRatios is, for every round index both a and b ran, f of a's round
// over f of b's: the two ran back to back in that round, so drift the
// machine or the cluster shows over a run falls on both (a paired
// comparison). Rounds where either is 0 are left out.
func pairedRatios(a, b Result, f func(Round) float64) []float64 {
	var out []float64
	for _, x := range a.Rounds {
		for _, y := range b.Rounds {
			if x.Index == y.Index && f(x) != 0 && f(y) != 0 {
				out = append(out, f(x)/f(y))
			}
		}
	}
	return out
}

// ratioSpread formats paired ratios as "median (min–max)"; with no rounds
// it falls back to the ratio of the results' own figures.
func ratioSpread(rs []float64, a, b float64) string {
	switch len(rs) {
	case 0:
		return ratio(a, b)
	case 1:
		return fmt.Sprintf("%.2f", rs[0])
	}
	return fmt.Sprintf("%.2f (%.2f–%.2f)", medianOf(rs), slices.Min(rs), slices.Max(rs))
}

// ratioRounds is ratioSpread in words: "median 0.83, rounds 0.48–1.27".
func ratioRounds(rs []float64, a, b float64) string {
	if len(rs) < 2 {
		return ratioSpread(rs, a, b)
	}
	return fmt.Sprintf("median %.2f, rounds %.2f–%.2f", medianOf(rs), slices.Min(rs), slices.Max(rs))
}

// minVerdictRounds is the fewest paired rounds a goal's verdict needs: if
// the true ratio sat exactly on the goal, each round would fall on either
// side of it with even odds, and five falling on the same side happens by
// chance 2 times in 32 (an exact sign test at 6%); with three it would be
// 1 time in 4.
const minVerdictRounds = 5

// goal is a bound on a ratio: at least (atLeast) or at most its value.
type goal struct {
	value   float64
	atLeast bool
}

func (g goal) holds(r float64) bool {
	if g.atLeast {
		return r >= g.value
	}
	return r <= g.value
}

// goalVerdict judges a goal on the rounds' paired ratios: met when every
// round meets it, not met when none does, "not separated" when the rounds
// fall on both sides of it or are fewer than minVerdictRounds.
func goalVerdict(g goal, ratios []float64) string {
	if len(ratios) < minVerdictRounds {
		return "not separated"
	}
	met := 0
	for _, r := range ratios {
		if g.holds(r) {
			met++
		}
	}
	switch met {
	case len(ratios):
		return "**met**"
	case 0:
		return "**not met**"
	}
	return "not separated"
}
