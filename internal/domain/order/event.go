package order

import (
	"time"

	"github.com/google/uuid"
)

// Event is one event of an order: what happened, and the order as it is
// right after it. Every field derives from stored rows, so every publisher
// of one event (the handler, a takeover, the reconciler) builds the same.
type Event struct {
	// ID is stable per event and unique across tenants: EventID of the
	// tenant, the operation and the request id that caused it (for a
	// change, its change id).
	ID   uuid.UUID
	Type string // EventOrderCreated, EventOrderCancelled, EventOrderAmended
	// Order is the order at Order.Version, the version this event made.
	Order Order
	// RequestID is the request that caused the event.
	RequestID uuid.UUID
	// At is when it happened: the creation's or the change's claim time.
	At time.Time
}

// eventNamespace is the UUIDv5 namespace of event ids (and so of change ids).
var eventNamespace = uuid.MustParse("2b1f6c0e-7d4a-4f0b-8a3e-5c9d1e2f3a47")

// EventID names the event that the request (tenant, op, requestID) caused.
// A request id is unique only within its tenant and operation, so all three
// go into the id: two tenants that pick one request id publish two events
// under two ids, and a consumer that deduplicates by event id keeps both.
// Every publisher of one event derives the same id.
func EventID(tenant, op string, requestID uuid.UUID) uuid.UUID {
	return uuid.NewSHA1(eventNamespace, []byte(tenant+"\x00"+op+"\x00"+requestID.String()))
}

// CreatedEvent is o's ORDER_CREATED event (o as created).
func CreatedEvent(o Order) Event {
	o = o.AsCreated()
	return Event{ID: EventID(o.Tenant, OperationCreate, o.RequestID), Type: EventOrderCreated, Order: o, RequestID: o.RequestID, At: o.CreatedAt}
}

// ChangedEvent is the event of c, an accepted change; o is the order as c
// left it (Order.At its history up to c.Version).
func ChangedEvent(o Order, c Change) Event {
	return Event{ID: c.ID, Type: c.EventType(), Order: o, RequestID: c.RequestID, At: c.At}
}
