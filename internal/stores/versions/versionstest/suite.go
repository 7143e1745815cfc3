package versionstest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/stores/versions"
)

// Subject is a store under test and how to arm its faults.
type Subject struct {
	Store versions.Store
	// Arm makes the next times executions of the named statement fail so.
	Arm func(stmt cassandra.Stmt, f cassandra.Fault, times int)
	// Before runs do once, just before the next execution of the named
	// statement (cassandra.Faults.Before).
	Before func(stmt cassandra.Stmt, do func())
	// Unrecorded accepts ch as a version before migration 0006 did (its
	// row, no record under its change id), if the order is at ch's
	// expected version and open; it reports whether it applied.
	Unrecorded func(t *testing.T, ch order.Change) bool
}

// Run holds newSubject's store to the contract of versions.Store: every
// branch of the version check and of the refusal's record (applied, not
// applied, unknown and settled either way, unknown and unsettled), the
// history they leave and the outcomes Lookup finds. Every case
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
	return s.changeOf(uuid.New(), op, expected, note)
}

// changeOf is the change request id asks for.
func (s *suite) changeOf(requestID uuid.UUID, op string, expected int64, note string) order.Change {
	cmd := order.ChangeCommand{OrderID: s.order, ExpectedVersion: expected, ShippingNote: note}
	enc := cmd.Encode()
	return order.NewChange(s.tenant, op, requestID, order.ChangeFingerprint(op, enc), cmd,
		time.Now().UTC().Truncate(time.Millisecond))
}

// wantLookup checks the outcome recorded for ch's change id (nil: none).
func (s *suite) wantLookup(t *testing.T, ch order.Change, want *versions.Record) {
	t.Helper()
	got, ok, err := s.Store.Lookup(s.ctx, s.tenant, s.order, ch.ID)
	switch {
	case err != nil:
		t.Fatalf("Lookup: %v", err)
	case want == nil && ok:
		t.Errorf("Lookup = %+v, want none", got)
	case want != nil && (!ok || got != *want):
		t.Errorf("Lookup = %+v (found %v), want %+v", got, ok, *want)
	}
}

// unsettled applies ch with stmt's response lost and the settling read
// failing: OutcomeUnknown.
func (s *suite) unsettled(t *testing.T, stmt cassandra.Stmt, ch order.Change) {
	t.Helper()
	s.Arm(stmt, cassandra.FaultLoseResponse, 1)
	s.Arm(versions.StmtState, cassandra.FaultUnavailable, 1)
	_, err := s.Store.Apply(s.ctx, ch, 0)
	wantKind(t, err, fault.OutcomeUnknown)
}

func refused(reason fault.Reason, current int64) versions.Decision {
	return versions.Decision{Refusal: order.ChangeOutcome{Reason: reason, CurrentVersion: current}}
}

func stale(current int64) versions.Decision { return refused(fault.ReasonStaleVersion, current) }

var reused = refused(fault.ReasonRequestIDReused, 0)

// refusal is the record of ch refused with d.
func refusal(ch order.Change, d versions.Decision) *versions.Record {
	return &versions.Record{Fingerprint: ch.Fingerprint, Reason: d.Refusal.Reason, CurrentVersion: d.Refusal.CurrentVersion}
}

func acceptance(ch order.Change) *versions.Record {
	return &versions.Record{Fingerprint: ch.Fingerprint, Version: ch.Version}
}

