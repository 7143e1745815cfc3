package monitoring

import (
	"bufio"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

const (
	rulesFile      = "orderd.rules.yml"
	runbooksFile   = "../../docs/runbooks.md"
	operationsFile = "../../docs/operations.md"
	// runbookBase is what every runbook_url starts with: the runbooks as
	// the repository shows them, so the link works from a pager.
	runbookBase = "https://github.com/atlasmart/orderd/blob/main/docs/runbooks.md#"
)

// promqlParser parses as Prometheus does with no feature flags.
var promqlParser = parser.NewParser(parser.Options{})

// loadRules parses the rules file with Prometheus's own rule parser (the
// one `prometheus` and `promtool check rules` use): unknown fields, bad
// PromQL, bad templates and duplicate names are errors.
func loadRules(t *testing.T) []rulefmt.Rule {
	t.Helper()
	groups, errs := rulefmt.ParseFile(rulesFile, false, model.UTF8Validation, promqlParser, slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Error(err)
	}
	if len(errs) > 0 {
		t.FailNow()
	}
	var rules []rulefmt.Rule
	for _, g := range groups.Groups {
		rules = append(rules, g.Rules...)
	}
	return rules
}

func TestRulesParse(t *testing.T) {
	rules := loadRules(t)
	if len(rules) == 0 {
		t.Fatal("no rules")
	}
	for _, r := range rules {
		if r.Alert == "" {
			t.Errorf("recording rule %q: this file holds alerts only", r.Record)
		}
	}
}

// TestRulesAreAnnotated: every alert says how bad it is, what it means and
// where its runbook is.
func TestRulesAreAnnotated(t *testing.T) {
	for _, r := range loadRules(t) {
		if s := r.Labels["severity"]; !slices.Contains([]string{"page", "ticket", "warn"}, s) {
			t.Errorf("%s: severity %q, want page, ticket or warn", r.Alert, s)
		}
		for _, a := range []string{"summary", "description", "runbook_url"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("%s: no %s annotation", r.Alert, a)
			}
		}
		if want := runbookBase + strings.ToLower(r.Alert); r.Annotations["runbook_url"] != want {
			t.Errorf("%s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
		}
	}
}

// TestEveryAlertHasARunbook: each runbook_url's anchor is a heading of
// docs/runbooks.md (as GitHub makes anchors), and each alert's section
// says what to check and what to do.
func TestEveryAlertHasARunbook(t *testing.T) {
	sections := markdownSections(t, runbooksFile)
	for _, r := range loadRules(t) {
		anchor, ok := strings.CutPrefix(r.Annotations["runbook_url"], runbookBase)
		if !ok {
			t.Errorf("%s: runbook_url %q does not point into docs/runbooks.md", r.Alert, r.Annotations["runbook_url"])
			continue
		}
		body, ok := sections[anchor]
		if !ok {
			t.Errorf("%s: docs/runbooks.md has no heading with anchor #%s", r.Alert, anchor)
			continue
		}
		for _, part := range []string{"**Means**", "**Check**", "**Do**", "**Escalate**"} {
			if !strings.Contains(body, part) {
				t.Errorf("docs/runbooks.md#%s lacks %s", anchor, part)
			}
		}
	}
}

// markdownSections maps each heading's GitHub anchor to the text up to the
// next heading of the same or a higher level.
func markdownSections(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sections := map[string]string{}
	seen := map[string]int{}
	var current string
	inFence := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
		}
		if !inFence && strings.HasPrefix(line, "#") {
			title := strings.TrimSpace(strings.TrimLeft(line, "#"))
			a := githubAnchor(title)
			if n := seen[a]; n > 0 {
				seen[a]++
				a = a + "-" + string(rune('0'+n))
			} else {
				seen[a] = 1
			}
			current = a
			sections[current] = ""
			continue
		}
		if current != "" {
			sections[current] += line + "\n"
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return sections
}

// githubAnchor is the anchor GitHub gives a heading: lower case, spaces to
// hyphens, punctuation other than - and _ dropped.
func githubAnchor(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestGithubAnchor(t *testing.T) {
	for title, want := range map[string]string{
		"ReconcilerBacklogOld":            "reconcilerbacklogold",
		"Before you start: access":        "before-you-start-access",
		"`orderd requeue` and `orderctl`": "orderd-requeue-and-orderctl",
	} {
		if got := githubAnchor(title); got != want {
			t.Errorf("githubAnchor(%q) = %q, want %q", title, got, want)
		}
	}
}

// alertRow is one row of the Alerts table in docs/operations.md.
type alertRow struct {
	name, forText, severity string
}

// TestOperationsTableMatchesRules: the summary table in docs/operations.md
// lists the same alerts, with the same `for` and severity, as the file.
func TestOperationsTableMatchesRules(t *testing.T) {
	b, err := os.ReadFile(operationsFile)
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "\n## Alerts\n")
	if !ok {
		t.Fatal("docs/operations.md has no ## Alerts section")
	}
	section, _, _ := strings.Cut(after, "\n## ")
	row := regexp.MustCompile(`(?m)^\| ([A-Za-z]+) \| .* \| ([^|]*) \| ([a-z]+) \| [^|]* \|$`)
	table := map[string]alertRow{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		if m[1] == "alert" {
			continue
		}
		if _, dup := table[m[1]]; dup {
			t.Errorf("docs/operations.md: %s listed twice", m[1])
		}
		table[m[1]] = alertRow{name: m[1], forText: strings.TrimSpace(m[2]), severity: m[3]}
	}
	if strings.Contains(section, "```yaml") {
		t.Error("docs/operations.md's Alerts section still has a YAML copy of the rules: link to deploy/monitoring/orderd.rules.yml instead")
	}
	if !strings.Contains(section, "deploy/monitoring/orderd.rules.yml") {
		t.Error("docs/operations.md's Alerts section does not link to deploy/monitoring/orderd.rules.yml")
	}
	for _, r := range loadRules(t) {
		tr, ok := table[r.Alert]
		if !ok {
			t.Errorf("%s is not in the Alerts table of docs/operations.md", r.Alert)
			continue
		}
		delete(table, r.Alert)
		if tr.severity != r.Labels["severity"] {
			t.Errorf("%s: severity %q in docs/operations.md, %q in the rules", r.Alert, tr.severity, r.Labels["severity"])
		}
		if want := forText(time.Duration(r.For)); tr.forText != want {
			t.Errorf("%s: for %q in docs/operations.md, want %q as in the rules", r.Alert, tr.forText, want)
		}
	}
	for name := range table {
		t.Errorf("docs/operations.md lists %s, which the rules file does not have", name)
	}
}

// forText writes a rule's for as the table does: "—" for none, "5 m", "1 h".
func forText(d time.Duration) string {
	switch {
	case d == 0:
		return "—"
	case d%time.Hour == 0:
		return fmt.Sprintf("%d h", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%d m", d/time.Minute)
	}
	return d.String()
}
