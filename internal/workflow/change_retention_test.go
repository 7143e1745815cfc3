package workflow

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/fault"
	"github.com/atlasmart/orderd/internal/order"
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
