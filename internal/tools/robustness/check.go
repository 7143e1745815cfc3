package robustness

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Verdict is what the linearizability check found.
type Verdict struct {
	Operations int
	Unknown    int // writes whose outcome their client never learned
	Orders     int // partitions checked
	// Illegal describes each order whose history no sequential order of
	// its calls explains; TimedOut names each the checker gave up on.
	Illegal  []string
	TimedOut []string
}

// OK reports whether every order's history was shown linearizable.
func (v Verdict) OK() bool { return len(v.Illegal) == 0 && len(v.TimedOut) == 0 }

func (v Verdict) String() string {
	s := fmt.Sprintf("%d operations (%d with unknown outcome) on %d orders", v.Operations, v.Unknown, v.Orders)
	switch {
	case len(v.Illegal) > 0:
		return s + fmt.Sprintf(": NOT LINEARIZABLE (%d orders)", len(v.Illegal))
	case len(v.TimedOut) > 0:
		return s + fmt.Sprintf(": check timed out on %d orders", len(v.TimedOut))
	}
	return s + ": linearizable"
}

// Check checks history one order at a time, each within timeout, and
// then what no one order's history shows: a change request id accepted on
// two orders.
func Check(history []porcupine.Operation, timeout time.Duration) Verdict {
	model := Model()
	v := Verdict{Operations: len(history)}
	for _, op := range history {
		if op.Output.(Output).Result == Unknown {
			v.Unknown++
		}
	}
	for _, ops := range partition(history) {
		v.Orders++
		switch porcupine.CheckOperationsTimeout(model, ops, timeout) {
		case porcupine.Illegal:
			v.Illegal = append(v.Illegal, describeOrder(ops))
		case porcupine.Unknown:
			v.TimedOut = append(v.TimedOut, partitionKey(ops[0].Input.(Input)))
		}
	}
	v.Illegal = append(v.Illegal, changesOnTwoOrders(history)...)
	return v
}

// changesOnTwoOrders describes each change request (tenant, operation,
// request id) accepted on more than one order. orderd binds a change
// request id to the first order it is sent for, for good: sent for
// another, it is REQUEST_ID_REUSED. The model checks one order at a time,
// so this is checked across them.
func changesOnTwoOrders(history []porcupine.Operation) []string {
	type request struct {
		tenant string
		kind   Kind
		id     string
	}
	orders := map[request][]string{}
	var order []request
	for _, op := range history {
		in, out := op.Input.(Input), op.Output.(Output)
		if !in.Kind.isChange() || out.Result != OK {
			continue
		}
		r := request{in.Tenant, in.Kind, in.RequestID}
		if _, seen := orders[r]; !seen {
			order = append(order, r)
		}
		if !slices.Contains(orders[r], in.Order) {
			orders[r] = append(orders[r], in.Order)
		}
	}
	var out []string
	for _, r := range order {
		if len(orders[r]) > 1 {
			out = append(out, fmt.Sprintf("%s %s of tenant %q accepted on the orders of %s: a change request id is bound to one order",
				r.kind, r.id, r.tenant, strings.Join(orders[r], ", ")))
		}
	}
	return out
}

// describeOrder lists one order's calls by the time they were sent.
func describeOrder(ops []porcupine.Operation) string {
	ops = slices.Clone(ops)
	slices.SortFunc(ops, func(a, b porcupine.Operation) int { return int(a.Call - b.Call) })
	var b strings.Builder
	fmt.Fprintf(&b, "order %s:", partitionKey(ops[0].Input.(Input)))
	for _, op := range ops {
		ret := "never"
		if op.Return != 1<<63-1 {
			ret = time.Duration(op.Return).String()
		}
		fmt.Fprintf(&b, "\n  client %d [%s, %s] %s", op.ClientId, time.Duration(op.Call), ret, describe(op.Input.(Input), op.Output.(Output)))
	}
	return b.String()
}

// Visualize writes porcupine's HTML view of the orders of history that
// Check found not linearizable (their longest partial linearizations and
// where each got stuck) to path.
func Visualize(history []porcupine.Operation, illegal []string, path string) error {
	keep := map[string]bool{}
	for _, d := range illegal {
		keep[strings.TrimPrefix(strings.SplitN(d, ":", 2)[0], "order ")] = true
	}
	var ops []porcupine.Operation
	for _, op := range history {
		if keep[partitionKey(op.Input.(Input))] {
			ops = append(ops, op)
		}
	}
	model := Model()
	_, info := porcupine.CheckOperationsVerbose(model, ops, time.Minute)
	return porcupine.VisualizePath(model, info, path)
}
