// Package storetest holds the store's contract (Run) and the in-memory store
// the consumer's unit tests use in its place (Memory). Run runs unchanged
// against store.Cassandra on the real cluster (e2e/orderconsumer_test.go)
// and against Memory (memory_test.go): the fake earns its place only by
// passing the same suite.
package storetest

import (
	"context"
	"fmt"
	"sync"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/tools/orderconsumer/store"
)

// The operations Fail takes, by the store method they fail.
const (
	OpRecordEvent = "RecordEvent"
	OpUpsertOrder = "UpsertOrder"
)

// Fault is how one call fails, as the real store's calls fail.
type Fault int

const (
	// Refused: ErrNotApplied, nothing written (no replica was reached).
	Refused Fault = iota + 1
	// TimedOut: ErrOutcomeUnknown, nothing written (the write never landed).
	TimedOut
	// LostResponse: ErrOutcomeUnknown, but written (the answer was lost).
	LostResponse
)

// Memory is the store in memory. Like store.Cassandra it keeps times in UTC
// to the millisecond, and a call with an ended context fails as a timeout
// does: ErrOutcomeUnknown, nothing written.
type Memory struct {
	mu     sync.Mutex
	events map[uuid.UUID]store.InboxEntry
	orders map[uuid.UUID]store.Order
	faults map[string][]Fault // queued per operation, first one next
}

// NewMemory returns an empty store.
func NewMemory() *Memory {
	return &Memory{events: map[uuid.UUID]store.InboxEntry{}, orders: map[uuid.UUID]store.Order{}, faults: map[string][]Fault{}}
}

// Fail makes the next call of op fail with f; faults queue up in order.
func (m *Memory) Fail(op string, f Fault) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.faults[op] = append(m.faults[op], f)
}

// RecordEvent implements the store's RecordEvent.
func (m *Memory) RecordEvent(ctx context.Context, e store.InboxEntry) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.write(ctx, OpRecordEvent, func() bool {
		if _, ok := m.events[e.EventID]; ok {
			return false
		}
		m.events[e.EventID] = e.Stored()
		return true
	})
}

// UpsertOrder implements the store's UpsertOrder.
func (m *Memory) UpsertOrder(ctx context.Context, o store.Order) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.write(ctx, OpUpsertOrder, func() bool {
		if cur, ok := m.orders[o.OrderID]; ok && cur.Version >= o.Version {
			return false
		}
		m.orders[o.OrderID] = o.Stored()
		return true
	})
}

// write runs apply unless a fault or an ended context says otherwise.
// m.mu is held.
func (m *Memory) write(ctx context.Context, op string, apply func() bool) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("%s: %w: %w", op, store.ErrOutcomeUnknown, err)
	}
	if len(m.faults[op]) == 0 {
		return apply(), nil
	}
	f := m.faults[op][0]
	m.faults[op] = m.faults[op][1:]
	switch f {
	case Refused:
		return false, fmt.Errorf("%s: %w: injected", op, store.ErrNotApplied)
	case LostResponse:
		apply()
	}
	return false, fmt.Errorf("%s: %w: injected", op, store.ErrOutcomeUnknown)
}

// Event implements store.Cassandra's Event.
func (m *Memory) Event(_ context.Context, eventID uuid.UUID) (store.InboxEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.events[eventID]
	if !ok {
		return store.InboxEntry{}, fmt.Errorf("read event %s: %w", eventID, store.ErrNotFound)
	}
	return e, nil
}

// Order implements store.Cassandra's Order.
func (m *Memory) Order(_ context.Context, orderID uuid.UUID) (store.Order, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.orders[orderID]
	if !ok {
		return store.Order{}, fmt.Errorf("read order %s: %w", orderID, store.ErrNotFound)
	}
	return o, nil
}
