package reconciler

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/stores/leases"
	"github.com/atlasmart/orderd/internal/stores/leases/leasestest"
)

// An operation is accepted only while every live reconciler says it
// finishes it: one older instance (whose heartbeats say nothing) holds it
// back until it leaves or its membership lapses; no live reconciler at all
// holds back nothing. A read is reused for the TTL, and a failed read is an
// error, never a yes.
func TestFleetFinishesOnlyWhatEveryLiveInstanceSays(t *testing.T) {
	clock := newFakeClock(t0)
	coord := leasestest.NewMemoryCoordinator(clock.Now)
	fleet := NewFleet(coord, 5*time.Second)
	fleet.now = clock.Now
	ctx := context.Background()
	const op = "AMEND_ORDER"

	if err := fleet.Finishes(ctx, op); err != nil {
		t.Fatalf("no live reconciler: Finishes = %v, want nil", err)
	}

	newer, older := uuid.New(), uuid.New()
	if _, err := coord.Advertising("CREATE_ORDER", op).Heartbeat(ctx, newer, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	clock.Advance(6 * time.Second) // past the cached read
	if err := fleet.Finishes(ctx, op); err != nil {
		t.Fatalf("every live instance says it finishes %s: Finishes = %v", op, err)
	}
	if err := fleet.Finishes(ctx, "SPLIT_ORDER"); fault.ReasonOf(err) != fault.ReasonOperationNotEnabled {
		t.Errorf("an operation no instance finishes: Finishes = %v, want OPERATION_NOT_ENABLED", err)
	}

	if _, err := coord.Heartbeat(ctx, older, 15*time.Second); err != nil { // says nothing: an older release
		t.Fatal(err)
	}
	if err := fleet.Finishes(ctx, op); err != nil {
		t.Errorf("within the cached read's TTL: Finishes = %v, want the cached yes", err)
	}
	clock.Advance(6 * time.Second)
	err := fleet.Finishes(ctx, op)
	if fault.ReasonOf(err) != fault.ReasonOperationNotEnabled || fault.KindOf(err) != fault.Unavailable {
		t.Fatalf("an older instance is live: Finishes = %v, want OPERATION_NOT_ENABLED (Unavailable)", err)
	}

	coord.Arm(leases.StmtMemberOps, cassandra.FaultUnavailable, 1)
	clock.Advance(6 * time.Second)
	if err := fleet.Finishes(ctx, op); err == nil || fault.ReasonOf(err) == fault.ReasonOperationNotEnabled {
		t.Errorf("members unreadable: Finishes = %v, want the read's error", err)
	}

	if err := coord.Leave(ctx, older); err != nil {
		t.Fatal(err)
	}
	if err := fleet.Finishes(ctx, op); err != nil {
		t.Errorf("the older instance left: Finishes = %v, want nil", err)
	}
}
