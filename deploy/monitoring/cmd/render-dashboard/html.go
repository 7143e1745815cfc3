package main

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/atlasmart/orderd/deploy/monitoring/dashboard"
)

// Grafana's dark theme and classic palette.
const (
	rowPx      = 30 // height of one grid row
	gap        = 8
	headerPx   = 64
	background = "#111217"
	panelBg    = "#181b1f"
	border     = "#2c3235"
	text       = "#ccccdc"
	dimText    = "#8e8e8e"
	gridLine   = "#2c3235"
)

var palette = []string{
	"#73BF69", "#F2CC0C", "#8AB8FF", "#FF780A", "#F2495C", "#5794F2", "#B877D9", "#FADE2A",
	"#37872D", "#C4162A", "#1F60C4", "#8F3BB8", "#FFB357", "#96D98D", "#FF7383", "#CA95E5",
}

type page struct {
	html   string
	height int
}

// renderHTML lays the panels out by their gridPos on a page width px wide.
func renderHTML(d *dashboard.Dashboard, panels []panelData, start, end time.Time, width int, instances []string) page {
	colPx := float64(width-gap) / 24
	bottom := 0
	for _, p := range panels {
		bottom = max(bottom, p.GridPos.Y+p.GridPos.H)
	}
	height := headerPx + bottom*rowPx + gap*2
	var b strings.Builder
	fmt.Fprintf(&b, `<!doctype html><html><head><meta charset="utf-8"><style>
body{margin:0;background:%s;color:%s;font-family:Inter,"Helvetica Neue",Arial,sans-serif;}
.hdr{height:%dpx;padding:10px 16px;box-sizing:border-box;border-bottom:1px solid %s}
.hdr h1{font-size:18px;margin:0 0 6px 0;font-weight:500}
.hdr span{font-size:12px;color:%s;margin-right:18px}
.hdr b{color:%s;font-weight:500;background:#22252b;border:1px solid %s;padding:1px 6px;border-radius:2px}
.panel{position:absolute;background:%s;border:1px solid %s;border-radius:2px;box-sizing:border-box;overflow:hidden}
.panel h2{font-size:13px;font-weight:500;margin:6px 8px 0 8px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.row{position:absolute;font-size:15px;font-weight:500;box-sizing:border-box;padding:6px 4px;border-bottom:1px solid %s}
.legend{font-size:11px;line-height:15px;margin:0 8px;color:%s}
.legend i{display:inline-block;width:12px;height:3px;margin:0 4px 3px 0;vertical-align:middle;border-radius:1px}
.legend span{margin-right:12px;white-space:nowrap}
svg text{font-size:10px;fill:%s}
</style></head><body>`, background, text, headerPx, border, dimText, text, border, panelBg, border, border, text, dimText)
	fmt.Fprintf(&b, `<div class="hdr"><h1>%s</h1><span>datasource <b>prometheus</b></span><span>instance <b>All (%s)</b></span><span>%s to %s UTC (%s)</span><span>rendered by deploy/monitoring/cmd/render-dashboard with the PromQL engine; not Grafana</span></div>`,
		html.EscapeString(d.Title), html.EscapeString(strings.Join(instances, ", ")),
		start.UTC().Format("2006-01-02 15:04:05"), end.UTC().Format("15:04:05"), end.Sub(start).Truncate(time.Second))

	for _, p := range panels {
		g := p.GridPos
		x := float64(gap) + float64(g.X)*colPx
		y := headerPx + gap + g.Y*rowPx
		w := float64(g.W)*colPx - gap
		h := g.H*rowPx - gap
		if p.Type == "row" {
			fmt.Fprintf(&b, `<div class="row" style="left:%.0fpx;top:%dpx;width:%.0fpx;height:%dpx">%s</div>`, x, y, w, h+gap, html.EscapeString(p.Title))
			continue
		}
		fmt.Fprintf(&b, `<div class="panel" style="left:%.0fpx;top:%dpx;width:%.0fpx;height:%dpx"><h2>%s</h2>`, x, y, w, h, html.EscapeString(p.Title))
		b.WriteString(chart(p, int(w)-2, h-2))
		b.WriteString(`</div>`)
	}
	b.WriteString(`</body></html>`)
	return page{html: b.String(), height: height}
}

