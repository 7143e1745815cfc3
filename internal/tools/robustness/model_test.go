package robustness

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

const never = math.MaxInt64

// op is one hand-made call of tenant "t" on the order of request id "r1".
func op(client int, call, ret int64, in Input, out Output) porcupine.Operation {
	if in.Tenant == "" {
		in.Tenant = "t"
	}
	if in.Order == "" {
		in.Order = "r1"
	}
	if in.Kind == Create && in.RequestID == "" {
		in.RequestID = in.Order
	}
	return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
}

func creating(total string) Input { return Input{Kind: Create, Total: total} }
func cancel(rid string, expected int64) Input {
	return Input{Kind: Cancel, RequestID: rid, Expected: expected}
}
func amend(rid string, expected int64, note string) Input {
	return Input{Kind: Amend, RequestID: rid, Expected: expected, Note: note}
}

var get = Input{Kind: Get}

// after is in sent after answers that showed the order at version floor.
func after(floor int64, in Input) Input { in.Floor = floor; return in }

func made(order, total string, replayed bool) Output {
	return Output{Result: OK, OrderID: order, Total: total, Replayed: replayed}
}
func changed(v int64) Output          { return Output{Result: OK, OrderID: "o1", Version: v} }
func result(r Result, v int64) Output { return Output{Result: r, Version: v} }
func shown(v int64, st Status, note string) Output {
	return Output{Result: OK, OrderID: "o1", Total: "10.00", Version: v, Status: st, Note: note}
}

func TestLinearizableHistoriesPass(t *testing.T) {
	cases := map[string][]porcupine.Operation{
		"create, duplicate, conflicting reuse, reads": {
			op(0, 0, 10, get, result(NotFound, 0)),
			op(0, 20, 30, creating("10.00"), made("o1", "10.00", false)),
			op(1, 25, 40, creating("10.00"), made("o1", "10.00", true)),
			op(2, 50, 60, creating("99.00"), result(Reused, 0)),
			op(2, 70, 80, get, shown(1, Open, "")),
		},
		"an unknown create decides, a later one replays": {
			op(0, 0, never, creating("10.00"), result(Unknown, 0)),
			op(1, 5, 15, creating("99.00"), result(Reused, 0)),
			op(1, 20, 30, creating("10.00"), made("o1", "10.00", true)),
		},
		"an unknown create that never happened": {
			op(0, 0, never, creating("99.00"), result(Unknown, 0)),
			op(1, 20, 30, creating("10.00"), made("o1", "10.00", false)),
			op(1, 40, 50, creating("99.00"), result(Reused, 0)),
		},
		"racing changes on one version: one applies, the other is stale": {
			op(0, 0, 10, creating("10.00"), made("o1", "10.00", false)),
			op(1, 20, 40, amend("c1", 1, "x"), changed(2)),
			op(2, 21, 41, cancel("c2", 1), result(Stale, 2)),
			op(2, 50, 60, cancel("c2", 1), result(Stale, 2)),
			op(1, 50, 60, amend("c1", 1, "x"), changed(2)),
			op(1, 61, 62, amend("c1", 1, "y"), result(Reused, 0)),
			op(0, 70, 80, cancel("c3", 2), changed(3)),
			op(0, 90, 95, amend("c4", 3, "z"), result(Cancelled, 3)),
			op(0, 96, 99, get, shown(3, Closed, "x")),
		},
		"a read may lag a change whose client never learned its outcome": {
			op(0, 0, 10, creating("10.00"), made("o1", "10.00", false)),
			op(1, 20, never, amend("c1", 1, "x"), result(Unknown, 0)),
			op(2, 30, 40, after(1, cancel("c2", 1)), result(Stale, 2)),
			op(2, 50, 60, after(1, get), shown(1, Open, "")),
			op(2, 70, 80, after(1, get), shown(2, Open, "x")),
		},
		"a read may lag a decided change until it is answered": {
			op(0, 0, 10, creating("10.00"), made("o1", "10.00", false)),
			op(1, 20, 90, amend("c1", 1, "x"), changed(2)),
			op(2, 30, 40, after(1, cancel("c2", 1)), result(Stale, 2)),
			op(2, 50, 60, after(1, get), shown(1, Open, "")),
			op(2, 100, 110, after(2, get), shown(2, Open, "x")),
		},
	}
	for name, h := range cases {
		if v := Check(h, 10*time.Second); !v.OK() {
			t.Errorf("%s: %v\n%s", name, v, strings.Join(v.Illegal, "\n"))
		}
	}
}

