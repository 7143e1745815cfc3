package versionstest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/cassandra"
	"github.com/atlasmart/orderd/internal/fault"
	"github.com/atlasmart/orderd/internal/order"
	"github.com/atlasmart/orderd/internal/versions"
)

// Subject is a store under test and how to arm its faults.
type Subject struct {
	Store versions.Store
	// Arm makes the next times executions of the named statement fail so.
	Arm func(stmt string, f cassandra.Fault, times int)
}

// Run holds newSubject's store to the contract of versions.Store: every
// branch of the version check (applied, not applied, unknown and settled
// either way, unknown and unsettled) and the history it leaves. Every case
// uses orders of its own.
func Run(t *testing.T, newSubject func(t *testing.T) Subject) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			c.run(t, &suite{Subject: newSubject(t), ctx: ctx, tenant: Tenant, order: uuid.New()})
		})
	}
}

// Tenant is the tenant of every order the suite changes (orders that
// exist nowhere else: a caller on a shared keyspace removes them after).
const Tenant = "versions-contract"

type suite struct {
	Subject
	ctx    context.Context
	tenant string
	order  uuid.UUID
}

type testCase struct {
	name string
	run  func(t *testing.T, s *suite)
}

// change is a fresh change of the suite's order from version expected.
func (s *suite) change(op string, expected int64, note string) order.Change {
	cmd := order.ChangeCommand{OrderID: s.order, ExpectedVersion: expected, ShippingNote: note}
	enc := cmd.Encode()
	return order.NewChange(s.tenant, op, uuid.New(), order.ChangeFingerprint(op, enc), cmd,
		time.Now().UTC().Truncate(time.Millisecond))
}

func (s *suite) apply(t *testing.T, ch order.Change) versions.Decision {
	t.Helper()
	d, err := s.Store.Apply(s.ctx, ch)
	if err != nil {
		t.Fatalf("Apply of version %d: %v", ch.Version, err)
	}
	return d
}

// accepted applies changes to the order, each from the version before.
func (s *suite) accepted(t *testing.T, chs ...order.Change) {
	t.Helper()
	for _, ch := range chs {
		if d := s.apply(t, ch); !d.Accepted {
			t.Fatalf("Apply of version %d = %+v; want accepted", ch.Version, d)
		}
	}
}

// wantHistory checks the order's whole history.
func (s *suite) wantHistory(t *testing.T, want ...order.Change) {
	t.Helper()
	got, err := s.Store.History(s.ctx, s.tenant, s.order, order.MaxVersion)
	if err != nil {
		t.Fatalf("History: %v", err)
	}
	if !slices.EqualFunc(got, want, func(a, b order.Change) bool { return a == b }) {
		t.Errorf("history =\n%+v\nwant\n%+v", got, want)
	}
}

func wantDecision(t *testing.T, got, want versions.Decision) {
	t.Helper()
	if got != want {
		t.Errorf("decision = %+v, want %+v", got, want)
	}
}

func wantKind(t *testing.T, err error, kind fault.Kind) {
	t.Helper()
	if fault.KindOf(err) != kind {
		t.Errorf("error = %v (kind %v), want kind %v", err, fault.KindOf(err), kind)
	}
}

