package workflow

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/adapters/limit"
	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/ledger"
	"github.com/atlasmart/orderd/projection"
)

// Over its rate, a tenant's new request is refused RATE_LIMITED before
// anything is written (no entry, no claim), and a replay from the cache is
// refused against its own budget; the refusals are observed as "limited".
func TestAdmissionRefusesBeforeAnythingIsWritten(t *testing.T) {
	obs := &fakeObserver{}
	f := newFixture(t, Config{Observer: obs}, nil)
	// The fixture's clock stands still: every call is in the same instant.
	f.svc.cfg.Admission = limit.New(limit.Config{Attempts: 1, Replays: 1, Now: f.clock.Now})
	if _, err := f.svc.CreateOrder(context.Background(), testTenant, baseInput()); err != nil {
		t.Fatalf("first request: %v", err)
	}
	f.svc.Wait()
	enqueued, claims := len(f.led.Statements(ledger.StmtEnqueue)), len(f.led.Statements(ledger.StmtClaim))

	other := baseInput()
	other.RequestID = "17000000-0000-0000-0000-000000000777"
	_, err := f.svc.CreateOrder(context.Background(), testTenant, other)
	if fe := wantFault(t, err, fault.Limited); fe.Reason != fault.ReasonRateLimited || fe.RetryAfter <= 0 {
		t.Fatalf("second new request in the same second = %v, want RATE_LIMITED with a retry delay", err)
	}
	if n, m := len(f.led.Statements(ledger.StmtEnqueue)), len(f.led.Statements(ledger.StmtClaim)); n != enqueued || m != claims {
		t.Errorf("a refused request wrote: entries %d → %d, claims %d → %d", enqueued, n, claims, m)
	}

	if _, err := f.svc.CreateOrder(context.Background(), testTenant, baseInput()); err != nil {
		t.Fatalf("first replay (from the cache, its own budget): %v", err)
	}
	_, err = f.svc.CreateOrder(context.Background(), testTenant, baseInput())
	wantFault(t, err, fault.Limited)
	outcomes, _ := obs.seen()
	if n := countOf(outcomes, OutcomeLimited); n != 2 {
		t.Errorf("limited outcomes observed = %d (%v), want 2", n, outcomes)
	}
}

func countOf(outcomes []Outcome, o Outcome) int {
	n := 0
	for _, x := range outcomes {
		if x == o {
			n++
		}
	}
	return n
}

// Over its read rate, a tenant's reads (GetOrder, a listing's call,
// GetRequest, ListRequests) are refused RATE_LIMITED before anything is
// read; another tenant's reads are admitted against its own budget.
func TestReadAdmissionRefusesBeforeAnythingIsRead(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	adm := limit.New(limit.Config{Reads: 1, Now: f.clock.Now}) // writes unlimited
	f.svc.cfg.Admission = adm
	created, err := f.svc.CreateOrder(context.Background(), testTenant, baseInput())
	if err != nil {
		t.Fatal(err)
	}
	f.svc.Wait()
	orders, requests := NewOrders(f.proj, adm), NewRequests(f.svc, f.led)
	ctx := context.Background()
	if _, err := orders.Get(ctx, testTenant, created.Order.ID); err != nil {
		t.Fatalf("first read: %v", err)
	}
	orderReads, ledgerReads := f.proj.Sent(projection.StmtGetOrder)+f.proj.Sent(projection.StmtCustomerOrders),
		len(f.led.Statements(ledger.StmtGet))+len(f.led.Statements(ledger.StmtScan))
	reqID := uuid.MustParse(baseInput().RequestID)
	for name, read := range map[string]func() error{
		"GetOrder": func() error { _, err := orders.Get(ctx, testTenant, created.Order.ID); return err },
		"ListCustomerOrders": func() error {
			_, err := orders.CustomerOrders(ctx, testTenant, "c", MonthPosition{Month: created.Order.CreatedAt, Start: created.Order.CreatedAt}, 10, 1)
			return err
		},
		"GetRequest": func() error { _, err := requests.Get(ctx, testTenant, order.OperationCreate, reqID); return err },
		"ListRequests": func() error {
			_, err := requests.List(ctx, testTenant, []RequestState{RequestPending}, 10, nil)
			return err
		},
	} {
		if fe := wantFault(t, read(), fault.Limited); fe.Reason != fault.ReasonRateLimited || fe.RetryAfter <= 0 {
			t.Errorf("%s over the rate: %v, want RATE_LIMITED with a retry delay", name, fe)
		}
	}
	if o, l := f.proj.Sent(projection.StmtGetOrder)+f.proj.Sent(projection.StmtCustomerOrders),
		len(f.led.Statements(ledger.StmtGet))+len(f.led.Statements(ledger.StmtScan)); o != orderReads || l != ledgerReads {
		t.Errorf("refused reads read: order reads %d → %d, ledger reads %d → %d", orderReads, o, ledgerReads, l)
	}
	if _, err := orders.Get(ctx, "another-tenant", created.Order.ID); fault.KindOf(err) != fault.NotFound {
		t.Errorf("another tenant's read: %v, want admitted (NOT_FOUND: not its order)", err)
	}
}
