package outboxtest

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/atlasmart/orderd/internal/order"
	"github.com/atlasmart/orderd/internal/orderpb"
	"github.com/atlasmart/orderd/internal/outbox"
)

// Subject is one Publisher under test, with what the contract needs to
// observe it.
type Subject struct {
	Publisher interface {
		Publish(ctx context.Context, o order.Order) error
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
		o := sampleOrder()
		if err := s.Publisher.Publish(ctx, o); err != nil {
			t.Fatalf("Publish: %v", err)
		}
		got := s.Published(ctx, 1)
		if len(got) != 1 {
			t.Fatalf("published %d records, want 1", len(got))
		}
		wantRecord(t, got[0], o)
	})
	t.Run("publishing again gives the same event: consumers deduplicate by its id", func(t *testing.T) {
		s := newSubject(t)
		o := sampleOrder()
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
		o := sampleOrder()
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

func sampleOrder() order.Order {
	cmd := order.Command{CustomerID: "cust-7", Total: "10.00", Currency: "EUR",
		Lines: []order.Line{{SKU: "sku-1", Quantity: 2, UnitPrice: "5.00"}}}
	return order.New("default", uuid.New(), cmd, time.Now().UTC().Truncate(time.Millisecond))
}

// wantRecord checks r is o's ORDER_CREATED record.
func wantRecord(t *testing.T, r *kgo.Record, o order.Order) {
	t.Helper()
	if string(r.Key) != o.ID.String() {
		t.Errorf("key = %q, want the order id %s", r.Key, o.ID)
	}
	if got := outbox.Header(r, outbox.HeaderEventID); got != o.RequestID.String() {
		t.Errorf("event-id header = %q, want the request id %s", got, o.RequestID)
	}
	if got := outbox.Header(r, outbox.HeaderEventType); got != outbox.TypeOrderCreated {
		t.Errorf("event-type header = %q, want %s", got, outbox.TypeOrderCreated)
	}
	ev, err := outbox.Decode(r)
	if err != nil {
		t.Fatal(err)
	}
	want := orderpb.Created(o)
	if ev.GetEventId() != want.GetEventId() || ev.GetOrderVersion() != orderpb.CreatedVersion ||
		ev.GetOrder().GetOrderId() != o.ID.String() || ev.GetOrder().GetTotal() != o.Total ||
		!ev.GetOccurredAt().AsTime().Equal(o.CreatedAt) || ev.GetTenant() != o.Tenant {
		t.Errorf("event = %v, want %v", ev, want)
	}
}
