package monitoring

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
	"go.yaml.in/yaml/v2"
)

// The rule tests are in promtool's `test rules` format (tests/*.yml), so
// `promtool test rules tests/*.yml` runs them too. Here they are run in
// process by ruleTestFile, a port of the alerting half of promtool's own
// runner (cmd/promtool/unittest.go, v0.316.0, which is package main and
// cannot be imported): the same series loader (promqltest.LazyLoader),
// the same rules.Manager evaluating the rules file every
// evaluation_interval, the same comparison of firing alerts' labels and
// annotations. Building promtool itself (a `tool` directive and `go tool
// promtool`) took 16m40s from a cold build cache on our 2-core machine,
// because it links every service-discovery plugin; this package needs
// only the rule manager and the engine (deploy/monitoring/README.md).
// promql_expr_test cases are not supported: these tests test alerts.

// ruleTestFileSpec is a promtool rule-test file.
type ruleTestFileSpec struct {
	RuleFiles          []string        `yaml:"rule_files"`
	EvaluationInterval model.Duration  `yaml:"evaluation_interval,omitempty"`
	GroupEvalOrder     []string        `yaml:"group_eval_order"`
	Tests              []ruleTestGroup `yaml:"tests"`
	FuzzyCompare       bool            `yaml:"fuzzy_compare,omitempty"`
}

type ruleTestGroup struct {
	Interval       model.Duration  `yaml:"interval"`
	InputSeries    []inputSeries   `yaml:"input_series"`
	AlertRuleTests []alertTestCase `yaml:"alert_rule_test,omitempty"`
	ExternalLabels labels.Labels   `yaml:"external_labels,omitempty"`
	ExternalURL    string          `yaml:"external_url,omitempty"`
	Name           string          `yaml:"name,omitempty"`
}

type inputSeries struct {
	Series string `yaml:"series"`
	Values string `yaml:"values"`
}

type alertTestCase struct {
	EvalTime  model.Duration `yaml:"eval_time"`
	Alertname string         `yaml:"alertname"`
	ExpAlerts []expAlert     `yaml:"exp_alerts"`
}

type expAlert struct {
	ExpLabels      map[string]string `yaml:"exp_labels"`
	ExpAnnotations map[string]string `yaml:"exp_annotations"`
}

func readRuleTestFile(t *testing.T, path string) ruleTestFileSpec {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f ruleTestFileSpec
	// Strict, as promtool: a misspelt key is an error, not an ignored case.
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if f.EvaluationInterval == 0 {
		f.EvaluationInterval = model.Duration(time.Minute)
	}
	if len(f.GroupEvalOrder) > 0 || f.FuzzyCompare {
		t.Fatalf("%s: group_eval_order and fuzzy_compare are not supported here", path)
	}
	for i, rf := range f.RuleFiles {
		if !filepath.IsAbs(rf) {
			f.RuleFiles[i] = filepath.Join(filepath.Dir(path), rf)
		}
	}
	return f
}

func ruleTestFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("tests/*.yml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no rule tests in tests/*.yml (%v)", err)
	}
	return files
}

// TestAlertRules runs every rule test file.
func TestAlertRules(t *testing.T) {
	for _, path := range ruleTestFiles(t) {
		f := readRuleTestFile(t, path)
		for i, g := range f.Tests {
			name := g.Name
			if name == "" {
				name = fmt.Sprintf("unnamed#%d", i)
			}
			t.Run(filepath.Base(path)+"/"+name, func(t *testing.T) {
				if g.Interval == 0 {
					g.Interval = f.EvaluationInterval
				}
				for _, err := range g.run(time.Duration(f.EvaluationInterval), f.RuleFiles) {
					t.Error(err)
				}
			})
		}
	}
}

// TestEveryAlertIsTested: each alert has a case where it fires and one
// where it stays quiet.
func TestEveryAlertIsTested(t *testing.T) {
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, path := range ruleTestFiles(t) {
		f := readRuleTestFile(t, path)
		if !slices.Equal(f.RuleFiles, []string{rulesFile}) {
			t.Errorf("%s tests %v, want [%s]", path, f.RuleFiles, rulesFile)
		}
		for _, g := range f.Tests {
			for _, c := range g.AlertRuleTests {
				if len(c.ExpAlerts) > 0 {
					fires[c.Alertname] = true
				} else {
					quiet[c.Alertname] = true
				}
			}
		}
	}
	names := map[string]bool{}
	for _, r := range loadRules(t) {
		names[r.Alert] = true
		if !fires[r.Alert] {
			t.Errorf("%s: no rule test where it fires (tests/*.yml)", r.Alert)
		}
		if !quiet[r.Alert] {
			t.Errorf("%s: no rule test where it stays quiet (tests/*.yml)", r.Alert)
		}
	}
	for n := range fires {
		if !names[n] {
			t.Errorf("tests/*.yml test an alert %s the rules do not have", n)
		}
	}
	for n := range quiet {
		if !names[n] {
			t.Errorf("tests/*.yml test an alert %s the rules do not have", n)
		}
	}
}

