package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/atlasmart/orderd/internal/tools/orderconsumer/store"
	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

// The record headers orderd sets (docs/outbox.md). Both are optional here:
// the value is the event; when present they must agree with it.
const (
	headerEventID     = "event-id"
	headerContentType = "content-type"
	contentType       = "application/x-protobuf; messageType=atlasmart.orders.v1.OrderEvent"
)

// Store is what applying an event needs: store.Cassandra, or
// storetest.Memory in tests. Both writes may be called again with the same
// arguments after any failure; their errors wrap store.ErrOutcomeUnknown
// (may have written) or store.ErrNotApplied (did not), or are bugs.
type Store interface {
	// RecordEvent writes the event's inbox row unless its event id is
	// there already; first is true when this call wrote it.
	RecordEvent(ctx context.Context, e store.InboxEntry) (first bool, err error)
	// UpsertOrder writes the order unless an equal or newer version of it
	// is stored; written is false when it was stale.
	UpsertOrder(ctx context.Context, o store.Order) (written bool, err error)
}

var _ Store = (*store.Cassandra)(nil)

// outcome is what applying one record did: the result label of
// orderconsumer_events_total.
type outcome string

const (
	applied     outcome = "applied"     // first time: recorded and the order written
	duplicate   outcome = "duplicate"   // the inbox had its event id already
	stale       outcome = "stale"       // first time, but the order holds an equal or newer version
	undecodable outcome = "undecodable" // not an order event this consumer knows: skipped
)

// applier applies records to the store, one at a time per partition.
type applier struct {
	store   Store
	metrics *metrics
	log     *slog.Logger
	now     func() time.Time
}

// apply applies one record and counts its outcome. An error means the
// record's effect is not known to be complete: apply it again (it is safe
// to) and do not commit its offset until that succeeds.
//
// Why inbox first, then the effect, and the effect even for a duplicate:
// the two writes are to different partitions, so no statement does both.
// Recording the inbox first and the order second leaves one gap: a crash
// (or an error) between them. The record is then delivered again (its
// offset was never committed) and the inbox says "duplicate". If a
// duplicate skipped the order, that effect would be lost for good. So the
// order upsert runs every time; it is guarded by the order's version, so
// running it again writes nothing new. The inbox's only job is to say which
// delivery was the first, for counting and for lag.
//
// When a write's outcome is unknown (a timeout, a CAS write timeout) we do
// not guess: we return the error and the record is retried. If the lost
// inbox write did apply, the retry is counted as a duplicate, so
// applied/duplicate may be off by one per such failure; the tables are
// right either way.
func (a *applier) apply(ctx context.Context, r *kgo.Record) (outcome, error) {
	ev, err := decode(r)
	if err != nil {
		// A poison record must not block its partition for ever: it is
		// logged, counted, and committed with the rest of its poll. The
		// log line names where it is, to inspect or replay it later.
		a.log.ErrorContext(ctx, "skipping a record that is not an order event this consumer knows",
			"topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "err", err)
		a.metrics.events.WithLabelValues(string(undecodable)).Inc()
		return undecodable, nil
	}
	now := a.now()
	first, err := a.store.RecordEvent(ctx, ev.inboxEntry(r, now))
	if err != nil {
		return "", err
	}
	written, err := a.store.UpsertOrder(ctx, ev.order(now))
	if err != nil {
		return "", err
	}
	out := applied
	switch {
	case !first:
		out = duplicate
		if written {
			a.log.InfoContext(ctx, "completed the effect of an event recorded by an earlier attempt",
				"event_id", ev.id, "order_id", ev.orderID, "order_version", ev.pb.GetOrderVersion())
		}
	case !written:
		out = stale
	default:
		a.metrics.lag.Observe(now.Sub(ev.pb.GetOccurredAt().AsTime()).Seconds())
	}
	a.metrics.events.WithLabelValues(string(out)).Inc()
	a.log.DebugContext(ctx, "applied an order event", "event_id", ev.id, "order_id", ev.orderID,
		"order_version", ev.pb.GetOrderVersion(), "outcome", string(out))
	return out, nil
}

// event is an OrderEvent that passed decode's checks, with its ids parsed.
type event struct {
	pb      *ordersv1.OrderEvent
	id      uuid.UUID
	orderID uuid.UUID
}

// knownTypes are the event types this consumer applies. Each carries the
// whole order at its version, so applying is the same for all: keep the
// newest version (UpsertOrder), ignore an older one arriving late.
var knownTypes = map[ordersv1.OrderEventType]bool{
	ordersv1.OrderEventType_ORDER_EVENT_TYPE_CREATED:   true,
	ordersv1.OrderEventType_ORDER_EVENT_TYPE_CANCELLED: true,
	ordersv1.OrderEventType_ORDER_EVENT_TYPE_AMENDED:   true,
}

// errPoison marks a record that can never be applied.
var errPoison = errors.New("not an order event")

// decode parses a record's value and checks what applying it relies on. An
// event type this consumer does not know is refused, not guessed at: a
// newer publisher may mean something this code would get wrong.
func decode(r *kgo.Record) (event, error) {
	headers := map[string]string{}
	for _, h := range r.Headers {
		headers[h.Key] = string(h.Value)
	}
	if ct, ok := headers[headerContentType]; ok && ct != contentType {
		return event{}, fmt.Errorf("%w: content type %q", errPoison, ct)
	}
	var pb ordersv1.OrderEvent
	if err := proto.Unmarshal(r.Value, &pb); err != nil {
		return event{}, fmt.Errorf("%w: %w", errPoison, err)
	}
	if !knownTypes[pb.GetType()] {
		return event{}, fmt.Errorf("%w: unknown event type %v", errPoison, pb.GetType())
	}
	id, err := uuid.Parse(pb.GetEventId())
	if err != nil {
		return event{}, fmt.Errorf("%w: event id %q: %w", errPoison, pb.GetEventId(), err)
	}
	if h, ok := headers[headerEventID]; ok && h != pb.GetEventId() {
		return event{}, fmt.Errorf("%w: header event-id %q differs from the event's %q", errPoison, h, pb.GetEventId())
	}
	orderID, err := uuid.Parse(pb.GetOrder().GetOrderId())
	if err != nil {
		return event{}, fmt.Errorf("%w: order id %q: %w", errPoison, pb.GetOrder().GetOrderId(), err)
	}
	if pb.GetOrderVersion() < 1 {
		return event{}, fmt.Errorf("%w: order version %d", errPoison, pb.GetOrderVersion())
	}
	if err := pb.GetOccurredAt().CheckValid(); err != nil {
		return event{}, fmt.Errorf("%w: occurred_at: %w", errPoison, err)
	}
	return event{pb: &pb, id: id, orderID: orderID}, nil
}

// inboxEntry is the event's inbox row, read from r, first applied at now.
func (e event) inboxEntry(r *kgo.Record, now time.Time) store.InboxEntry {
	return store.InboxEntry{EventID: e.id, OrderID: e.orderID, OrderVersion: e.pb.GetOrderVersion(),
		EventType: e.pb.GetType().String(), Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
		OccurredAt: e.pb.GetOccurredAt().AsTime(), AppliedAt: now}
}

// order is the consumer's view of the order after the event, written at now.
func (e event) order(now time.Time) store.Order {
	o := e.pb.GetOrder()
	return store.Order{OrderID: e.orderID, Version: e.pb.GetOrderVersion(), Tenant: e.pb.GetTenant(),
		CustomerID: o.GetCustomerId(), Status: o.GetStatus().String(), Total: o.GetTotal(), Currency: o.GetCurrency(),
		LastEventID: e.id, UpdatedAt: now}
}
