package workflow

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/adapters/outbox"
	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/platform/failpoint"
	"github.com/atlasmart/orderd/ledger"
)

// A change request's outcome outlives the ledger's retention: what a
// request id was answered first is what it is answered for as long as the
// order exists.

// expire moves past the ledger's retention: every claim and receipt of
// the requests so far is gone.
func (f *changeFixture) expire(t *testing.T, in order.ChangeInput) {
	t.Helper()
	f.clock.Advance(8 * 24 * time.Hour)
	key := ledger.Key{Tenant: testTenant, Operation: in.Operation, RequestID: uuid.MustParse(in.RequestID)}
	if _, ok := f.led.Record(key); ok {
		t.Fatal("the ledger row outlived its retention")
	}
}

// An accepted change's request id sent again after its ledger row expired,
// with another change (another expected version, another note) or the
// same: REQUEST_ID_REUSED, or the replay of the first change. Never a
// second version or a second event under the first change's id.
func TestChangeRequestIDReusedAfterRetentionKeepsItsFirstOutcome(t *testing.T) {
	f := newChangeFixture(t, nil)
	in := f.amend(1, "first")
	first := f.change(t, in)
	events := len(f.pub.Records())
	f.expire(t, in)

	for _, other := range []order.ChangeInput{
		func() order.ChangeInput { o := in; o.ExpectedVersion, o.ShippingNote = 2, "second"; return o }(),
		func() order.ChangeInput { o := in; o.ShippingNote = "second"; return o }(),
	} {
		_, err := f.svc.ChangeOrder(context.Background(), testTenant, other)
		f.svc.Wait()
		if fe := wantFault(t, err, fault.Conflict); fe.Reason != fault.ReasonRequestIDReused {
			t.Errorf("reuse from version %d: reason %s, want REQUEST_ID_REUSED", other.ExpectedVersion, fe.Reason)
		}
	}
	again := f.change(t, in)
	if !again.Replayed || again.Change != first.Change {
		t.Errorf("the same change again = %+v, want the replay of %+v", again, first.Change)
	}
	if cur := f.current(t); cur.Version != 2 || cur.ShippingNote != "first" {
		t.Errorf("order = version %d note %q, want 2 %q", cur.Version, cur.ShippingNote, "first")
	}
	if h := f.history(t); len(h) != 1 {
		t.Errorf("history = %+v, want the first change only", h)
	}
	if n := len(f.pub.Records()); n != events {
		t.Errorf("published %d events after the reuse, want none", n-events)
	}
}

// A change refused STALE_VERSION because its expected version was ahead of
// the order stays refused after its receipt expired, once the order has
// grown to that version: the same answer, nothing applied.
func TestStaleChangeAheadOfTheOrderStaysStaleAfterRetention(t *testing.T) {
	f := newChangeFixture(t, nil)
	in := f.amend(3, "ahead")
	_, err := f.svc.ChangeOrder(context.Background(), testTenant, in)
	f.svc.Wait()
	wantConflict(t, err, fault.Stale, "1")
	f.upTo(t, 3)
	events := len(f.pub.Records())
	f.expire(t, in)

	_, err = f.svc.ChangeOrder(context.Background(), testTenant, in)
	f.svc.Wait()
	wantConflict(t, err, fault.Stale, "1")
	if cur := f.current(t); cur.Version != 3 || cur.ShippingNote == "ahead" {
		t.Errorf("order = version %d note %q, want 3 and not the refused note", cur.Version, cur.ShippingNote)
	}
	if n := len(f.pub.Records()); n != events {
		t.Errorf("published %d events after the redelivery, want none", n-events)
	}
	// The same request id with another change is a reuse.
	other := in
	other.ShippingNote = "other"
	_, err = f.svc.ChangeOrder(context.Background(), testTenant, other)
	if fe := wantFault(t, err, fault.Conflict); fe.Reason != fault.ReasonRequestIDReused {
		t.Errorf("reason %s, want REQUEST_ID_REUSED", fe.Reason)
	}
}

// A change accepted under one claim and finished under a later one (the
// first attempt died after the version check, the ledger forgot it, the
// client retried) is projected and published as it was accepted: with the
// time the version row holds, not the later claim's. Projected with the
// later claim's time, its cells would tie at one write time with another
// finisher's cells of different values. And it is answered as the replay it
// is, as a retry within the retention would be.
func TestChangeFinishedUnderALaterClaimKeepsItsAcceptedTime(t *testing.T) {
	f := newChangeFixture(t, failpointsOrDie(t, failpoint.AfterVersion+"=error*1"))
	in := f.amend(1, "accepted once")
	if _, err := f.svc.ChangeOrder(context.Background(), testTenant, in); err == nil {
		t.Fatal("the first attempt passed its failpoint")
	}
	f.svc.Wait()
	h := f.history(t)
	if len(h) != 1 {
		t.Fatalf("history after the first attempt = %+v, want the accepted change", h)
	}
	accepted := h[0]
	f.expire(t, in)

	res := f.change(t, in)
	if !res.Replayed || res.Outcome != OutcomeReplayed {
		// The change was accepted before: a retry of it is a replay,
		// within the retention (a takeover) or after it, as here.
		t.Errorf("retry of the accepted change answered replayed %v, outcome %s; want a replay", res.Replayed, res.Outcome)
	}
	if !res.Change.At.Equal(accepted.At) || res.Change != accepted {
		t.Errorf("answer's change = %+v, want the one accepted %+v", res.Change, accepted)
	}
	if cur := f.current(t); !cur.UpdatedAt.Equal(accepted.At) || cur.Version != 2 {
		t.Errorf("order = version %d updated %s, want version 2 updated at the acceptance, %s", cur.Version, cur.UpdatedAt, accepted.At)
	}
	var published []time.Time
	for _, r := range f.pub.Records() {
		ev, err := outbox.Decode(r)
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetOrderVersion() == 2 {
			published = append(published, ev.GetOccurredAt().AsTime())
		}
	}
	if len(published) != 1 || !published[0].Equal(accepted.At) {
		t.Errorf("version 2's events occurred at %v, want one at the acceptance, %s", published, accepted.At)
	}
}

// An amendment accepted by a finisher that died before projecting it, then
// a cancel based on it: the cancel's finisher projects the amendment first,
// so the order row never shows version 3 without version 2's note. (The
// robustness suite found reads of a cancelled order at version 3 with no
// note, while version 2 had set one.)
func TestAChangeProjectsTheAcceptedChangesBeforeIt(t *testing.T) {
	f := newChangeFixture(t, failpointsOrDie(t, failpoint.AfterVersion+"=error*1"))
	if _, err := f.svc.ChangeOrder(context.Background(), testTenant, f.amend(1, "leave at the door")); err == nil {
		t.Fatal("the amendment passed its failpoint")
	}
	f.svc.Wait()
	if cur := f.current(t); cur.Version != 1 {
		t.Fatalf("order after the amendment's finisher died = version %d, want 1 (not projected)", cur.Version)
	}
	res := f.change(t, f.cancel(2))
	if res.Change.Version != 3 {
		t.Fatalf("cancel = %+v, want version 3", res.Change)
	}
	cur := f.current(t)
	if cur.Version != 3 || cur.Status != order.StatusCancelled || cur.ShippingNote != "leave at the door" {
		t.Errorf("order = version %d %s note %q, want version 3 CANCELLED with version 2's note", cur.Version, cur.Status, cur.ShippingNote)
	}
	if res.Order.ShippingNote != "leave at the door" {
		t.Errorf("the cancel's answer shows note %q, want version 2's", res.Order.ShippingNote)
	}
}
