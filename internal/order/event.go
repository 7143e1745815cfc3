package order

import (
	"time"

	"github.com/google/uuid"
)

// Event is one event of an order: what happened, and the order as it is
// right after it. Every field derives from stored rows, so every publisher
// of one event (the handler, a takeover, the reconciler) builds the same.
type Event struct {
	// ID is stable per event: the creating request's id for
	// ORDER_CREATED, the change's id for a change.
	ID   uuid.UUID
	Type string // EventOrderCreated, EventOrderCancelled, EventOrderAmended
	// Order is the order at Order.Version, the version this event made.
	Order Order
	// RequestID is the request that caused the event.
	RequestID uuid.UUID
	// At is when it happened: the creation's or the change's claim time.
	At time.Time
}

// CreatedEvent is o's ORDER_CREATED event (o as created).
func CreatedEvent(o Order) Event {
	o = o.AsCreated()
	return Event{ID: o.RequestID, Type: EventOrderCreated, Order: o, RequestID: o.RequestID, At: o.CreatedAt}
}

// ChangedEvent is the event of c, an accepted change; o is the order as c
// left it (Order.At its history up to c.Version).
func ChangedEvent(o Order, c Change) Event {
	return Event{ID: c.ID, Type: c.EventType(), Order: o, RequestID: c.RequestID, At: c.At}
}