func TestNonLinearizableHistoriesFail(t *testing.T) {
	cases := map[string][]porcupine.Operation{
		"two orders answered for one request id": {
			op(0, 0, 10, creating("10.00"), made("o1", "10.00", false)),
			op(1, 20, 30, creating("10.00"), made("o2", "10.00", true)),
		},
		"two payloads both accepted": {
			op(0, 0, 10, creating("10.00"), made("o1", "10.00", false)),
			op(1, 20, 30, creating("99.00"), made("o1", "99.00", true)),
		},
		"a change applied twice": {
			op(0, 0, 10, creating("10.00"), made("o1", "10.00", false)),
			op(1, 20, 30, amend("c1", 1, "x"), changed(2)),
			op(1, 40, 50, amend("c1", 1, "x"), changed(3)),
		},
		"two changes based on one version both applied": {
			op(0, 0, 10, creating("10.00"), made("o1", "10.00", false)),
			op(1, 20, 30, amend("c1", 1, "x"), changed(2)),
			op(2, 20, 30, cancel("c2", 1), changed(2)),
		},
		"a STALE_VERSION, then the same request applied": {
			op(0, 0, 10, creating("10.00"), made("o1", "10.00", false)),
			op(1, 20, 30, amend("c1", 5, "x"), result(Stale, 1)),
			op(0, 40, 50, amend("c2", 1, "a"), changed(2)),
			op(0, 60, 70, amend("c3", 2, "b"), changed(3)),
			op(0, 80, 90, amend("c4", 3, "c"), changed(4)),
			op(0, 100, 110, amend("c5", 4, "d"), changed(5)),
			op(1, 120, 130, amend("c1", 5, "x"), changed(6)),
		},
		"a read older than an acknowledged change": {
			op(0, 0, 10, creating("10.00"), made("o1", "10.00", false)),
			op(1, 20, 30, amend("c1", 1, "x"), changed(2)),
			op(2, 40, 50, after(2, get), shown(1, Open, "")),
		},
		"NOT_FOUND after the order was acknowledged": {
			op(0, 0, 10, creating("10.00"), made("o1", "10.00", false)),
			op(2, 40, 50, after(1, get), result(NotFound, 0)),
		},
		"a cancelled order amended": {
			op(0, 0, 10, creating("10.00"), made("o1", "10.00", false)),
			op(1, 20, 30, cancel("c1", 1), changed(2)),
			op(1, 40, 50, amend("c2", 2, "x"), changed(3)),
		},
	}
	for name, h := range cases {
		v := Check(h, 10*time.Second)
		if len(v.Illegal) != 1 {
			t.Errorf("%s: %v; want one order found not linearizable", name, v)
		}
	}
}

// Orders of two tenants that share a request id are two partitions: each
// is checked on its own.
func TestTenantsSharingARequestIDAreTwoOrders(t *testing.T) {
	a := op(0, 0, 10, Input{Kind: Create, Tenant: "a", Total: "10.00"}, made("oa", "10.00", false))
	b := op(1, 0, 10, Input{Kind: Create, Tenant: "b", Total: "99.00"}, made("ob", "99.00", false))
	if v := Check([]porcupine.Operation{a, b}, 10*time.Second); !v.OK() || v.Orders != 2 {
		t.Fatalf("%v; want two orders, linearizable", v)
	}
}

func TestVisualizeWritesTheIllegalOrders(t *testing.T) {
	h := []porcupine.Operation{
		op(0, 0, 10, creating("10.00"), made("o1", "10.00", false)),
		op(1, 20, 30, creating("10.00"), made("o2", "10.00", true)),
		op(0, 0, 10, Input{Kind: Create, Order: "r2", Total: "5.00"}, made("o3", "5.00", false)),
	}
	v := Check(h, 10*time.Second)
	path := filepath.Join(t.TempDir(), "history.html")
	if err := Visualize(h, v.Illegal, path); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(page), "o2") || strings.Contains(string(page), "o3") {
		t.Fatalf("%s: %d bytes, %v; want the illegal order's calls and no other's", path, len(page), err)
	}
}

// One change request id accepted on two orders: each order's history is
// linearizable alone, but orderd binds a change request id to one order,
// so the second must have been REQUEST_ID_REUSED. The same id as a cancel
// and as an amendment is two requests. (The traffic never reuses a change
// request id across orders, so the model, one order at a time, has no
// step for that REQUEST_ID_REUSED.)
func TestChangeRequestIDAcceptedOnTwoOrdersIsIllegal(t *testing.T) {
	creates := []porcupine.Operation{
		op(0, 0, 10, Input{Kind: Create, Order: "r1", Total: "10.00"}, made("o1", "10.00", false)),
		op(0, 20, 30, Input{Kind: Create, Order: "r2", Total: "10.00"}, made("o2", "10.00", false)),
	}
	first := op(0, 40, 50, after(1, Input{Kind: Cancel, Order: "r1", RequestID: "c1", Expected: 1}), changed(2))
	for name, tc := range map[string]struct {
		second porcupine.Operation
		ok     bool
	}{
		"accepted on the second order": {op(0, 60, 70, after(1, Input{Kind: Cancel, Order: "r2", RequestID: "c1", Expected: 1}),
			Output{Result: OK, OrderID: "o2", Version: 2}), false},
		"the same id as an amendment": {op(0, 60, 70, after(1, Input{Kind: Amend, Order: "r2", RequestID: "c1", Expected: 1, Note: "n"}),
			Output{Result: OK, OrderID: "o2", Version: 2}), true},
	} {
		t.Run(name, func(t *testing.T) {
			v := Check(append(slices.Clone(creates), first, tc.second), time.Second)
			if v.OK() != tc.ok {
				t.Errorf("Check = %s %v, want OK %v", v, v.Illegal, tc.ok)
			}
		})
	}
}
