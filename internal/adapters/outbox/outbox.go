// Package outbox publishes every accepted order's events to Apache Kafka
// (docs/outbox.md). The delivery obligation is the claim's due-queue entry:
// the workflow releases it only after Publish returned nil, which is the
// broker's acknowledgement (acks=all, idempotent producer); anything else
// leaves the entry for the reconciler, which publishes again. So an event
// is published at least once, always with the same event id, and a
// consumer applies it once by that id (cmd/orderconsumer).
package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/atlasmart/orderd/internal/adapters/orderpb"
	"github.com/atlasmart/orderd/internal/domain/order"
	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

// DefaultTopic is where order events go unless configured otherwise.
const DefaultTopic = "atlasmart.orders.v1.events"

// Record headers every event carries, so that consumers and tools can route
// and deduplicate without decoding the value.
const (
	HeaderEventID     = "event-id"
	HeaderEventType   = "event-type"
	HeaderContentType = "content-type"
	ContentType       = "application/x-protobuf; messageType=atlasmart.orders.v1.OrderEvent"
	TypeOrderCreated  = order.EventOrderCreated
)

// Publisher publishes an order event. Publish returns nil only once the
// broker acknowledged the record; any error means it may or may not have
// been written, and publishing again is safe (same event id).
type Publisher interface {
	Publish(ctx context.Context, ev order.Event) error
}

// Result names how one publication ended, for metrics.
type Result string

const (
	ResultAcked  Result = "acked"  // the broker acknowledged the record
	ResultFailed Result = "failed" // not acknowledged (broker down, timeout, rejected)
)

// Observer is told how each publication ended and how long it took.
type Observer interface {
	Published(r Result, took time.Duration)
}

type nopObserver struct{}

func (nopObserver) Published(Result, time.Duration) {}

// Record is the Kafka record of an order event: keyed by the order id (one
// order's events stay in one partition, in order), the protobuf OrderEvent
// as value, and the event id and type in headers.
func Record(e order.Event) (*kgo.Record, error) {
	ev := orderpb.Event(e)
	value, err := proto.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("encode the event of order %s: %w", e.Order.ID, err)
	}
	return &kgo.Record{
		Key:   []byte(ev.GetOrder().GetOrderId()),
		Value: value,
		Headers: []kgo.RecordHeader{
			{Key: HeaderEventID, Value: []byte(ev.GetEventId())},
			{Key: HeaderEventType, Value: []byte(e.Type)},
			{Key: HeaderContentType, Value: []byte(ContentType)},
		},
	}, nil
}

// Decode reads an OrderEvent from a record's value.
func Decode(r *kgo.Record) (*ordersv1.OrderEvent, error) {
	ev := &ordersv1.OrderEvent{}
	if err := proto.Unmarshal(r.Value, ev); err != nil {
		return nil, fmt.Errorf("decode the order event at %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
	}
	return ev, nil
}

// Header is the value of r's header key ("" if absent).
func Header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
