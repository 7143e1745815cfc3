package robustness

import (
	"fmt"
	"maps"
	"slices"

	"github.com/anishathalye/porcupine"
)

// state is one order as the sequential model sees it. A state is never
// changed once made: every step that changes something returns a copy.
type state struct {
	// created: a CreateOrder claim decided the order's payload (total).
	created bool
	total   string
	// orderID: the order id the first answer that named one gave.
	orderID string
	// versions[i] is the order at version i+1.
	versions []version
	// changes holds every change request the order decided, by its key.
	changes map[changeKey]change
}

type version struct {
	status Status
	note   string
}

// changeKey is a change request's identity: its request id is scoped by
// operation.
type changeKey struct {
	kind      Kind
	requestID string
}

// change is a decided change request: its payload and its recorded answer.
type change struct {
	expected int64
	note     string
	result   Result // OK, Stale or Cancelled
	version  int64  // OK: the version it made; else the current_version answered
}

func (s state) clone() state {
	c := s
	c.versions = slices.Clone(s.versions)
	c.changes = maps.Clone(s.changes)
	if c.changes == nil {
		c.changes = map[changeKey]change{}
	}
	return c
}

func (s state) equal(o state) bool {
	return s.created == o.created && s.total == o.total && s.orderID == o.orderID &&
		slices.Equal(s.versions, o.versions) && maps.Equal(s.changes, o.changes)
}

func (s state) String() string {
	if !s.created {
		return "no order"
	}
	return fmt.Sprintf("order %.8s total %s at v%d, %d changes decided", s.orderID, s.total, len(s.versions), len(s.changes))
}

// Model is the sequential specification of orderd, one order per
// partition.
func Model() porcupine.Model {
	m := porcupine.NondeterministicModel{
		Partition: partition,
		Init:      func() []any { return []any{state{}} },
		Step: func(st, in, out any) []any {
			return step(st.(state), in.(Input), out.(Output))
		},
		Equal: func(a, b any) bool { return a.(state).equal(b.(state)) },
		DescribeOperation: func(in, out any) string {
			return describe(in.(Input), out.(Output))
		},
		DescribeState: func(st any) string { return st.(state).String() },
	}
	return m.ToModel()
}

func describe(in Input, out Output) string {
	switch in.Kind {
	case Create:
		return fmt.Sprintf("create %.8s total %s -> %s", in.RequestID, in.Total, out)
	case Cancel, Amend:
		return fmt.Sprintf("%s %.8s expected v%d note %q -> %s", in.Kind, in.RequestID, in.Expected, in.Note, out)
	}
	return fmt.Sprintf("%s -> %s", in.Kind, out)
}

// partitionKey names the order a call is about.
func partitionKey(in Input) string { return in.Tenant + "/" + in.Order }

func partition(history []porcupine.Operation) [][]porcupine.Operation {
	byKey := map[string][]porcupine.Operation{}
	var keys []string
	for _, op := range history {
		k := partitionKey(op.Input.(Input))
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], op)
	}
	out := make([][]porcupine.Operation, 0, len(keys))
	for _, k := range keys {
		out = append(out, byKey[k])
	}
	return out
}

// step returns every state the call can leave s in given its answer; none
// if the answer is impossible from s.
func step(s state, in Input, out Output) []any {
	var next []state
	switch in.Kind {
	case Create:
		next = stepCreate(s, in, out)
	case Cancel, Amend:
		next = stepChange(s, in, out)
	case Get, List:
		next = stepRead(s, in, out)
	}
	res := make([]any, len(next))
	for i, n := range next {
		res[i] = n
	}
	return res
}

// create is s after the first accepted CreateOrder, with in's payload.
func create(s state, in Input) state {
	if s.created {
		return s
	}
	c := s.clone()
	c.created, c.total, c.versions = true, in.Total, []version{{status: Open}}
	return c
}

func stepCreate(s state, in Input, out Output) []state {
	switch out.Result {
	case Unknown:
		return []state{s, create(s, in)}
	case Reused:
		if s.created && s.total != in.Total {
			return []state{s}
		}
	case OK:
		// A replayed answer is never the first; a fresh one may be a
		// takeover's, so it says nothing either way.
		if out.Replayed && !s.created {
			return nil
		}
		c := create(s, in)
		if c.total != in.Total || out.Total != in.Total || !c.knows(out.OrderID) {
			return nil
		}
		c = c.clone()
		c.orderID = out.OrderID
		return []state{c}
	}
	return nil
}

// knows reports whether id can be this order's id.
func (s state) knows(id string) bool { return s.orderID == "" || s.orderID == id }

// decide is what a change with in's payload decides on s (which has an
// order): the same rule as orderd's version check.
func decide(s state, in Input) (state, change) {
	cur := int64(len(s.versions))
	ch := change{expected: in.Expected, note: in.Note}
	switch {
	case in.Expected != cur:
		ch.result, ch.version = Stale, cur
	case s.versions[cur-1].status == Closed:
		ch.result, ch.version = Cancelled, cur
	default:
		ch.result, ch.version = OK, cur+1
	}
	c := s.clone()
	c.changes[changeKey{in.Kind, in.RequestID}] = ch
	if ch.result == OK {
		v := s.versions[cur-1]
		if in.Kind == Cancel {
			v.status = Closed
		} else {
			v.note = in.Note
		}
		c.versions = append(c.versions, v)
	}
	return c, ch
}

func stepChange(s state, in Input, out Output) []state {
	key := changeKey{in.Kind, in.RequestID}
	decided, ok := s.changes[key]
	if ok {
		if decided.expected != in.Expected || decided.note != in.Note {
			if out.Result == Reused || out.Result == Unknown {
				return []state{s}
			}
			return nil
		}
		return answer(s, decided, out)
	}
	switch {
	case out.Result == NotFound:
		// No order, or its row not written yet: nothing recorded.
		if in.Floor == 0 {
			return []state{s}
		}
		return nil
	case !s.created:
		if out.Result == Unknown {
			return []state{s}
		}
		return nil
	case out.Result == Unknown:
		c, _ := decide(s, in)
		return []state{s, c}
	}
	c, ch := decide(s, in)
	return answer(c, ch, out)
}

// answer checks out against a decided change.
func answer(s state, ch change, out Output) []state {
	if out.Result == Unknown || out.Result == ch.result && out.Version == ch.version {
		return []state{s}
	}
	return nil
}

func stepRead(s state, in Input, out Output) []state {
	switch out.Result {
	case NotFound:
		if in.Floor == 0 {
			return []state{s}
		}
		return nil
	case OK:
	default:
		return nil
	}
	v := out.Version
	if !s.created || v < max(in.Floor, 1) || v > int64(len(s.versions)) || out.Total != s.total || !s.knows(out.OrderID) {
		return nil
	}
	at := s.versions[v-1]
	if at.status != out.Status || in.Kind == Get && at.note != out.Note {
		return nil
	}
	c := s.clone()
	c.orderID = out.OrderID
	return []state{c}
}
