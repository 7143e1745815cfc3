// Package dashboard reads the parts of a Grafana dashboard (JSON model,
// schemaVersion 39) that the monitoring checks and the renderer need: the
// panels with their layout, units and PromQL targets, and the template
// variables, which it expands in a query the way Grafana does before the
// query reaches Prometheus.
package dashboard

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
)

// Dashboard is a Grafana dashboard, as far as it is read here.
type Dashboard struct {
	UID           string     `json:"uid"`
	Title         string     `json:"title"`
	SchemaVersion int        `json:"schemaVersion"`
	Templating    Templating `json:"templating"`
	Panels        []Panel    `json:"panels"`
}

// Templating holds the dashboard's variables.
type Templating struct {
	List []Variable `json:"list"`
}

// Variable is a template variable ($name in queries).
type Variable struct {
	Name       string      `json:"name"`
	Type       string      `json:"type"`  // datasource, query, interval, ...
	Query      any         `json:"query"` // a string, or an object with a query field
	Datasource *Datasource `json:"datasource,omitempty"`
	Multi      bool        `json:"multi"`
	IncludeAll bool        `json:"includeAll"`
	AllValue   string      `json:"allValue"`
}

// QueryString is the variable's query as text: Grafana stores it either as
// a string or as an object whose query field is the text.
func (v Variable) QueryString() string {
	switch q := v.Query.(type) {
	case string:
		return q
	case map[string]any:
		s, _ := q["query"].(string)
		return s
	}
	return ""
}

// Datasource names a data source by type and uid (a ${variable} here).
type Datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// GridPos is a panel's place on Grafana's 24-column grid (h in rows of 30 px).
type GridPos struct {
	H int `json:"h"`
	W int `json:"w"`
	X int `json:"x"`
	Y int `json:"y"`
}

// Panel is a dashboard panel; a row's nested panels are in Panels when the
// row is collapsed.
type Panel struct {
	ID          int         `json:"id"`
	Type        string      `json:"type"` // row, timeseries, stat, ...
	Title       string      `json:"title"`
	Description string      `json:"description,omitempty"`
	GridPos     GridPos     `json:"gridPos"`
	Datasource  *Datasource `json:"datasource,omitempty"`
	Targets     []Target    `json:"targets,omitempty"`
	FieldConfig FieldConfig `json:"fieldConfig"`
	Panels      []Panel     `json:"panels,omitempty"`
}

// Target is one query of a panel.
type Target struct {
	RefID        string      `json:"refId"`
	Expr         string      `json:"expr"`
	LegendFormat string      `json:"legendFormat"`
	Datasource   *Datasource `json:"datasource,omitempty"`
}

// FieldConfig holds a panel's display defaults.
type FieldConfig struct {
	Defaults FieldDefaults `json:"defaults"`
}

// FieldDefaults are the field settings the renderer follows.
type FieldDefaults struct {
	Unit   string      `json:"unit,omitempty"`
	Min    *float64    `json:"min,omitempty"`
	Custom FieldCustom `json:"custom"`
	Thres  *Thresholds `json:"thresholds,omitempty"`
}

// FieldCustom holds the time series panel's drawing settings.
type FieldCustom struct {
	FillOpacity int      `json:"fillOpacity"`
	Stacking    Stacking `json:"stacking"`
}

// Stacking says whether a panel's series are stacked ("normal") or not.
type Stacking struct {
	Mode string `json:"mode"`
}

// Thresholds are a panel's threshold steps (an alert's threshold, drawn as
// a line by the renderer).
type Thresholds struct {
	Mode  string `json:"mode"`
	Steps []struct {
		Color string   `json:"color"`
		Value *float64 `json:"value"`
	} `json:"steps"`
}

// Load reads a dashboard file.
func Load(path string) (*Dashboard, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d Dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &d, nil
}

// AllPanels returns every panel, rows and the panels of collapsed rows
// included, in the file's order.
func (d *Dashboard) AllPanels() []Panel {
	var out []Panel
	for _, p := range d.Panels {
		out = append(out, p)
		out = append(out, p.Panels...)
	}
	return out
}

// Variable returns the variable called name.
func (d *Dashboard) Variable(name string) (Variable, bool) {
	for _, v := range d.Templating.List {
		if v.Name == name {
			return v, true
		}
	}
	return Variable{}, false
}

// varRef matches the three syntaxes Grafana accepts: $name, ${name} (also
// ${name:format}) and [[name]].
var varRef = regexp.MustCompile(`\$\{([A-Za-z0-9_]+)(?::[^}]*)?\}|\[\[([A-Za-z0-9_]+)\]\]|\$([A-Za-z0-9_]+)`)

// Expand replaces the variables of query with their values, as Grafana does
// before sending it; it returns an error naming any variable vars lacks
// ($1 and the like, label_replace's capture groups, are left alone).
func Expand(query string, vars map[string]string) (string, error) {
	var missing []string
	out := varRef.ReplaceAllStringFunc(query, func(ref string) string {
		m := varRef.FindStringSubmatch(ref)
		name := m[1] + m[2] + m[3]
		if name[0] >= '0' && name[0] <= '9' {
			// $1 in label_replace: Grafana leaves names it does not
			// know, and no variable name starts with a digit.
			return ref
		}
		v, ok := vars[name]
		if !ok {
			missing = append(missing, name)
			return ref
		}
		return v
	})
	if len(missing) > 0 {
		sort.Strings(missing)
		return "", fmt.Errorf("undefined variables in %q: %s", query, strings.Join(missing, ", "))
	}
	return out, nil
}

// labelValues matches a label_values(metric{...}, label) variable query.
var labelValues = regexp.MustCompile(`^\s*label_values\(\s*(.*?)\s*,\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$`)

// LabelValuesSelector returns the series selector of a label_values
// variable query (label_values(orderd_grpc_requests_total, instance) ->
// orderd_grpc_requests_total) and the label, or ok false if q is another
// kind of query.
func LabelValuesSelector(q string) (selector, label string, ok bool) {
	m := labelValues.FindStringSubmatch(q)
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}
