package outboxtest

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/atlasmart/orderd/internal/adapters/orderpb"
	"github.com/atlasmart/orderd/internal/adapters/outbox"
	"github.com/atlasmart/orderd/internal/domain/order"
)

// Subject is one Publisher under test, with what the contract needs to
// observe it.
type Subject struct {
	Publisher interface {
		Publish(ctx context.Context, ev order.Event) error
	}
	// Published returns every record acknowledged so far (for Kafka: read
	// back from the topic), waiting up to ctx for at least n of them.
	Published func(ctx context.Context, n int) []*kgo.Record
	// SetDown makes the broker unreachable (true) or reachable again.
	SetDown func(t *testing.T, down bool)
}

// Suite is the contract of a Publisher. newSubject returns a fresh subject
// (its own topic) for each case.
func Suite(t *testing.T, newSubject func(t *testing.T) Subject) {
	ctx := context.Background()
	t.Run("an acknowledged event is readable, keyed by its order, its id in a header", func(t *testing.T) {
		s := newSubject(t)
		o := sampleEvent()
		if err := s.Publisher.Publish(ctx, o); err != nil {
			t.Fatalf("Publish: %v", err)
		}
		got := s.Published(ctx, 1)
		if len(got) != 1 {
			t.Fatalf("published %d records, want 1", len(got))
		}
		wantRecord(t, got[0], o)
	})
	t.Run("a change's event: its type in a header, the order at its version", func(t *testing.T) {
		s := newSubject(t)
		created := sampleEvent().Order
		cmd := order.ChangeCommand{OrderID: created.ID, ExpectedVersion: 1, ShippingNote: "back door"}
		c := order.NewChange(created.Tenant, order.OperationAmend, uuid.New(), "fp", cmd, created.CreatedAt.Add(time.Minute))
		ev := order.ChangedEvent(created.Apply(c), c)
		if err := s.Publisher.Publish(ctx, ev); err != nil {
			t.Fatalf("Publish: %v", err)
		}
		got := s.Published(ctx, 1)
		if len(got) != 1 {
			t.Fatalf("published %d records, want 1", len(got))
		}
		wantRecord(t, got[0], ev)
	})
	t.Run("publishing again gives the same event: consumers deduplicate by its id", func(t *testing.T) {
		s := newSubject(t)
		o := sampleEvent()
		for range 2 {
			if err := s.Publisher.Publish(ctx, o); err != nil {
				t.Fatalf("Publish: %v", err)
			}
		}
		got := s.Published(ctx, 2)
		if len(got) != 2 {
			t.Fatalf("published %d records, want 2", len(got))
		}
		for _, r := range got {
			wantRecord(t, r, o)
		}
	})
	t.Run("broker down: Publish fails by its deadline and nothing is acknowledged; up again, it succeeds", func(t *testing.T) {
		s := newSubject(t)
		s.SetDown(t, true)
		o := sampleEvent()
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := s.Publisher.Publish(pctx, o)
		cancel()
		if err == nil {
			t.Fatal("Publish with the broker down = nil, want an error")
		}
		s.SetDown(t, false)
		if err := s.Publisher.Publish(ctx, o); err != nil {
			t.Fatalf("Publish after the broker came back: %v", err)
		}
		// The failed attempt may or may not have reached the broker (an
		// unknown outcome): at least the acknowledged one is there.
		got := s.Published(ctx, 1)
		if len(got) < 1 || len(got) > 2 {
			t.Fatalf("published %d records, want 1 (or 2: the failed attempt may have landed)", len(got))
		}
		for _, r := range got {
			wantRecord(t, r, o)
		}
	})
}

// sampleEvent is a fresh order's ORDER_CREATED event.
func sampleEvent() order.Event {
	cmd := order.Command{CustomerID: "cust-7", Total: "10.00", Currency: "EUR",
		Lines: []order.Line{{SKU: "sku-1", Quantity: 2, UnitPrice: "5.00"}}}
	return order.CreatedEvent(order.New("default", uuid.New(), cmd, time.Now().UTC().Truncate(time.Millisecond)))
}

// wantRecord checks r is e's record.
func wantRecord(t *testing.T, r *kgo.Record, e order.Event) {
	t.Helper()
	o := e.Order
	if string(r.Key) != o.ID.String() {
		t.Errorf("key = %q, want the order id %s", r.Key, o.ID)
	}
	if got := outbox.Header(r, outbox.HeaderEventID); got != e.ID.String() {
		t.Errorf("event-id header = %q, want the event id %s", got, e.ID)
	}
	if got := outbox.Header(r, outbox.HeaderEventType); got != e.Type {
		t.Errorf("event-type header = %q, want %s", got, e.Type)
	}
	ev, err := outbox.Decode(r)
	if err != nil {
		t.Fatal(err)
	}
	want := orderpb.Event(e)
	if ev.GetEventId() != want.GetEventId() || ev.GetType() != want.GetType() || ev.GetOrderVersion() != o.Version ||
		ev.GetOrder().GetOrderId() != o.ID.String() || ev.GetOrder().GetTotal() != o.Total ||
		ev.GetOrder().GetStatus() != want.GetOrder().GetStatus() || ev.GetOrder().GetShippingNote() != o.ShippingNote ||
		!ev.GetOccurredAt().AsTime().Equal(e.At) || ev.GetTenant() != o.Tenant || ev.GetRequestId() != e.RequestID.String() {
		t.Errorf("event = %v, want %v", ev, want)
	}
}
