package workflow

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/ledger"
)

// fakeObserver records what the workflow reports.
type fakeObserver struct {
	mu       sync.Mutex
	outcomes []Outcome
	changes  []string // operation/outcome
	ages     []time.Duration
	cached   int
	skipped  int
}

var _ Observer = (*fakeObserver)(nil)

func (o *fakeObserver) CreateOutcome(out Outcome) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.outcomes = append(o.outcomes, out)
}

func (o *fakeObserver) ChangeOutcome(op string, out Outcome) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.changes = append(o.changes, op+"/"+string(out))
}

func (o *fakeObserver) RetryAge(age time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ages = append(o.ages, age)
}

func (o *fakeObserver) ReplayCached() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.cached++
}

func (o *fakeObserver) BackgroundSkipped() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.skipped++
}

func (o *fakeObserver) seen() ([]Outcome, []time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.outcomes), slices.Clone(o.ages)
}

func TestObserverSeesNewReplayedConflict(t *testing.T) {
	obs := &fakeObserver{}
	f := newFixture(t, Config{Observer: obs}, nil)
	ctx := context.Background()

	first, err := f.svc.CreateOrder(ctx, testTenant, baseInput())
	if err != nil || first.Outcome != OutcomeNew {
		t.Fatalf("first attempt: outcome %q, err %v; want new", first.Outcome, err)
	}
	f.clock.Advance(90 * time.Second)
	retry, err := f.svc.CreateOrder(ctx, testTenant, sameInputOtherSpelling())
	if err != nil || retry.Outcome != OutcomeReplayed {
		t.Fatalf("retry: outcome %q, err %v; want replayed", retry.Outcome, err)
	}
	f.clock.Advance(time.Hour)
	other := baseInput()
	other.Total, other.Lines = "99.70", nil
	_, err = f.svc.CreateOrder(ctx, testTenant, other)
	wantFault(t, err, fault.Conflict)
	if got := OutcomeOf(err); got != OutcomeConflict {
		t.Errorf("OutcomeOf(conflict) = %q, want conflict", got)
	}

	outcomes, ages := obs.seen()
	if want := []Outcome{OutcomeNew, OutcomeReplayed, OutcomeConflict}; !slices.Equal(outcomes, want) {
		t.Errorf("outcomes = %v, want %v", outcomes, want)
	}
	// Only the retry of the same command is a retry; the conflict is not.
	if want := []time.Duration{90 * time.Second}; !slices.Equal(ages, want) {
		t.Errorf("retry ages = %v, want %v", ages, want)
	}
}

func TestObserverSeesInvalidTakeoverAndUnavailable(t *testing.T) {
	obs := &fakeObserver{}
	f := newFixture(t, Config{Observer: obs}, nil)
	ctx := context.Background()

	bad := baseInput()
	bad.RequestID = "not-a-uuid"
	if _, err := f.svc.CreateOrder(ctx, testTenant, bad); err == nil {
		t.Fatal("invalid input accepted")
	}

	f.proj.FailNext(1)
	if _, err := f.svc.CreateOrder(ctx, testTenant, baseInput()); fault.KindOf(err) != fault.Unavailable {
		t.Fatalf("first attempt with a failing projection: %v, want Unavailable", err)
	}
	if rec := onlyRecord(t, f.led); rec.State != ledger.Pending {
		t.Fatalf("state after the failed attempt = %s, want PENDING", rec.State)
	}
	f.clock.Advance(2 * time.Second) // past TakeoverAfter
	res, err := f.svc.CreateOrder(ctx, testTenant, baseInput())
	if err != nil || res.Outcome != OutcomeTakeover || !res.Replayed {
		t.Fatalf("retry of a PENDING request: outcome %q replayed %v err %v; want takeover", res.Outcome, res.Replayed, err)
	}

	outcomes, _ := obs.seen()
	if want := []Outcome{OutcomeInvalid, OutcomeUnavailable, OutcomeTakeover}; !slices.Equal(outcomes, want) {
		t.Errorf("outcomes = %v, want %v", outcomes, want)
	}
}

func TestNilObserverIsSafe(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	if _, err := f.svc.CreateOrder(context.Background(), testTenant, baseInput()); err != nil {
		t.Fatal(err)
	}
}
