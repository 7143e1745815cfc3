package workflow

import (
	"context"
	"testing"

	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/ledger"
)

// Requeue answers the request as Get shows it, whatever the ledger's row
// says: a finished create (its row still PENDING) is COMPLETE, a
// dead-lettered one is PENDING again with no attempts. The gRPC
// RequeueRequest and `orderd requeue` both run it (cmd/orderd's
// TestRequeueCommandAnswersAsRequeueRequest).
func TestRequeueAnswersAsGetRequest(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, Config{}, nil)
	reqs := NewRequests(f.svc, f.led)
	if !reqs.Operable() {
		t.Fatal("Requests over a ledger is not operable")
	}

	res, err := f.svc.CreateOrder(ctx, testTenant, baseInput())
	if err != nil {
		t.Fatal(err)
	}
	f.svc.Wait()
	if raw := onlyRecord(t, f.led); raw.State != ledger.Pending {
		t.Fatalf("a finished create's ledger row is %s, want PENDING (the premise of this test)", raw.State)
	}
	got, err := reqs.Requeue(ctx, testTenant, res.Order.RequestID)
	if err != nil {
		t.Fatalf("Requeue of a finished create: %v", err)
	}
	want, err := reqs.Get(ctx, testTenant, order.OperationCreate, res.Order.RequestID)
	if err != nil {
		t.Fatal(err)
	}
	if got != want || got.State != RequestComplete || got.OrderID != res.Order.ID {
		t.Errorf("Requeue of a finished create = %+v\nwant Get's view, COMPLETE: %+v", got, want)
	}

	// A dead-lettered request: its command cannot be read, nothing written.
	g := newFixture(t, Config{}, nil)
	reqs = NewRequests(g.svc, g.led)
	rec := recordFor(t, g.svc, baseInput(), claimTime, ledger.Pending)
	rec.Command = []byte("not a command")
	if won, _, err := g.led.Claim(ctx, rec, nil); err != nil || !won {
		t.Fatalf("Claim = %v, %v", won, err)
	}
	if _, err := g.led.MarkFailed(ctx, rec, string(fault.ReasonCommandUnreadable)); err != nil {
		t.Fatal(err)
	}
	got, err = reqs.Requeue(ctx, testTenant, rec.RequestID)
	if err != nil {
		t.Fatalf("Requeue of a dead-lettered request: %v", err)
	}
	want, err = reqs.Get(ctx, testTenant, order.OperationCreate, rec.RequestID)
	if err != nil {
		t.Fatal(err)
	}
	if got != want || got.State != RequestPending || got.Attempts != 0 {
		t.Errorf("Requeue of a dead-lettered request = %+v\nwant Get's view, PENDING with no attempts: %+v", got, want)
	}

	if NewRequests(f.svc, nil).Operable() {
		t.Error("Requests without a ledger says it is operable")
	}
}