// chart draws a panel's series as an SVG line (or stacked area) chart with
// its axes and, below it, its legend.
func chart(p panelData, w, h int) string {
	const titlePx, legendLine = 26, 15
	// The legend takes up to three lines; the rest is said as "+N more".
	legendLines := min(3, max(1, estimateLegendLines(p.series, w)))
	plotH := h - titlePx - legendLines*legendLine - 8
	left, right, top, bottomAx := 60, 10, 10, 18
	pw, ph := w-left-right, plotH-top-bottomAx
	var b strings.Builder
	fmt.Fprintf(&b, `<svg width="%d" height="%d" style="display:block">`, w, plotH)
	if len(p.errs) > 0 {
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" style="fill:#F2495C;font-size:12px">%s</text></svg>`, w/2, plotH/2, html.EscapeString(p.errs[0]))
		return b.String()
	}
	stacked := p.FieldConfig.Defaults.Custom.Stacking.Mode == "normal"
	drawn := p.series
	if stacked {
		drawn = stack(p.series)
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range drawn {
		for _, v := range s.values {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 1) {
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" style="fill:%s;font-size:13px">No data</text></svg>`, w/2, plotH/2, dimText)
		return b.String() + legendHTML(p.series, legendLines, w)
	}
	if p.FieldConfig.Defaults.Min != nil {
		lo = math.Min(lo, *p.FieldConfig.Defaults.Min)
	}
	threshold := math.NaN()
	if th := p.FieldConfig.Defaults.Thres; th != nil && len(th.Steps) > 1 && th.Steps[1].Value != nil {
		threshold = *th.Steps[1].Value
		if threshold <= hi*2 || hi == 0 && threshold <= 1 {
			hi = math.Max(hi, threshold)
		}
	}
	if hi <= lo {
		hi = lo + 1
	}
	// Round ticks in the unit the labels use (minutes, MiB, ...).
	f := unitScale(hi, p.FieldConfig.Defaults.Unit)
	ticks := niceTicks(lo/f, hi/f, max(2, ph/40))
	for i := range ticks {
		ticks[i] *= f
	}
	lo, hi = ticks[0], ticks[len(ticks)-1]
	sy := func(v float64) float64 { return float64(top) + float64(ph)*(1-(v-lo)/(hi-lo)) }
	n := len(p.times)
	sx := func(i int) float64 { return float64(left) + float64(pw)*float64(i)/float64(max(1, n-1)) }

	unit := p.FieldConfig.Defaults.Unit
	for _, t := range ticks {
		y := sy(t)
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="1"/>`, left, left+pw, y, y, gridLine)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`, left-4, y+3, html.EscapeString(formatValue(t, unit, hi-lo)))
	}
	xticks := max(2, min(4, pw/110)) // a time label is about 50 px wide
	for k := 0; k <= xticks; k++ {
		i := k * (n - 1) / xticks
		anchor := "middle"
		if k == 0 {
			anchor = "start"
		} else if k == xticks {
			anchor = "end"
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="%s">%s</text>`, sx(i), top+ph+13, anchor, p.times[i].UTC().Format("15:04:05"))
	}
	fill := p.FieldConfig.Defaults.Custom.FillOpacity
	for k := len(drawn) - 1; k >= 0; k-- {
		s := drawn[k]
		color := palette[k%len(palette)]
		var line strings.Builder
		var segs []string
		var base []float64
		if stacked && k > 0 {
			base = drawn[k-1].values
		}
		flush := func() {
			if line.Len() > 0 {
				segs = append(segs, line.String())
				line.Reset()
			}
		}
		for i, v := range s.values {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				flush()
				continue
			}
			cmd := "L"
			if line.Len() == 0 {
				cmd = "M"
			}
			fmt.Fprintf(&line, "%s%.1f,%.1f ", cmd, sx(i), sy(v))
		}
		flush()
		if fill > 0 {
			// The area between this line and the one below (or zero).
			var area strings.Builder
			first := true
			for i, v := range s.values {
				if math.IsNaN(v) {
					continue
				}
				cmd := "L"
				if first {
					cmd = "M"
					first = false
				}
				fmt.Fprintf(&area, "%s%.1f,%.1f ", cmd, sx(i), sy(v))
			}
			for i := n - 1; i >= 0; i-- {
				if math.IsNaN(s.values[i]) {
					continue
				}
				bv := math.Max(lo, 0)
				if base != nil && !math.IsNaN(base[i]) {
					bv = base[i]
				}
				fmt.Fprintf(&area, "L%.1f,%.1f ", sx(i), sy(bv))
			}
			if !first {
				fmt.Fprintf(&b, `<path d="%sZ" fill="%s" fill-opacity="%.2f" stroke="none"/>`, area.String(), color, float64(fill)/100)
			}
		}
		for _, seg := range segs {
			fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="%s" stroke-width="1.5"/>`, seg, color)
		}
	}
	if !math.IsNaN(threshold) && threshold >= lo && threshold <= hi {
		y := sy(threshold)
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#F2495C" stroke-width="1" stroke-dasharray="6,4"/>`, left, left+pw, y, y)
	}
	b.WriteString(`</svg>`)
	return b.String() + legendHTML(p.series, legendLines, w)
}

