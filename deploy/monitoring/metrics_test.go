package monitoring

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/atlasmart/orderd/deploy/monitoring/dashboard"
)

// catalogFile lists every series name orderd exports. The main module's
// internal/adapters/metrics test (TestMetricCatalog) builds orderd's registry and
// keeps this file equal to it, so it is the truth this module checks
// against without importing orderd.
const catalogFile = "testdata/metrics.txt"

func loadCatalog(t *testing.T) map[string]bool {
	t.Helper()
	f, err := os.Open(catalogFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	names := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			names[l] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatalf("%s is empty", catalogFile)
	}
	return names
}

// metricNames returns the metric name of every selector in expr. A selector
// without a name (none orderd's rules use) is an error: it cannot be
// checked.
func metricNames(expr string) ([]string, error) {
	e, err := promqlParser.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	var bad error
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		if name == "" {
			for _, m := range vs.LabelMatchers {
				if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
					name = m.Value
				}
			}
		}
		if name == "" {
			bad = fmt.Errorf("selector %s has no metric name", vs)
			return nil
		}
		names = append(names, name)
		return nil
	})
	return names, bad
}

// unknownMetrics returns the names expr selects that orderd does not export.
func unknownMetrics(expr string, catalog map[string]bool) ([]string, error) {
	names, err := metricNames(expr)
	if err != nil {
		return nil, err
	}
	var unknown []string
	for _, n := range names {
		if !catalog[n] && !slices.Contains(unknown, n) {
			unknown = append(unknown, n)
		}
	}
	return unknown, nil
}

func TestRuleMetricsExist(t *testing.T) {
	catalog := loadCatalog(t)
	for _, r := range loadRules(t) {
		unknown, err := unknownMetrics(r.Expr, catalog)
		if err != nil {
			t.Errorf("%s: %v", r.Alert, err)
		}
		for _, n := range unknown {
			t.Errorf("%s: orderd exports no %s (%s)", r.Alert, n, catalogFile)
		}
	}
}

// TestMisspelledMetricIsCaught: the check fails on a name one letter off,
// and on a histogram's base name (only its _bucket, _sum and _count exist).
func TestMisspelledMetricIsCaught(t *testing.T) {
	catalog := loadCatalog(t)
	for expr, want := range map[string]string{
		`sum(increase(orderd_reconciler_dead_letterd_total[10m])) > 0`:                         "orderd_reconciler_dead_letterd_total",
		`histogram_quantile(0.99, rate(orderd_grpc_request_duration_seconds[5m]))`:             "orderd_grpc_request_duration_seconds",
		`max({__name__="orderd_outbox_parkd"}) > 0`:                                            "orderd_outbox_parkd",
		`sum(rate(orderd_grpc_requests_total[5m])) / sum(rate(orderd_grpc_request_total[5m]))`: "orderd_grpc_request_total",
	} {
		unknown, err := unknownMetrics(expr, catalog)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(unknown, []string{want}) {
			t.Errorf("unknownMetrics(%q) = %v, want [%s]", expr, unknown, want)
		}
	}
}

// dashboardVars are the values the checks give the template variables:
// Grafana's built-in intervals and the dashboard's own variables at "All".
var dashboardVars = map[string]string{
	"__rate_interval": "1m",
	"__interval":      "15s",
	"__range":         "1h",
	"instance":        ".*",
	"datasource":      "prometheus",
}

func loadDashboard(t *testing.T) *dashboard.Dashboard {
	t.Helper()
	d, err := dashboard.Load(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestDashboardMetricsExist parses every panel query and variable query
// with the PromQL parser and checks the metric names it selects.
func TestDashboardMetricsExist(t *testing.T) {
	catalog := loadCatalog(t)
	d := loadDashboard(t)
	n := 0
	for _, p := range d.AllPanels() {
		for _, tg := range p.Targets {
			n++
			expr, err := dashboard.Expand(tg.Expr, dashboardVars)
			if err != nil {
				t.Errorf("panel %q %s: %v", p.Title, tg.RefID, err)
				continue
			}
			unknown, err := unknownMetrics(expr, catalog)
			if err != nil {
				t.Errorf("panel %q %s: %v", p.Title, tg.RefID, err)
			}
			for _, m := range unknown {
				t.Errorf("panel %q %s: orderd exports no %s", p.Title, tg.RefID, m)
			}
		}
	}
	if n == 0 {
		t.Fatal("no panel queries")
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		sel, _, ok := dashboard.LabelValuesSelector(v.QueryString())
		if !ok {
			t.Errorf("variable %s: query %q is not label_values(selector, label)", v.Name, v.QueryString())
			continue
		}
		unknown, err := unknownMetrics(sel, catalog)
		if err != nil {
			t.Errorf("variable %s: %v", v.Name, err)
		}
		for _, m := range unknown {
			t.Errorf("variable %s: orderd exports no %s", v.Name, m)
		}
	}
}
