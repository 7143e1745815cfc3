package workflow

import (
	"context"
	"testing"

	"github.com/atlasmart/orderd/internal/adapters/limit"
	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/ledger"
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
