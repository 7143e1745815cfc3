package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/tsdb"

	"github.com/atlasmart/orderd/deploy/monitoring/dashboard"
)

// panelData is a panel with its queries' results over the window.
type panelData struct {
	dashboard.Panel
	series []series
	errs   []string
	times  []time.Time
}

// series is one line: its legend and a value per step (NaN where none).
type series struct {
	legend string
	values []float64
}

// evaluate runs every panel's queries over the window the TSDB holds, at
// about 300 steps, with the variables at "All" and $__rate_interval set.
func evaluate(ctx context.Context, db *tsdb.DB, d *dashboard.Dashboard, rateInterval time.Duration) ([]panelData, time.Time, time.Time, error) {
	mint, maxt := db.Head().MinTime(), db.Head().MaxTime()
	if blocks := db.Blocks(); len(blocks) > 0 {
		mint = min(mint, blocks[0].Meta().MinTime)
	}
	if mint >= maxt || mint == math.MaxInt64 {
		return nil, time.Time{}, time.Time{}, fmt.Errorf("no samples in the TSDB")
	}
	start, end := time.UnixMilli(mint).Add(rateInterval), time.UnixMilli(maxt)
	if !start.Before(end) {
		start = time.UnixMilli(mint)
	}
	step := max(end.Sub(start)/300, time.Second).Truncate(time.Second)
	vars := map[string]string{
		"__rate_interval": rateInterval.String(),
		"__interval":      step.String(),
		"__range":         end.Sub(start).Truncate(time.Second).String(),
		"instance":        ".*",
		"datasource":      "prometheus",
	}
	engine := promql.NewEngine(promql.EngineOpts{
		MaxSamples: 50_000_000, Timeout: time.Minute, LookbackDelta: 5 * time.Minute,
		Parser: parser.NewParser(parser.Options{}),
	})
	var times []time.Time
	for t := start; !t.After(end); t = t.Add(step) {
		times = append(times, t)
	}
	var out []panelData
	for _, p := range d.AllPanels() {
		pd := panelData{Panel: p, times: times}
		for _, tg := range p.Targets {
			expr, err := dashboard.Expand(tg.Expr, vars)
			if err == nil {
				err = query(ctx, engine, db, expr, tg.LegendFormat, start, end, step, &pd)
			}
			if err != nil {
				pd.errs = append(pd.errs, err.Error())
				fmt.Fprintf(os.Stderr, "render-dashboard: panel %q %s: %v\n", p.Title, tg.RefID, err)
			}
		}
		out = append(out, pd)
	}
	return out, start, end, nil
}

func query(ctx context.Context, engine *promql.Engine, db *tsdb.DB, expr, legendFormat string, start, end time.Time, step time.Duration, pd *panelData) error {
	q, err := engine.NewRangeQuery(ctx, db, nil, expr, start, end, step)
	if err != nil {
		return err
	}
	defer q.Close()
	res := q.Exec(ctx)
	if res.Err != nil {
		return res.Err
	}
	m, err := res.Matrix()
	if err != nil {
		return err
	}
	sort.Sort(m)
	for _, s := range m {
		vals := make([]float64, len(pd.times))
		for i := range vals {
			vals[i] = math.NaN()
		}
		for _, p := range s.Floats {
			i := int(time.UnixMilli(p.T).Sub(start) / step)
			if i >= 0 && i < len(vals) {
				vals[i] = p.F
			}
		}
		pd.series = append(pd.series, series{legend: legend(legendFormat, s.Metric), values: vals})
	}
	return nil
}

// legend fills {{label}} in a legendFormat as Grafana does; an empty format
// is the series' labels.
func legend(format string, l labels.Labels) string {
	if format == "" {
		return l.String()
	}
	out := format
	for {
		i := strings.Index(out, "{{")
		j := strings.Index(out, "}}")
		if i < 0 || j < i {
			return strings.TrimSpace(out)
		}
		name := strings.TrimSpace(out[i+2 : j])
		out = out[:i] + l.Get(name) + out[j+2:]
	}
}

// instancesIn returns the instance label values the TSDB holds (what
// $instance at "All" stands for).
func instancesIn(ctx context.Context, db *tsdb.DB) ([]string, error) {
	q, err := db.Querier(math.MinInt64, math.MaxInt64)
	if err != nil {
		return nil, err
	}
	defer q.Close()
	vals, _, err := q.LabelValues(ctx, "instance", nil)
	return vals, err
}
