package limit

import (
	"testing"
	"time"

	"github.com/atlasmart/orderd/internal/domain/fault"
)

func TestTenantsLimitEachTenantAndBudgetApart(t *testing.T) {
	clock := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	l := New(Config{Attempts: 2, Replays: 3, Now: func() time.Time { return clock }})

	for i := range 2 {
		if err := l.Attempt("a"); err != nil {
			t.Fatalf("attempt %d within the burst: %v", i, err)
		}
	}
	err := l.Attempt("a")
	fe, ok := fault.As(err)
	if !ok || fe.Reason != fault.ReasonRateLimited || fe.Kind != fault.Limited || fe.RetryAfter <= 0 || fe.RetryAfter > time.Second {
		t.Fatalf("third attempt in the same instant = %v, want RATE_LIMITED with a retry delay up to 1 s", err)
	}
	if err := l.Attempt("b"); err != nil {
		t.Errorf("another tenant's attempt: %v, want admitted", err)
	}
	if err := l.Read("a"); err != nil {
		t.Errorf("a read of tenant a (unlimited here) while its attempts are spent: %v", err)
	}
	for i := range 3 {
		if err := l.Replay("a"); err != nil {
			t.Errorf("replay %d of tenant a (its own budget): %v", i, err)
		}
	}
	if err := l.Replay("a"); err == nil {
		t.Error("fourth replay in the same instant admitted, want RATE_LIMITED")
	}

	clock = clock.Add(fe.RetryAfter)
	if err := l.Attempt("a"); err != nil {
		t.Errorf("attempt after the advertised delay: %v, want admitted (a refusal spends no token)", err)
	}
}

func TestZeroRateIsUnlimited(t *testing.T) {
	l := New(Config{})
	for range 10_000 {
		if l.Attempt("a") != nil || l.Replay("a") != nil || l.Read("a") != nil {
			t.Fatal("a zero rate refused a call")
		}
	}
}