// run evaluates the rule files over the group's series from time 0 to its
// last eval_time, every evalInterval, and compares the firing alerts at
// each eval_time with the expected ones (promtool's testGroup.test).
func (g ruleTestGroup) run(evalInterval time.Duration, ruleFiles []string) (errs []error) {
	var load strings.Builder
	fmt.Fprintf(&load, "load %s\n", shortDuration(g.Interval))
	for _, s := range g.InputSeries {
		fmt.Fprintf(&load, "  %s %s\n", s.Series, s.Values)
	}
	suite, err := promqltest.NewLazyLoader(load.String(), promqltest.LazyLoaderOpts{
		EnableAtModifier: true, EnableNegativeOffset: true, Parser: promqlParser,
	})
	if err != nil {
		return []error{err}
	}
	defer func() {
		if err := suite.Close(); err != nil {
			errs = append(errs, err)
		}
	}()
	suite.SubqueryInterval = evalInterval

	m := rules.NewManager(&rules.ManagerOptions{
		QueryFunc:    rules.EngineQueryFunc(suite.QueryEngine(), suite.Storage()),
		AppendableV2: suite.Storage(),
		Context:      context.Background(),
		NotifyFunc:   func(context.Context, string, ...*rules.Alert) {},
		Logger:       promslog.NewNopLogger(),
		Parser:       promqlParser,
	})
	groupsMap, lerrs := m.LoadGroups(time.Duration(g.Interval), g.ExternalLabels, g.ExternalURL, nil, false, ruleFiles...)
	if lerrs != nil {
		return lerrs
	}
	var groups []*rules.Group
	for _, gr := range groupsMap {
		groups = append(groups, gr)
	}
	for _, gr := range groups {
		for _, r := range gr.Rules() {
			if ar, ok := r.(*rules.AlertingRule); ok {
				ar.SetRestored(true) // as promtool: no restore from ALERTS_FOR_STATE
			}
		}
	}

	byTime := map[model.Duration][]alertTestCase{}
	var evalTimes []model.Duration
	var maxt model.Duration
	for _, c := range g.AlertRuleTests {
		if c.Alertname == "" {
			return []error{fmt.Errorf("an alert_rule_test at eval_time %v has no alertname", c.EvalTime)}
		}
		if _, ok := byTime[c.EvalTime]; !ok {
			evalTimes = append(evalTimes, c.EvalTime)
		}
		byTime[c.EvalTime] = append(byTime[c.EvalTime], c)
		maxt = max(maxt, c.EvalTime)
	}
	slices.Sort(evalTimes)

	mint := time.Unix(0, 0).UTC()
	curr := 0
	for ts := mint; !ts.After(mint.Add(time.Duration(maxt))); ts = ts.Add(evalInterval) {
		var evalErrs []error
		suite.WithSamplesTill(ts, func(err error) {
			if err != nil {
				evalErrs = append(evalErrs, err)
				return
			}
			for _, gr := range groups {
				gr.Eval(suite.Context(), ts)
				for _, r := range gr.Rules() {
					if r.LastError() != nil {
						evalErrs = append(evalErrs, fmt.Errorf("rule %s at %s: %w", r.Name(), ts.Sub(mint), r.LastError()))
					}
				}
			}
		})
		if len(evalErrs) > 0 {
			return append(errs, evalErrs...)
		}
		// An eval_time in [ts, ts+evalInterval) is checked against the
		// evaluation at ts.
		for curr < len(evalTimes) && ts.Sub(mint) <= time.Duration(evalTimes[curr]) &&
			time.Duration(evalTimes[curr]) < ts.Add(evalInterval).Sub(mint) {
			et := evalTimes[curr]
			for _, c := range byTime[et] {
				var got []string
				for _, gr := range groups {
					for _, r := range gr.Rules() {
						ar, ok := r.(*rules.AlertingRule)
						if !ok || ar.Name() != c.Alertname {
							continue
						}
						for _, a := range ar.ActiveAlerts() {
							if a.State == rules.StateFiring {
								got = append(got, alertString(a.Labels, a.Annotations))
							}
						}
					}
				}
				var exp []string
				for _, a := range c.ExpAlerts {
					lbls := map[string]string{labels.AlertName: c.Alertname}
					for k, v := range a.ExpLabels {
						lbls[k] = v
					}
					exp = append(exp, alertString(labels.FromMap(lbls), labels.FromMap(a.ExpAnnotations)))
				}
				sort.Strings(got)
				sort.Strings(exp)
				if !slices.Equal(got, exp) {
					errs = append(errs, fmt.Errorf("alertname %s, eval_time %s:\n  exp: %s\n  got: %s",
						c.Alertname, et, strings.Join(exp, "\n       "), strings.Join(got, "\n       ")))
				}
			}
			curr++
		}
	}
	return errs
}

func alertString(lbls, annotations labels.Labels) string {
	return "labels " + lbls.String() + " annotations " + annotations.String()
}

// shortDuration writes 1m rather than 1m0s, as the series loader wants.
func shortDuration(d model.Duration) string {
	s := d.String()
	s = strings.TrimSuffix(s, "0s")
	s = strings.TrimSuffix(s, "0m")
	return s
}
