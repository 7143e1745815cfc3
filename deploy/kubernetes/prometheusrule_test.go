package kubernetes

import (
	"bytes"
	"flag"
	"os"
	"reflect"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite base/prometheusrule.yaml from "+rulesFile)

const (
	rulesFile          = "../monitoring/orderd.rules.yml"
	prometheusRuleFile = "base/prometheusrule.yaml"
)

// prometheusRule is the PrometheusRule holding the rules file: its text
// indented under spec, so the rules' comments carry over.
func prometheusRule(rules []byte) []byte {
	var b bytes.Buffer
	b.WriteString(`# Generated from ` + rulesFile + ` by
# ` + "`cd deploy/kubernetes && go test -run TestPrometheusRule -update`" + `; do not edit.
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: orderd
  labels:
    app.kubernetes.io/name: orderd
spec:
`)
	for _, line := range strings.SplitAfter(string(rules), "\n") {
		if strings.TrimSpace(line) == "" {
			b.WriteString(strings.TrimLeft(line, " \t"))
			continue
		}
		b.WriteString("  " + line)
	}
	return b.Bytes()
}

// base/prometheusrule.yaml is the rules file, and every app render's
// PrometheusRule carries exactly its groups.
func TestPrometheusRuleIsTheRulesFile(t *testing.T) {
	rules, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	want := prometheusRule(rules)
	if *update {
		if err := os.WriteFile(prometheusRuleFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(prometheusRuleFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from %s: run `cd deploy/kubernetes && go test -run TestPrometheusRule -update`", prometheusRuleFile, rulesFile)
	}

	// The rules file decodes strictly as a PrometheusRule's spec.
	rulesJSON, err := yaml.YAMLToJSON(rules)
	if err != nil {
		t.Fatal(err)
	}
	var spec monitoringv1.PrometheusRuleSpec
	if err := decodeStrict(rulesJSON, &spec); err != nil {
		t.Fatalf("%s as a PrometheusRule spec: %v", rulesFile, err)
	}
	if len(spec.Groups) == 0 {
		t.Fatalf("%s has no rule groups", rulesFile)
	}
	for app := range appKustomizations {
		pr := one[monitoringv1.PrometheusRule](t, render(t, app))
		if !reflect.DeepEqual(pr.Spec.Groups, spec.Groups) {
			t.Errorf("%s: the PrometheusRule's groups differ from %s", app, rulesFile)
		}
	}
}
