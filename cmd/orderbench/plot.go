package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// latencyPlot draws p50 (solid) and p99 (dashed) latency against
// concurrency for each driver of the compare phase, as a small SVG.
func latencyPlot(runs []Run) string {
	cmp := all(runs, func(r Result) bool { return r.Phase == "compare" })
	var levels []int
	maxMs := 0.0
	for _, r := range cmp {
		if !slices.Contains(levels, r.Concurrency) {
			levels = append(levels, r.Concurrency)
		}
		maxMs = math.Max(maxMs, r.P99ms)
	}
	slices.Sort(levels)
	const w, h, left, bottom, top, right = 640.0, 400.0, 60.0, 50.0, 30.0, 130.0
	pw, ph := w-left-right, h-top-bottom
	x := func(c int) float64 {
		i := slices.Index(levels, c)
		if len(levels) == 1 {
			return left + pw/2
		}
		return left + pw*float64(i)/float64(len(levels)-1)
	}
	yMax := math.Ceil(maxMs/10) * 10
	if yMax == 0 {
		yMax = 1
	}
	y := func(v float64) float64 { return top + ph*(1-v/yMax) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="18" font-size="14">CreateOrder latency against concurrency (p50 solid, p99 dashed)</text>`+"\n", left)
	for i := 0; i <= 5; i++ {
		v := yMax * float64(i) / 5
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.1f" y="%.1f" text-anchor="end">%.0f</text>`+"\n",
			left, left+pw, y(v), y(v), left-6, y(v)+4, v)
	}
	for _, c := range levels {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%d</text>`+"\n", x(c), top+ph+18, c)
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">concurrent streams</text>`+"\n", left+pw/2, h-10)
	fmt.Fprintf(&b, `<text x="14" y="%.1f" transform="rotate(-90 14 %.1f)" text-anchor="middle">latency (ms)</text>`+"\n", top+ph/2, top+ph/2)
	colors := map[string]string{"orderd": "#d62728", "two-lwt": "#1f77b4", "one-lwt": "#2ca02c", "floor": "#ff7f0e", "naive": "#7f7f7f"}
	row := 0
	for _, d := range []string{"orderd", "two-lwt", "one-lwt", "floor", "naive"} {
		for _, dash := range []bool{false, true} {
			var pts []string
			for _, c := range levels {
				if r, ok := find(cmp, d, c); ok {
					v := r.P50ms
					if dash {
						v = r.P99ms
					}
					pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(c), y(v)))
				}
			}
			style := ""
			if dash {
				style = ` stroke-dasharray="5,4"`
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", colors[d], style, strings.Join(pts, " "))
		}
		ly := top + 10 + float64(row)*20
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/><text x="%.1f" y="%.1f">%s</text>`+"\n",
			left+pw+12, left+pw+36, ly, ly, colors[d], left+pw+42, ly+4, d)
		row++
	}
	b.WriteString("</svg>\n")
	return b.String()
}
