package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/tools/orderconsumer/store"
)

// Store is what the contract exercises: the consumer's two writes and the
// reads that show what they left.
type Store interface {
	RecordEvent(ctx context.Context, e store.InboxEntry) (first bool, err error)
	UpsertOrder(ctx context.Context, o store.Order) (written bool, err error)
	Event(ctx context.Context, eventID uuid.UUID) (store.InboxEntry, error)
	Order(ctx context.Context, orderID uuid.UUID) (store.Order, error)
}

var (
	_ Store = (*Memory)(nil)
	_ Store = (*store.Cassandra)(nil)
)

// Run is the store's contract. newStore returns the store a subtest uses;
// subtests use fresh random ids, so one store may serve them all.
func Run(t *testing.T, newStore func(t *testing.T) Store) {
	tests := []struct {
		name string
		run  func(t *testing.T, ctx context.Context, s Store)
	}{
		{"an event is recorded once and keeps its first copy", eventRecordedOnce},
		{"concurrent copies of one event: exactly one is first", concurrentEvent},
		{"unknown ids are not found", unknownIDs},
		{"a new order is written as given", newOrder},
		{"a newer version replaces every field", newerVersion},
		{"an equal or older version changes nothing", staleVersion},
		{"concurrent versions end at the newest", concurrentVersions},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			tc.run(t, ctx, newStore(t))
		})
	}
}

// Entry returns an inbox entry with fresh ids and times that are neither
// UTC nor whole milliseconds, so a round trip shows how times are kept.
func Entry() store.InboxEntry {
	at := time.Now().In(time.FixedZone("UTC+2", 2*3600))
	return store.InboxEntry{EventID: uuid.New(), OrderID: uuid.New(), OrderVersion: 1, EventType: "ORDER_EVENT_TYPE_CREATED",
		Topic: "t", Partition: 2, Offset: 41, OccurredAt: at.Add(-1500 * time.Microsecond), AppliedAt: at}
}

// OrderAt returns order id at version v, with fields that differ by version.
func OrderAt(id uuid.UUID, v int64) store.Order {
	return store.Order{OrderID: id, Version: v, Tenant: "acme", CustomerID: "cust-" + id.String()[:8],
		Status: "ORDER_STATUS_CREATED", Total: fmt.Sprintf("%d.50", v), Currency: "EUR", LastEventID: uuid.New(),
		UpdatedAt: time.Now().Add(time.Duration(v) * time.Microsecond)}
}

func eventRecordedOnce(t *testing.T, ctx context.Context, s Store) {
	e := Entry()
	wantFirst(t, ctx, s, e, true)
	again := e
	again.Topic, again.Offset, again.AppliedAt = "other", 99, e.AppliedAt.Add(time.Second)
	wantFirst(t, ctx, s, again, false)
	got, err := s.Event(ctx, e.EventID)
	if err != nil {
		t.Fatal(err)
	}
	if want := e.Stored(); !sameEntry(got, want) {
		t.Fatalf("inbox row %+v, want the first copy %+v", got, want)
	}
}

func concurrentEvent(t *testing.T, ctx context.Context, s Store) {
	e := Entry()
	const n = 6
	firsts := make(chan bool, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			c := e
			c.Offset = int64(i)
			first, err := s.RecordEvent(ctx, c)
			if err != nil {
				t.Error(err)
			}
			firsts <- first
		})
	}
	wg.Wait()
	close(firsts)
	count := 0
	for f := range firsts {
		if f {
			count++
		}
	}
	if count != 1 {
		t.Fatalf("%d of %d concurrent copies were first, want exactly 1", count, n)
	}
}

func unknownIDs(t *testing.T, ctx context.Context, s Store) {
	if _, err := s.Event(ctx, uuid.New()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Event of an unknown id: %v, want ErrNotFound", err)
	}
	if _, err := s.Order(ctx, uuid.New()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Order of an unknown id: %v, want ErrNotFound", err)
	}
}

func newOrder(t *testing.T, ctx context.Context, s Store) {
	o := OrderAt(uuid.New(), 1)
	wantWritten(t, ctx, s, o, true)
	wantOrder(t, ctx, s, o)
	wantWritten(t, ctx, s, o, false) // the same upsert again is a no-op
	wantOrder(t, ctx, s, o)
}

func newerVersion(t *testing.T, ctx context.Context, s Store) {
	id := uuid.New()
	wantWritten(t, ctx, s, OrderAt(id, 1), true)
	v3 := OrderAt(id, 3)
	v3.Status, v3.Currency, v3.Tenant, v3.CustomerID = "ORDER_STATUS_UNSPECIFIED", "USD", "other", "someone-else"
	wantWritten(t, ctx, s, v3, true)
	wantOrder(t, ctx, s, v3)
}

func staleVersion(t *testing.T, ctx context.Context, s Store) {
	id := uuid.New()
	v2 := OrderAt(id, 2)
	wantWritten(t, ctx, s, v2, true)
	wantWritten(t, ctx, s, OrderAt(id, 1), false)
	sameVersion := OrderAt(id, 2)
	sameVersion.Total = "999"
	wantWritten(t, ctx, s, sameVersion, false)
	wantOrder(t, ctx, s, v2)
}

func concurrentVersions(t *testing.T, ctx context.Context, s Store) {
	id := uuid.New()
	const n = 6
	versions := make([]store.Order, n)
	for i := range versions {
		versions[i] = OrderAt(id, int64(i+1))
	}
	var wg sync.WaitGroup
	for _, i := range rand.Perm(n) {
		wg.Go(func() {
			if _, err := s.UpsertOrder(ctx, versions[i]); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	wantOrder(t, ctx, s, versions[n-1])
}

func wantFirst(t *testing.T, ctx context.Context, s Store, e store.InboxEntry, want bool) {
	t.Helper()
	first, err := s.RecordEvent(ctx, e)
	if err != nil || first != want {
		t.Fatalf("RecordEvent(%s offset %d) = %v, %v; want %v, nil", e.EventID, e.Offset, first, err, want)
	}
}

func wantWritten(t *testing.T, ctx context.Context, s Store, o store.Order, want bool) {
	t.Helper()
	written, err := s.UpsertOrder(ctx, o)
	if err != nil || written != want {
		t.Fatalf("UpsertOrder(version %d) = %v, %v; want %v, nil", o.Version, written, err, want)
	}
}

func wantOrder(t *testing.T, ctx context.Context, s Store, want store.Order) {
	t.Helper()
	got, err := s.Order(ctx, want.OrderID)
	if err != nil {
		t.Fatal(err)
	}
	want = want.Stored()
	if !got.UpdatedAt.Equal(want.UpdatedAt) || got.UpdatedAt.Location() != time.UTC {
		t.Fatalf("order updated_at %v, want %v in UTC", got.UpdatedAt, want.UpdatedAt)
	}
	got.UpdatedAt = want.UpdatedAt
	if got != want {
		t.Fatalf("order\n got %+v\nwant %+v", got, want)
	}
}

// sameEntry compares entries with times by instant and in UTC.
func sameEntry(got, want store.InboxEntry) bool {
	for _, at := range [][2]time.Time{{got.OccurredAt, want.OccurredAt}, {got.AppliedAt, want.AppliedAt}} {
		if !at[0].Equal(at[1]) || at[0].Location() != time.UTC {
			return false
		}
	}
	got.OccurredAt, got.AppliedAt = want.OccurredAt, want.AppliedAt
	return got == want
}
