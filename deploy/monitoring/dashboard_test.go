package monitoring

import (
	"testing"

	"github.com/atlasmart/orderd/deploy/monitoring/dashboard"
)

const dashboardFile = "grafana/orderd.json"

// TestDashboardShape checks what Grafana would otherwise report only on
// import: the data source is a variable of type prometheus used by every
// panel, the instance variable exists and is used, panels do not overlap
// on the grid, and every title and query is set.
func TestDashboardShape(t *testing.T) {
	d := loadDashboard(t)
	if d.SchemaVersion < 36 || d.UID == "" || d.Title == "" {
		t.Errorf("schemaVersion %d, uid %q, title %q: want a schemaVersion >= 36 (data sources by uid), a uid and a title", d.SchemaVersion, d.UID, d.Title)
	}
	ds, ok := d.Variable("datasource")
	if !ok || ds.Type != "datasource" || ds.QueryString() != "prometheus" {
		t.Errorf("variable datasource = %+v, want type datasource, query prometheus", ds)
	}
	inst, ok := d.Variable("instance")
	if !ok || inst.Type != "query" || !inst.IncludeAll || !inst.Multi {
		t.Errorf("variable instance = %+v, want a multi-value query variable with All", inst)
	}
	wantDS := dashboard.Datasource{Type: "prometheus", UID: "${datasource}"}
	ids := map[int]string{}
	var cells [][24]string // grid rows of 24 columns: which panel covers each cell
	rows := 0
	for _, p := range d.AllPanels() {
		if p.Title == "" {
			t.Errorf("panel %d has no title", p.ID)
		}
		if other, dup := ids[p.ID]; dup {
			t.Errorf("panels %q and %q share id %d", other, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 || g.Y < 0 {
			t.Errorf("panel %q: gridPos %+v is off the 24-column grid", p.Title, g)
			continue
		}
		for len(cells) < g.Y+g.H {
			cells = append(cells, [24]string{})
		}
		for y := g.Y; y < g.Y+g.H; y++ {
			for x := g.X; x < g.X+g.W; x++ {
				if cells[y][x] != "" {
					t.Errorf("panels %q and %q overlap at x=%d y=%d", cells[y][x], p.Title, x, y)
				}
				cells[y][x] = p.Title
			}
		}
		if p.Type == "row" {
			rows++
			continue
		}
		if p.Datasource == nil || *p.Datasource != wantDS {
			t.Errorf("panel %q: datasource %v, want %v", p.Title, p.Datasource, wantDS)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no queries", p.Title)
		}
		for _, tg := range p.Targets {
			if tg.Expr == "" || tg.RefID == "" {
				t.Errorf("panel %q: target %+v lacks refId or expr", p.Title, tg)
			}
			if tg.Datasource == nil || *tg.Datasource != wantDS {
				t.Errorf("panel %q %s: datasource %v, want %v", p.Title, tg.RefID, tg.Datasource, wantDS)
			}
		}
	}
	if rows < 7 {
		t.Errorf("%d rows, want at least 7 (traffic & outcomes, latency, Cassandra, reconciler, outbox, limits, Go runtime)", rows)
	}
}

func TestExpand(t *testing.T) {
	got, err := dashboard.Expand(`label_replace(rate(x{instance=~"$instance",a="${instance:regex}",b="[[instance]]"}[$__rate_interval]), "m", "$1", "m", "(.*)")`,
		map[string]string{"instance": ".*", "__rate_interval": "1m"})
	if want := `label_replace(rate(x{instance=~".*",a=".*",b=".*"}[1m]), "m", "$1", "m", "(.*)")`; err != nil || got != want {
		t.Errorf("Expand = %q, %v; want %q", got, err, want)
	}
	if _, err := dashboard.Expand(`rate(x[$__range_interval])`, map[string]string{}); err == nil {
		t.Error("Expand with an undefined variable succeeded")
	}
}
