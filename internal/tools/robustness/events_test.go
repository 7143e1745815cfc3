package robustness

import (
	"strings"
	"testing"
)

func TestEventChecks(t *testing.T) {
	created := func(id, tenant, order string, off int64) Event {
		return Event{ID: id, Type: "ORDER_CREATED", Tenant: tenant, OrderID: order, Version: 1, Offset: off}
	}
	changed := func(id, tenant, order string, v, off int64) Event {
		return Event{ID: id, Type: "ORDER_AMENDED", Tenant: tenant, OrderID: order, Version: v, Offset: off}
	}
	acks := []Ack{{"a", "oa", 1}, {"b", "ob", 1}, {"a", "oa", 2}}
	cases := []struct {
		name   string
		events []Event
		want   string // a problem's text; empty: none
	}{
		{"all published, one duplicated", []Event{created("a/r1", "a", "oa", 0), created("b/r1", "b", "ob", 1),
			created("a/r1", "a", "oa", 2), changed("c1", "a", "oa", 2, 3)}, ""},
		{"two tenants' orders under one event id", []Event{created("r1", "a", "oa", 0), created("r1", "b", "ob", 1),
			changed("c1", "a", "oa", 2, 3)}, "event id r1 names two events"},
		{"an acknowledged change missing", []Event{created("a/r1", "a", "oa", 0), created("b/r1", "b", "ob", 1)},
			"acknowledged but never published: a/oa v2"},
	}
	for _, c := range cases {
		v := CheckEvents(c.events, acks)
		got := strings.Join(v.Problems, "\n")
		if c.name == "all published, one duplicated" && v.MaxCopies != 2 {
			t.Errorf("%s: %v; want at most 2 copies of one event", c.name, v)
		}
		if c.want == "" && !v.OK() || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%s: %v %q; want problem %q", c.name, v, got, c.want)
		}
	}
}

// Publication order is not version order: a version first delivered after
// a later one is listed, not a problem.
func TestEventsOutOfVersionOrderAreListed(t *testing.T) {
	events := []Event{
		{ID: "c1", Type: "ORDER_AMENDED", Tenant: "a", OrderID: "oa", Version: 2, Offset: 0},
		{ID: "a/r1", Type: "ORDER_CREATED", Tenant: "a", OrderID: "oa", Version: 1, Offset: 1},
		{ID: "c1", Type: "ORDER_AMENDED", Tenant: "a", OrderID: "oa", Version: 2, Offset: 2},
	}
	v := CheckEvents(events, []Ack{{"a", "oa", 1}, {"a", "oa", 2}})
	if !v.OK() || len(v.Reordered) != 1 || !strings.Contains(v.Reordered[0], "v1 first delivered after v2") {
		t.Fatalf("%v: problems %q, reordered %q; want no problem and v1 listed", v, v.Problems, v.Reordered)
	}
}