func (s *suite) apply(t *testing.T, ch order.Change) versions.Decision {
	t.Helper()
	d, err := s.Store.Apply(s.ctx, ch, 0)
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

// acceptedEarlier is the decision for a change an earlier attempt (or
// another finisher) accepted, found as such: its record or its row was
// there before this call's write, never an unknown outcome of its own.
var acceptedEarlier = versions.Decision{Accepted: true, Earlier: true}

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
		late := s.change(order.OperationAmend, 2, "c")
		wantDecision(t, s.apply(t, late), stale(3))
		s.wantHistory(t, a, b)
		s.wantLookup(t, late, refusal(late, stale(3)))
	}},
	{"Apply/not applied, ahead of the order: the current version", func(t *testing.T, s *suite) {
		wantDecision(t, s.apply(t, s.change(order.OperationAmend, 4, "x")), stale(1))
		s.wantHistory(t)
	}},
	{"Apply/not applied, cancelled: no change after a cancel", func(t *testing.T, s *suite) {
		c := s.change(order.OperationCancel, 1, "")
		s.accepted(t, c)
		wantDecision(t, s.apply(t, s.change(order.OperationAmend, 2, "late")), refused(fault.ReasonOrderCancelled, 2))
		wantDecision(t, s.apply(t, s.change(order.OperationCancel, 2, "")), refused(fault.ReasonOrderCancelled, 2))
		wantDecision(t, s.apply(t, s.change(order.OperationAmend, 3, "")), stale(2))
		s.wantHistory(t, c)
	}},
	{"Apply/again, by another finisher of the same change: accepted, one row", func(t *testing.T, s *suite) {
		ch := s.change(order.OperationAmend, 1, "a")
		s.accepted(t, ch, ch)
		s.wantHistory(t, ch)
	}},
	{"Apply/again after later changes: still accepted (its record)", func(t *testing.T, s *suite) {
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
			} else if d != stale(3) {
				t.Errorf("loser %d: %+v, want stale at version 3", i, d)
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
		wantDecision(t, s.apply(t, s.change(order.OperationAmend, 1, "b")), stale(2))
		s.wantHistory(t, a)
	}},
	{"Apply/unknown on every try: Unavailable, nothing written", func(t *testing.T, s *suite) {
		s.Arm(versions.StmtApply, cassandra.FaultTimeout, 3)
		_, err := s.Store.Apply(s.ctx, s.change(order.OperationAmend, 1, "a"), 0)
		wantKind(t, err, fault.Unavailable)
		s.wantHistory(t)
	}},
	{"Apply/unknown and unsettled: OutcomeUnknown; it had applied, and a retry finds it", func(t *testing.T, s *suite) {
		ch := s.change(order.OperationAmend, 1, "a")
		s.unsettled(t, versions.StmtApply, ch)
		wantDecision(t, s.apply(t, ch), acceptedEarlier)
		s.wantHistory(t, ch)
	}},
	{"Apply/refused (unavailable): Unavailable, nothing written", func(t *testing.T, s *suite) {
		s.Arm(versions.StmtApply, cassandra.FaultUnavailable, 1)
		_, err := s.Store.Apply(s.ctx, s.change(order.OperationAmend, 1, "a"), 0)
		wantKind(t, err, fault.Unavailable)
		s.wantHistory(t)
	}},
	{"Apply/refused ahead of the order, then the order reaches its version: refused again (its record)", func(t *testing.T, s *suite) {
		ahead := s.change(order.OperationAmend, 3, "ahead")
		wantDecision(t, s.apply(t, ahead), stale(1))
		a, b := s.change(order.OperationAmend, 1, "a"), s.change(order.OperationAmend, 2, "b")
		s.accepted(t, a, b)
		wantDecision(t, s.apply(t, ahead), stale(1))
		s.wantHistory(t, a, b)
		s.wantLookup(t, ahead, refusal(ahead, stale(1)))
		s.wantLookup(t, b, acceptance(b))
	}},
	{"Apply/an accepted change's id with another command: REQUEST_ID_REUSED, nothing written", func(t *testing.T, s *suite) {
		a := s.change(order.OperationAmend, 1, "a")
		s.accepted(t, a)
		again := s.changeOf(a.RequestID, order.OperationAmend, 2, "b") // the order is at 2: only the record refuses it
		wantDecision(t, s.apply(t, again), reused)
		s.wantHistory(t, a)
		s.wantLookup(t, again, acceptance(a))
	}},
	{"Apply/a refused change's id with another command: REQUEST_ID_REUSED, the refusal kept", func(t *testing.T, s *suite) {
		ahead := s.change(order.OperationAmend, 2, "ahead")
		wantDecision(t, s.apply(t, ahead), stale(1))
		again := s.changeOf(ahead.RequestID, order.OperationAmend, 1, "b")
		wantDecision(t, s.apply(t, again), reused)
		s.wantHistory(t)
		s.wantLookup(t, again, refusal(ahead, stale(1)))
	}},
	{"Apply/unknown, lose-response of a refused change: settled, refused by its record", func(t *testing.T, s *suite) {
		ahead := s.change(order.OperationAmend, 2, "ahead")
		wantDecision(t, s.apply(t, ahead), stale(1))
		s.Arm(versions.StmtApply, cassandra.FaultLoseResponse, 1)
		wantDecision(t, s.apply(t, ahead), stale(1))
		s.wantHistory(t)
	}},
	{"Refuse/not applied: another finisher accepted the change first, so it is accepted", func(t *testing.T, s *suite) {
		a, ahead := s.change(order.OperationAmend, 1, "a"), s.change(order.OperationAmend, 2, "ahead")
		// ahead's check finds the order at 1; before its refusal lands, the
		// order reaches 2 and another finisher of ahead applies it.
		s.Before(versions.StmtRefuse, func() { s.accepted(t, a, ahead) })
		wantDecision(t, s.apply(t, ahead), acceptedEarlier)
		s.wantHistory(t, a, ahead)
		s.wantLookup(t, ahead, acceptance(ahead))
	}},
	{"Refuse/unknown, lose-response: settled, refused (recorded once)", func(t *testing.T, s *suite) {
		ahead := s.change(order.OperationAmend, 2, "ahead")
		s.Arm(versions.StmtRefuse, cassandra.FaultLoseResponse, 1)
		wantDecision(t, s.apply(t, ahead), stale(1))
		s.wantLookup(t, ahead, refusal(ahead, stale(1)))
	}},
	{"Refuse/unknown, timeout: settled as not recorded, sent again, refused", func(t *testing.T, s *suite) {
		ahead := s.change(order.OperationAmend, 2, "ahead")
		s.Arm(versions.StmtRefuse, cassandra.FaultTimeout, 1)
		wantDecision(t, s.apply(t, ahead), stale(1))
		s.wantLookup(t, ahead, refusal(ahead, stale(1)))
	}},
	{"Refuse/unknown on every try: Unavailable, nothing recorded", func(t *testing.T, s *suite) {
		ahead := s.change(order.OperationAmend, 2, "ahead")
		s.Arm(versions.StmtRefuse, cassandra.FaultTimeout, versions.SettleAttempts)
		_, err := s.Store.Apply(s.ctx, ahead, 0)
		wantKind(t, err, fault.Unavailable)
		s.wantLookup(t, ahead, nil)
	}},
	{"Refuse/unknown and unsettled: OutcomeUnknown; it was recorded, and a retry answers it", func(t *testing.T, s *suite) {
		ahead := s.change(order.OperationAmend, 2, "ahead")
		s.unsettled(t, versions.StmtRefuse, ahead)
		s.wantLookup(t, ahead, refusal(ahead, stale(1)))
		a := s.change(order.OperationAmend, 1, "a")
		s.accepted(t, a)
		wantDecision(t, s.apply(t, ahead), stale(1))
		s.wantHistory(t, a)
	}},
	{"Refuse/refused (unavailable): Unavailable, nothing recorded", func(t *testing.T, s *suite) {
		ahead := s.change(order.OperationAmend, 2, "ahead")
		s.Arm(versions.StmtRefuse, cassandra.FaultUnavailable, 1)
		_, err := s.Store.Apply(s.ctx, ahead, 0)
		wantKind(t, err, fault.Unavailable)
		s.wantLookup(t, ahead, nil)
	}},
	{"Unrecorded/a change an older version accepted: Lookup finds its row, Apply accepts it again", func(t *testing.T, s *suite) {
		old := s.change(order.OperationAmend, 1, "old")
		if !s.Unrecorded(t, old) {
			t.Fatal("the unrecorded change did not apply")
		}
		s.wantLookup(t, old, acceptance(old))
		wantDecision(t, s.apply(t, old), acceptedEarlier)
		other := s.changeOf(old.RequestID, order.OperationAmend, 1, "other") // its version, another command
		wantDecision(t, s.apply(t, other), reused)
		next := s.change(order.OperationCancel, 2, "")
		s.accepted(t, next)
		s.wantHistory(t, old, next)
	}},
	{"Apply/shown: the order's row already shows the version: stale, decided without the version check", func(t *testing.T, s *suite) {
		first := s.change(order.OperationAmend, 1, "a")
		s.accepted(t, first)
		late := s.change(order.OperationCancel, 1, "")
		s.Arm(versions.StmtApply, cassandra.FaultUnavailable, 1) // sent, it would fail the call
		d, err := s.Store.Apply(s.ctx, late, 2)
		if err != nil {
			t.Fatalf("Apply of a change the row shows past: %v (was the version check sent?)", err)
		}
		wantDecision(t, d, stale(2))
		s.wantLookup(t, late, refusal(late, d))
		s.wantHistory(t, first)
	}},
	{"Apply/shown: the accepted change again once its row shows it: accepted (its record)", func(t *testing.T, s *suite) {
		ch := s.change(order.OperationAmend, 1, "a")
		s.accepted(t, ch)
		d, err := s.Store.Apply(s.ctx, ch, 2)
		if err != nil {
			t.Fatal(err)
		}
		wantDecision(t, d, acceptedEarlier)
		s.wantHistory(t, ch)
	}},
	{"Apply/shown: a history behind the order's row decides nothing, by either statement", func(t *testing.T, s *suite) {
		// As a restore leaves it: the row shows version 3, the history
		// holds version 2 only.
		second := s.change(order.OperationAmend, 1, "a")
		s.accepted(t, second)
		for _, c := range []struct {
			what string
			ch   order.Change
		}{
			{"a change the row shows past (the read decides)", s.change(order.OperationCancel, 2, "")},
			{"a change from the row's version (the version check decides)", s.change(order.OperationCancel, 3, "")},
			{"a change from the history's version", s.change(order.OperationAmend, 1, "b")},
		} {
			d, err := s.Store.Apply(s.ctx, c.ch, 3)
			var behind *versions.HistoryBehind
			if !errors.As(err, &behind) || behind.Current != 2 || behind.Shown != 3 || fault.ReasonOf(err) != fault.ReasonHistoryBehind {
				t.Errorf("%s: Apply = %+v, %v; want the history behind (at 2, the row at 3)", c.what, d, err)
			}
			s.wantLookup(t, c.ch, nil)
		}
		s.wantHistory(t, second)
	}},
	{"Bind/Bound: a request id's order, read back; none before", func(t *testing.T, s *suite) {
		rid := uuid.New()
		if id, ok, err := s.Store.Bound(s.ctx, s.tenant, order.OperationAmend, rid); err != nil || ok {
			t.Fatalf("Bound before Bind = %s, %v, %v; want none", id, ok, err)
		}
		for range 2 { // replayed: the same row
			if err := s.Store.Bind(s.ctx, s.tenant, order.OperationAmend, rid, s.order); err != nil {
				t.Fatalf("Bind: %v", err)
			}
		}
		if id, ok, err := s.Store.Bound(s.ctx, s.tenant, order.OperationAmend, rid); err != nil || !ok || id != s.order {
			t.Errorf("Bound = %s, %v, %v; want order %s", id, ok, err, s.order)
		}
		if _, ok, err := s.Store.Bound(s.ctx, s.tenant, order.OperationCancel, rid); err != nil || ok {
			t.Errorf("Bound under another operation = %v, %v; want none", ok, err)
		}
	}},
	{"Bind/Bound: faults", func(t *testing.T, s *suite) {
		rid := uuid.New()
		s.Arm(versions.StmtBind, cassandra.FaultUnavailable, 1)
		wantKind(t, s.Store.Bind(s.ctx, s.tenant, order.OperationAmend, rid, s.order), fault.Unavailable)
		if _, ok, _ := s.Store.Bound(s.ctx, s.tenant, order.OperationAmend, rid); ok {
			t.Error("a Bind refused as unavailable was written")
		}
		s.Arm(versions.StmtBind, cassandra.FaultLoseResponse, 1)
		if err := s.Store.Bind(s.ctx, s.tenant, order.OperationAmend, rid, s.order); err == nil {
			t.Error("Bind with its response lost = nil, want an error")
		}
		if id, ok, _ := s.Store.Bound(s.ctx, s.tenant, order.OperationAmend, rid); !ok || id != s.order {
			t.Errorf("after a Bind whose response was lost: Bound = %s, %v; want it written", id, ok)
		}
		s.Arm(versions.StmtBound, cassandra.FaultUnavailable, 1)
		if _, _, err := s.Store.Bound(s.ctx, s.tenant, order.OperationAmend, rid); fault.KindOf(err) != fault.Unavailable {
			t.Errorf("Bound with the read failing = %v, want Unavailable", err)
		}
	}},
	{"Lookup/none for an order never changed or a change never decided", func(t *testing.T, s *suite) {
		a := s.change(order.OperationAmend, 1, "a")
		s.wantLookup(t, a, nil)
		s.accepted(t, a)
		s.wantLookup(t, s.change(order.OperationAmend, 2, "b"), nil)
	}},
	{"Lookup/read failure: Unavailable", func(t *testing.T, s *suite) {
		s.Arm(versions.StmtLookup, cassandra.FaultUnavailable, 1)
		_, _, err := s.Store.Lookup(s.ctx, s.tenant, s.order, uuid.New())
		wantKind(t, err, fault.Unavailable)
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
