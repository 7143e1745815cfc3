package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/atlasmart/orderd/internal/tools/orderconsumer/store"
)

func TestMemoryContract(t *testing.T) {
	Run(t, func(*testing.T) Store { return NewMemory() })
}

// Faults fail one call each, in the order they were queued, with the
// errors and effects the real store's failures have.
func TestMemoryFaults(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	m.Fail(OpRecordEvent, Refused)
	m.Fail(OpRecordEvent, TimedOut)
	m.Fail(OpRecordEvent, LostResponse)
	e := Entry()
	for _, want := range []error{store.ErrNotApplied, store.ErrOutcomeUnknown, store.ErrOutcomeUnknown} {
		if _, err := m.RecordEvent(ctx, e); !errors.Is(err, want) {
			t.Fatalf("RecordEvent: %v, want %v", err, want)
		}
	}
	// Only the lost response wrote the row: the next call is a duplicate.
	if first, err := m.RecordEvent(ctx, e); first || err != nil {
		t.Fatalf("RecordEvent after a lost response = %v, %v; want a duplicate", first, err)
	}

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	o := OrderAt(e.OrderID, 1)
	if _, err := m.UpsertOrder(canceled, o); !errors.Is(err, store.ErrOutcomeUnknown) {
		t.Fatalf("UpsertOrder with an ended context: %v, want ErrOutcomeUnknown", err)
	}
	if _, err := m.Order(ctx, o.OrderID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("order after a failed upsert: %v, want ErrNotFound", err)
	}
}