// stack returns the running sums of the series (missing values count as 0
// in the sums; a step where a series has no value stays missing for it).
func stack(in []series) []series {
	out := make([]series, len(in))
	var sum []float64
	for k, s := range in {
		vals := make([]float64, len(s.values))
		if sum == nil {
			sum = make([]float64, len(s.values))
		}
		for i, v := range s.values {
			if math.IsNaN(v) {
				vals[i] = math.NaN()
				continue
			}
			sum[i] += v
			vals[i] = sum[i]
		}
		out[k] = series{legend: s.legend, values: vals}
	}
	return out
}

func estimateLegendLines(ss []series, w int) int {
	lines, used := 1, 0
	for _, s := range ss {
		item := 28 + 6*len(s.legend)
		if used+item > w-16 && used > 0 {
			lines++
			used = 0
		}
		used += item
	}
	return lines
}

func legendHTML(ss []series, lines, w int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<div class="legend" style="max-height:%dpx;overflow:hidden">`, lines*15)
	shown, used, line := 0, 0, 1
	for k, s := range ss {
		item := 28 + 6*len(s.legend)
		if used+item > w-16 && used > 0 {
			line++
			used = 0
		}
		if line > lines || (line == lines && k < len(ss)-1 && used+item+70 > w-16) && shown < k {
			break
		}
		used += item
		shown++
		fmt.Fprintf(&b, `<span><i style="background:%s"></i>%s</span>`, palette[k%len(palette)], html.EscapeString(s.legend))
	}
	if shown < len(ss) {
		fmt.Fprintf(&b, `<span>+%d more</span>`, len(ss)-shown)
	}
	b.WriteString(`</div>`)
	return b.String()
}

// niceTicks returns about n round tick values covering [lo, hi].
func niceTicks(lo, hi float64, n int) []float64 {
	span := hi - lo
	raw := span / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	first := math.Floor(lo/step) * step
	var ticks []float64
	for v := first; v < hi+step*0.999; v += step {
		ticks = append(ticks, v)
	}
	if len(ticks) < 2 {
		ticks = append(ticks, first+step)
	}
	return ticks
}

// unitScale is the factor of the unit formatValue writes values near max
// in: 60 for seconds shown as minutes, 1024 for KiB, ...
func unitScale(maxV float64, unit string) float64 {
	switch unit {
	case "s":
		switch {
		case maxV >= 3600:
			return 3600
		case maxV >= 60:
			return 60
		}
	case "bytes":
		f := 1.0
		for maxV/f >= 1024 {
			f *= 1024
		}
		return f
	}
	return 1
}

// formatValue writes v in the panel's unit, as Grafana's value formats do.
func formatValue(v float64, unit string, span float64) string {
	switch unit {
	case "s":
		a := math.Abs(v)
		switch {
		case v == 0:
			return "0 s"
		case a < 1e-3:
			return trim(v*1e6, span*1e6) + " µs"
		case a < 1:
			return trim(v*1e3, span*1e3) + " ms"
		case a < 60:
			return trim(v, span) + " s"
		case a < 3600:
			return trim(v/60, span/60) + " min"
		default:
			return trim(v/3600, span/3600) + " h"
		}
	case "bytes":
		for _, u := range []string{"B", "KiB", "MiB", "GiB", "TiB"} {
			if math.Abs(v) < 1024 {
				return trim(v, span) + " " + u
			}
			v, span = v/1024, span/1024
		}
		return trim(v, span) + " PiB"
	case "percentunit":
		return trim(v*100, span*100) + "%"
	case "reqps":
		return short(v, span) + " req/s"
	case "ops":
		return short(v, span) + " ops/s"
	}
	return short(v, span)
}

func short(v, span float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e9:
		return trim(v/1e9, span/1e9) + " Bil"
	case a >= 1e6:
		return trim(v/1e6, span/1e6) + " Mil"
	case a >= 1e3:
		return trim(v/1e3, span/1e3) + " K"
	}
	return trim(v, span)
}

// trim writes v with up to three decimals and no trailing zeros (2.5, 0.25,
// 10); span is the axis span, which decides how small a value still counts.
func trim(v, span float64) string {
	if span > 0 && math.Abs(v) < span*1e-9 {
		v = 0
	}
	out := strconv.FormatFloat(v, 'f', 3, 64)
	out = strings.TrimRight(out, "0")
	return strings.TrimSuffix(out, ".")
}
