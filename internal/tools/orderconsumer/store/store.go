package store

import (
	"errors"
	"time"

	"github.com/google/uuid"
)

// Errors the store returns, wrapped with the operation and the driver's error.
var (
	// ErrNotFound: no row with that key.
	ErrNotFound = errors.New("not found")
	// ErrOutcomeUnknown: the write may or may not have applied (a timeout, a
	// lost connection). Run the same call again to learn which.
	ErrOutcomeUnknown = errors.New("outcome unknown")
	// ErrNotApplied: the write certainly did not apply (no replicas
	// available, no connection); safe to retry.
	ErrNotApplied = errors.New("not applied")
)

// InboxEntry is one event the consumer has seen, keyed by its event id.
type InboxEntry struct {
	EventID      uuid.UUID
	OrderID      uuid.UUID
	OrderVersion int64
	EventType    string // the OrderEventType name, e.g. ORDER_EVENT_TYPE_CREATED
	// Where the first application read the event (later copies may come
	// from other offsets).
	Topic      string
	Partition  int32
	Offset     int64
	OccurredAt time.Time // when orderd accepted the change
	AppliedAt  time.Time // when the consumer first recorded it
}

// Order is the consumer's view of an order at one version.
type Order struct {
	OrderID     uuid.UUID
	Version     int64
	Tenant      string
	CustomerID  string
	Status      string // the OrderStatus name, e.g. ORDER_STATUS_CREATED
	Total       string // decimal, as in the event
	Currency    string
	LastEventID uuid.UUID // the event that wrote this version
	UpdatedAt   time.Time
}

// Stored normalises times as Cassandra stores them (UTC, whole
// milliseconds), so a value read back equals the value written this way.
func (e InboxEntry) Stored() InboxEntry {
	e.OccurredAt, e.AppliedAt = storedTime(e.OccurredAt), storedTime(e.AppliedAt)
	return e
}

// Stored is InboxEntry.Stored for an order.
func (o Order) Stored() Order {
	o.UpdatedAt = storedTime(o.UpdatedAt)
	return o
}

func storedTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Truncate(time.Millisecond)
}
