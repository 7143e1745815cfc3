package main

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb"
)

// scraper appends what the targets' /metrics say to the TSDB, as Prometheus
// would: a series per sample with the target's instance and job labels,
// histograms and summaries as their classic _bucket/_sum/_count series.
type scraper struct {
	db       *tsdb.DB
	targets  []target
	client   *http.Client
	scrapes  int
	failures int
}

func newScraper(db *tsdb.DB, targets []target) *scraper {
	return &scraper{db: db, targets: targets, client: &http.Client{Timeout: 900 * time.Millisecond}}
}

func (s *scraper) loop(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		for _, tg := range s.targets {
			s.scrapes++
			if err := s.scrape(ctx, tg, time.Now()); err != nil {
				s.failures++
				if ctx.Err() == nil && s.failures%30 == 1 {
					fmt.Fprintf(os.Stderr, "render-dashboard: scrape %s: %v\n", tg.url, err)
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (s *scraper) scrape(ctx context.Context, tg target, now time.Time) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, tg.url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return err
	}
	app := s.db.Appender(ctx)
	ts := now.UnixMilli()
	add := func(name string, m *dto.Metric, extra map[string]string, v float64) error {
		b := labels.NewScratchBuilder(len(m.GetLabel()) + 4)
		b.Add(labels.MetricName, name)
		b.Add("instance", tg.instance)
		b.Add("job", "orderd")
		for _, l := range m.GetLabel() {
			b.Add(l.GetName(), l.GetValue())
		}
		for k, v := range extra {
			b.Add(k, v)
		}
		b.Sort()
		_, err := app.Append(0, b.Labels(), ts, v)
		return err
	}
	for name, mf := range families {
		for _, m := range mf.GetMetric() {
			var err error
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				err = add(name, m, nil, m.GetCounter().GetValue())
			case dto.MetricType_GAUGE:
				err = add(name, m, nil, m.GetGauge().GetValue())
			case dto.MetricType_UNTYPED:
				err = add(name, m, nil, m.GetUntyped().GetValue())
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				sawInf := false
				for _, b := range h.GetBucket() {
					sawInf = sawInf || math.IsInf(b.GetUpperBound(), +1)
					if err = add(name+"_bucket", m, map[string]string{"le": formatFloat(b.GetUpperBound())}, float64(b.GetCumulativeCount())); err != nil {
						break
					}
				}
				if err == nil && !sawInf {
					err = add(name+"_bucket", m, map[string]string{"le": "+Inf"}, float64(h.GetSampleCount()))
				}
				if err == nil {
					err = add(name+"_sum", m, nil, h.GetSampleSum())
				}
				if err == nil {
					err = add(name+"_count", m, nil, float64(h.GetSampleCount()))
				}
			case dto.MetricType_SUMMARY:
				sm := m.GetSummary()
				for _, q := range sm.GetQuantile() {
					if err = add(name, m, map[string]string{"quantile": formatFloat(q.GetQuantile())}, q.GetValue()); err != nil {
						break
					}
				}
				if err == nil {
					err = add(name+"_sum", m, nil, sm.GetSampleSum())
				}
				if err == nil {
					err = add(name+"_count", m, nil, float64(sm.GetSampleCount()))
				}
			}
			if err != nil {
				_ = app.Rollback()
				return fmt.Errorf("append %s: %w", name, err)
			}
		}
	}
	return app.Commit()
}

// formatFloat writes a bucket bound as Prometheus does in le labels.
func formatFloat(f float64) string {
	if math.IsInf(f, +1) {
		return "+Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
