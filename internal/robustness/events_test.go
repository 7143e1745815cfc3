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
		{"versions out of order", []Event{changed("c1", "a", "oa", 2, 0), created("a/r1", "a", "oa", 1), created("b/r1", "b", "ob", 2)},
			"v1 first delivered after v2"},
	}
	for _, c := range cases {
		v := CheckEvents(c.events, acks)
		got := strings.Join(v.Problems, "\n")
		if c.want == "" && !v.OK() || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%s: %v %q; want problem %q", c.name, v, got, c.want)
		}
	}
}
