package workflow

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/ledger"
	"github.com/atlasmart/orderd/projection"
)

// storeCalls counts the calls a duplicate could make of the stores: of the
// ledger, a claim's statements (its entry first: a claim whose check
// failed sends only that) and a read's (Get or Peek). Releases, which run
// in the background, are not counted.
func storeCalls(f *fixture) int {
	n := 0
	for _, stmt := range []cassandra.Stmt{ledger.StmtEnqueue, ledger.StmtClaim, ledger.StmtGet} {
		n += len(f.led.Statements(stmt))
	}
	return n + f.proj.Sent(projection.StmtGetOrder)
}

func TestReplayCacheAnswersDuplicatesWithoutTheLedger(t *testing.T) {
	obs := &fakeObserver{}
	f := newFixture(t, Config{Observer: obs}, nil)
	ctx := context.Background()
	first, err := f.svc.CreateOrder(ctx, testTenant, baseInput())
	if err != nil {
		t.Fatal(err)
	}
	before := storeCalls(f)

	f.clock.Advance(3 * time.Second)
	again, err := f.svc.CreateOrder(ctx, testTenant, sameInputOtherSpelling())
	if err != nil || !again.Replayed || again.Outcome != OutcomeReplayed || !reflect.DeepEqual(again.Order, first.Order) {
		t.Fatalf("duplicate: %+v, %v; want the first order replayed", again, err)
	}
	other := baseInput()
	other.Total, other.Lines = "1.00", nil
	_, err = f.svc.CreateOrder(ctx, testTenant, other)
	if fe := wantFault(t, err, fault.Conflict); fe.Reason != fault.ReasonRequestIDReused {
		t.Fatalf("reused request id: reason %s, want REQUEST_ID_REUSED", fe.Reason)
	}
	if n := storeCalls(f) - before; n != 0 {
		t.Errorf("the duplicate and the reuse made %d store calls, want none", n)
	}
	outcomes, ages := obs.seen()
	if obs.cached != 1 || len(ages) != 1 || ages[0] != 3*time.Second {
		t.Errorf("observer: %d cached replays, retry ages %v; want 1 and [3s]", obs.cached, ages)
	}
	if want := []Outcome{OutcomeNew, OutcomeReplayed, OutcomeConflict}; !reflect.DeepEqual(outcomes, want) {
		t.Errorf("outcomes %v, want %v", outcomes, want)
	}
}

// Only a recorded outcome is cached: an attempt that failed leaves nothing,
// so its retry goes to the ledger and finishes the work.
func TestReplayCacheHoldsOnlyRecordedOutcomes(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	ctx := context.Background()
	f.proj.FailNext(1)
	if _, err := f.svc.CreateOrder(ctx, testTenant, baseInput()); fault.KindOf(err) != fault.Unavailable {
		t.Fatalf("first attempt: %v, want Unavailable", err)
	}
	if _, ok := f.svc.replays.get(testKey(t)); ok {
		t.Fatal("a failed attempt was cached")
	}
	f.clock.Advance(2 * time.Second)
	res, err := f.svc.CreateOrder(ctx, testTenant, baseInput())
	if err != nil || res.Outcome != OutcomeTakeover {
		t.Fatalf("retry: %+v, %v; want a takeover", res, err)
	}
	if hit, ok := f.svc.replays.get(testKey(t)); !ok || !reflect.DeepEqual(hit.order, res.Order) {
		t.Fatalf("after the takeover the cache holds %+v (%v), want its order", hit, ok)
	}
}

func TestReplayCacheDisabledReadsTheRecordedOrder(t *testing.T) {
	f := newFixture(t, Config{ReplayCacheSize: -1}, nil)
	ctx := context.Background()
	if _, err := f.svc.CreateOrder(ctx, testTenant, baseInput()); err != nil {
		t.Fatal(err)
	}
	res, err := f.svc.CreateOrder(ctx, testTenant, baseInput())
	if err != nil || res.Outcome != OutcomeReplayed {
		t.Fatalf("duplicate: %+v, %v", res, err)
	}
	if n := f.proj.Sent(projection.StmtGetOrder); n != 2 {
		t.Errorf("%d reads of the order row, want 2: the duplicate must read the recorded order", n)
	}
}