var cases = []testCase{
	{"Apply/applied: the first change of an order (no row yet)", func(t *testing.T, s *suite) {
		ch := s.change(order.OperationAmend, 1, "leave at the back door")
		wantDecision(t, s.apply(t, ch), versions.Decision{Accepted: true})
		s.wantHistory(t, ch)
	}},
	{"Apply/applied: version 2 to 3, a cancel keeps the note", func(t *testing.T, s *suite) {
		a, c := s.change(order.OperationAmend, 1, "ring twice"), s.change(order.OperationCancel, 2, "")
		s.accepted(t, a, c)
		s.wantHistory(t, a, c)
		o := order.Order{Version: 1}.At([]order.Change{a, c})
		if o.Version != 3 || o.Status != order.StatusCancelled || o.ShippingNote != "ring twice" {
			t.Errorf("order after the history = version %d %s note %q; want 3 CANCELLED %q", o.Version, o.Status, o.ShippingNote, "ring twice")
		}
	}},
	{"Apply/not applied, stale: the current version, nothing written", func(t *testing.T, s *suite) {
		a, b := s.change(order.OperationAmend, 1, "a"), s.change(order.OperationAmend, 2, "b")
		s.accepted(t, a, b)
		stale := s.change(order.OperationAmend, 2, "c")
		wantDecision(t, s.apply(t, stale), versions.Decision{Current: 3, Status: order.StatusCreated})
		s.wantHistory(t, a, b)
	}},
	{"Apply/not applied, ahead of the order: the current version", func(t *testing.T, s *suite) {
		wantDecision(t, s.apply(t, s.change(order.OperationAmend, 4, "x")), versions.Decision{Current: 1, Status: order.StatusCreated})
		s.wantHistory(t)
	}},
	{"Apply/not applied, cancelled: no change after a cancel", func(t *testing.T, s *suite) {
		c := s.change(order.OperationCancel, 1, "")
		s.accepted(t, c)
		wantDecision(t, s.apply(t, s.change(order.OperationAmend, 2, "late")), versions.Decision{Current: 2, Status: order.StatusCancelled})
		wantDecision(t, s.apply(t, s.change(order.OperationCancel, 2, "")), versions.Decision{Current: 2, Status: order.StatusCancelled})
		s.wantHistory(t, c)
	}},
	{"Apply/again, by another finisher of the same change: accepted, one row", func(t *testing.T, s *suite) {
		ch := s.change(order.OperationAmend, 1, "a")
		s.accepted(t, ch, ch)
		s.wantHistory(t, ch)
	}},
	{"Apply/again after later changes: still accepted (its version's row names it)", func(t *testing.T, s *suite) {
		a, b := s.change(order.OperationAmend, 1, "a"), s.change(order.OperationAmend, 2, "b")
		s.accepted(t, a, b, a)
		s.wantHistory(t, a, b)
	}},
	{"Apply/two changes race for one version: exactly one accepted", func(t *testing.T, s *suite) {
		base := s.change(order.OperationAmend, 1, "base")
		s.accepted(t, base)
		racers := []order.Change{s.change(order.OperationAmend, 2, "x"), s.change(order.OperationCancel, 2, ""),
			s.change(order.OperationAmend, 2, "y"), s.change(order.OperationAmend, 2, "z")}
		got := make([]versions.Decision, len(racers))
		var wg sync.WaitGroup
		for i, ch := range racers {
			wg.Go(func() { got[i] = s.apply(t, ch) })
		}
		wg.Wait()
		var winner order.Change
		for i, d := range got {
			if d.Accepted {
				if winner.Version != 0 {
					t.Fatalf("two changes accepted for version 3: %s and %s", winner.ID, racers[i].ID)
				}
				winner = racers[i]
			} else if d.Current != 3 {
				t.Errorf("loser %d saw version %d, want 3", i, d.Current)
			}
		}
		if winner.Version == 0 {
			t.Fatal("no change accepted")
		}
		s.wantHistory(t, base, winner)
	}},
	{"Apply/unknown, lose-response: settled, accepted", func(t *testing.T, s *suite) {
		ch := s.change(order.OperationAmend, 1, "a")
		s.Arm(versions.StmtApply, cassandra.FaultLoseResponse, 1)
		wantDecision(t, s.apply(t, ch), versions.Decision{Accepted: true})
		s.wantHistory(t, ch)
	}},
	{"Apply/unknown, timeout: settled as not applied, sent again, accepted", func(t *testing.T, s *suite) {
		ch := s.change(order.OperationAmend, 1, "a")
		s.Arm(versions.StmtApply, cassandra.FaultTimeout, 1)
		wantDecision(t, s.apply(t, ch), versions.Decision{Accepted: true})
		s.wantHistory(t, ch)
	}},
	{"Apply/unknown, lose-response of a stale change: settled, not accepted", func(t *testing.T, s *suite) {
		a := s.change(order.OperationAmend, 1, "a")
		s.accepted(t, a)
		s.Arm(versions.StmtApply, cassandra.FaultLoseResponse, 1)
		wantDecision(t, s.apply(t, s.change(order.OperationAmend, 1, "b")), versions.Decision{Current: 2, Status: order.StatusCreated})
		s.wantHistory(t, a)
	}},
	{"Apply/unknown on every try: Unavailable, nothing written", func(t *testing.T, s *suite) {
		s.Arm(versions.StmtApply, cassandra.FaultTimeout, 3)
		_, err := s.Store.Apply(s.ctx, s.change(order.OperationAmend, 1, "a"))
		wantKind(t, err, fault.Unavailable)
		s.wantHistory(t)
	}},
	{"Apply/unknown and unsettled: OutcomeUnknown; it had applied, and a retry finds it", func(t *testing.T, s *suite) {
		ch := s.change(order.OperationAmend, 1, "a")
		s.Arm(versions.StmtApply, cassandra.FaultLoseResponse, 1)
		s.Arm(versions.StmtState, cassandra.FaultUnavailable, 1)
		_, err := s.Store.Apply(s.ctx, ch)
		wantKind(t, err, fault.OutcomeUnknown)
		wantDecision(t, s.apply(t, ch), versions.Decision{Accepted: true})
		s.wantHistory(t, ch)
	}},
	{"Apply/refused (unavailable): Unavailable, nothing written", func(t *testing.T, s *suite) {
		s.Arm(versions.StmtApply, cassandra.FaultUnavailable, 1)
		_, err := s.Store.Apply(s.ctx, s.change(order.OperationAmend, 1, "a"))
		wantKind(t, err, fault.Unavailable)
		s.wantHistory(t)
	}},
	{"History/bounded by upTo, oldest first; none for an order never changed", func(t *testing.T, s *suite) {
		s.wantHistory(t)
		a, b, c := s.change(order.OperationAmend, 1, "a"), s.change(order.OperationAmend, 2, ""), s.change(order.OperationCancel, 3, "")
		s.accepted(t, a, b, c)
		got, err := s.Store.History(s.ctx, s.tenant, s.order, 3)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, []order.Change{a, b}) {
			t.Errorf("History up to 3 = %+v, want versions 2 and 3", got)
		}
	}},
	{"History/read failure: Unavailable", func(t *testing.T, s *suite) {
		s.Arm(versions.StmtHistory, cassandra.FaultUnavailable, 1)
		_, err := s.Store.History(s.ctx, s.tenant, s.order, 5)
		wantKind(t, err, fault.Unavailable)
	}},
}
