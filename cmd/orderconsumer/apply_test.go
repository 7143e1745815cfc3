package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/atlasmart/orderd/internal/tools/orderconsumer/store"
	"github.com/atlasmart/orderd/internal/tools/orderconsumer/store/storetest"
	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

var _ Store = (*storetest.Memory)(nil)

// fixture is an applier on a store, with a fixed clock and its log kept.
type fixture struct {
	*applier
	logs *bytes.Buffer
}

var clock = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

func newFixture(s Store) fixture {
	logs := &bytes.Buffer{}
	return fixture{
		applier: &applier{store: s, metrics: newMetrics(prometheus.NewRegistry()),
			log: slog.New(slog.NewTextHandler(logs, nil)), now: func() time.Time { return clock }},
		logs: logs,
	}
}

// count is the events_total sample of one result.
func (f fixture) count(o outcome) float64 {
	return testutil.ToFloat64(f.metrics.events.WithLabelValues(string(o)))
}

// created is an ORDER_CREATED event of a new order at version v.
func created(orderID uuid.UUID, v int64) *ordersv1.OrderEvent {
	id := uuid.NewString()
	return &ordersv1.OrderEvent{
		EventId: id, Type: ordersv1.OrderEventType_ORDER_EVENT_TYPE_CREATED, OrderVersion: v, Tenant: "acme", RequestId: id,
		OccurredAt: timestamppb.New(clock.Add(-2 * time.Second)),
		Order: &ordersv1.Order{OrderId: orderID.String(), CustomerId: "cust-1", OrderMonth: "2026-03-01",
			Status: ordersv1.OrderStatus_ORDER_STATUS_CREATED, Total: "77.70", Currency: "EUR", RequestId: id,
			CreatedAt: timestamppb.New(clock.Add(-2 * time.Second))},
	}
}

// record is ev as orderd publishes it, at an offset of partition 1.
func record(t *testing.T, ev *ordersv1.OrderEvent, offset int64) *kgo.Record {
	t.Helper()
	value, err := proto.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return &kgo.Record{Topic: "events", Partition: 1, Offset: offset, Key: []byte(ev.GetOrder().GetOrderId()), Value: value,
		Headers: []kgo.RecordHeader{
			{Key: headerEventID, Value: []byte(ev.GetEventId())},
			{Key: "event-type", Value: []byte("ORDER_CREATED")},
			{Key: headerContentType, Value: []byte(contentType)},
		}}
}

func (f fixture) mustApply(t *testing.T, r *kgo.Record, want outcome) {
	t.Helper()
	got, err := f.apply(context.Background(), r)
	if err != nil || got != want {
		t.Fatalf("apply(offset %d) = %q, %v; want %q", r.Offset, got, err, want)
	}
}

func wantOrderVersion(t *testing.T, m *storetest.Memory, ev *ordersv1.OrderEvent) {
	t.Helper()
	o, err := m.Order(context.Background(), uuid.MustParse(ev.GetOrder().GetOrderId()))
	if err != nil {
		t.Fatal(err)
	}
	if o.Version != ev.GetOrderVersion() || o.LastEventID.String() != ev.GetEventId() {
		t.Fatalf("order at version %d by event %s, want version %d by %s", o.Version, o.LastEventID, ev.GetOrderVersion(), ev.GetEventId())
	}
}

// The first delivery records the event and writes the order; a second copy
// (another offset) is a duplicate and changes neither.
func TestApplyFirstDeliveryThenDuplicate(t *testing.T) {
	m := storetest.NewMemory()
	f := newFixture(m)
	ev := created(uuid.New(), 1)
	f.mustApply(t, record(t, ev, 10), applied)
	f.mustApply(t, record(t, ev, 11), duplicate)

	got, err := m.Event(context.Background(), uuid.MustParse(ev.GetEventId()))
	if err != nil {
		t.Fatal(err)
	}
	want := store.InboxEntry{EventID: uuid.MustParse(ev.GetEventId()), OrderID: uuid.MustParse(ev.GetOrder().GetOrderId()),
		OrderVersion: 1, EventType: "ORDER_EVENT_TYPE_CREATED", Topic: "events", Partition: 1, Offset: 10,
		OccurredAt: clock.Add(-2 * time.Second), AppliedAt: clock}
	if got != want {
		t.Fatalf("inbox row\n got %+v\nwant %+v", got, want)
	}
	o, err := m.Order(context.Background(), want.OrderID)
	if err != nil {
		t.Fatal(err)
	}
	wantOrder := store.Order{OrderID: want.OrderID, Version: 1, Tenant: "acme", CustomerID: "cust-1",
		Status: "ORDER_STATUS_CREATED", Total: "77.70", Currency: "EUR", LastEventID: want.EventID, UpdatedAt: clock}
	if o != wantOrder {
		t.Fatalf("order\n got %+v\nwant %+v", o, wantOrder)
	}
	if f.count(applied) != 1 || f.count(duplicate) != 1 {
		t.Fatalf("applied %v, duplicate %v; want 1 and 1", f.count(applied), f.count(duplicate))
	}
	if n := testutil.CollectAndCount(f.metrics.lag); n != 1 {
		t.Fatalf("%d lag series", n)
	}
}

// An older version after a newer one is recorded (it is a first delivery)
// but leaves the order at the newer version; a newer one after an older
// one replaces it.
func TestApplyOrderVersions(t *testing.T) {
	m := storetest.NewMemory()
	f := newFixture(m)
	id := uuid.New()
	v1, v2, v3 := created(id, 1), created(id, 2), created(id, 3)
	f.mustApply(t, record(t, v2, 1), applied)
	f.mustApply(t, record(t, v1, 2), stale)
	wantOrderVersion(t, m, v2)
	f.mustApply(t, record(t, v3, 3), applied)
	wantOrderVersion(t, m, v3)
	if _, err := m.Event(context.Background(), uuid.MustParse(v1.GetEventId())); err != nil {
		t.Fatalf("the stale event is not in the inbox: %v", err)
	}
	if f.count(applied) != 2 || f.count(stale) != 1 {
		t.Fatalf("applied %v, stale %v; want 2 and 1", f.count(applied), f.count(stale))
	}
}

// The change events: a late ORDER_AMENDED (version 2) after the
// ORDER_CANCELLED that followed it (version 3) is recorded and ignored: the
// view stays cancelled at version 3.
func TestApplyChangeEventsKeepTheNewestVersion(t *testing.T) {
	m := storetest.NewMemory()
	f := newFixture(m)
	id := uuid.New()
	v1 := created(id, 1)
	amended, cancelled := created(id, 2), created(id, 3)
	amended.Type, amended.Order.ShippingNote = ordersv1.OrderEventType_ORDER_EVENT_TYPE_AMENDED, "back door"
	cancelled.Type, cancelled.Order.Status = ordersv1.OrderEventType_ORDER_EVENT_TYPE_CANCELLED, ordersv1.OrderStatus_ORDER_STATUS_CANCELLED
	f.mustApply(t, record(t, v1, 1), applied)
	f.mustApply(t, record(t, cancelled, 2), applied)
	f.mustApply(t, record(t, amended, 3), stale)
	f.mustApply(t, record(t, cancelled, 4), duplicate)
	wantOrderVersion(t, m, cancelled)
	o, err := m.Order(context.Background(), id)
	if err != nil || o.Status != ordersv1.OrderStatus_ORDER_STATUS_CANCELLED.String() {
		t.Fatalf("order = %+v, %v; want CANCELLED", o, err)
	}
}

// A failure after the inbox write and before the order's (a crash, a
// refused write) loses nothing: the redelivery is a duplicate, and it
// writes the order.
func TestApplyCompletesAnEffectInterruptedAfterTheInbox(t *testing.T) {
	for _, fault := range []storetest.Fault{storetest.Refused, storetest.TimedOut} {
		m := storetest.NewMemory()
		f := newFixture(m)
		ev := created(uuid.New(), 1)
		m.Fail(storetest.OpUpsertOrder, fault)
		if _, err := f.apply(context.Background(), record(t, ev, 5)); err == nil {
			t.Fatalf("fault %d: apply succeeded with the order write failing", fault)
		}
		if _, err := m.Order(context.Background(), uuid.MustParse(ev.GetOrder().GetOrderId())); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("fault %d: order written although its write failed: %v", fault, err)
		}
		f.mustApply(t, record(t, ev, 5), duplicate)
		wantOrderVersion(t, m, ev)
	}
}

// An inbox write whose outcome is unknown is an error, not a guess. The
// retry settles it: a duplicate if the lost write landed (counted as such:
// the off-by-one apply's comment admits), a first application if not.
func TestApplyRetriesAnUnknownInboxOutcome(t *testing.T) {
	for _, tc := range []struct {
		fault storetest.Fault
		want  outcome
	}{{storetest.LostResponse, duplicate}, {storetest.TimedOut, applied}} {
		m := storetest.NewMemory()
		f := newFixture(m)
		ev := created(uuid.New(), 1)
		m.Fail(storetest.OpRecordEvent, tc.fault)
		if _, err := f.apply(context.Background(), record(t, ev, 5)); !errors.Is(err, store.ErrOutcomeUnknown) {
			t.Fatalf("fault %d: apply error %v, want ErrOutcomeUnknown", tc.fault, err)
		}
		f.mustApply(t, record(t, ev, 5), tc.want)
		wantOrderVersion(t, m, ev)
	}
}

// noStore fails the test if anything is written.
type noStore struct{ t *testing.T }

func (s noStore) RecordEvent(context.Context, store.InboxEntry) (bool, error) {
	s.t.Error("RecordEvent called for a poison record")
	return false, nil
}

func (s noStore) UpsertOrder(context.Context, store.Order) (bool, error) {
	s.t.Error("UpsertOrder called for a poison record")
	return false, nil
}

// A record that is not an order event this consumer knows is skipped
// without an error (so its offset is committed), logged at error level and
// counted, and nothing is written.
func TestApplySkipsPoisonRecords(t *testing.T) {
	type spoil struct {
		name   string
		event  func(*ordersv1.OrderEvent) // before encoding
		record func(*kgo.Record)          // after
	}
	poison := []spoil{
		{name: "not protobuf", record: func(r *kgo.Record) { r.Value = []byte(`{"json": true}`) }},
		{name: "unspecified type", event: func(e *ordersv1.OrderEvent) { e.Type = ordersv1.OrderEventType_ORDER_EVENT_TYPE_UNSPECIFIED }},
		{name: "unknown type", event: func(e *ordersv1.OrderEvent) { e.Type = 42 }},
		{name: "event id not a uuid", event: func(e *ordersv1.OrderEvent) { e.EventId = "evt-1" }},
		{name: "no order", event: func(e *ordersv1.OrderEvent) { e.Order = nil }},
		{name: "order id not a uuid", event: func(e *ordersv1.OrderEvent) { e.Order.OrderId = "o-1" }},
		{name: "version 0", event: func(e *ordersv1.OrderEvent) { e.OrderVersion = 0 }},
		{name: "no occurred_at", event: func(e *ordersv1.OrderEvent) { e.OccurredAt = nil }},
		{name: "another content type", record: func(r *kgo.Record) { r.Headers[2].Value = []byte("application/json") }},
		{name: "header event id differs", record: func(r *kgo.Record) { r.Headers[0].Value = []byte(uuid.NewString()) }},
	}
	f := newFixture(noStore{t})
	for _, p := range poison {
		ev := created(uuid.New(), 1)
		if p.event != nil {
			p.event(ev)
		}
		r := record(t, ev, 1)
		if p.record != nil {
			p.record(r)
		}
		got, err := f.apply(context.Background(), r)
		if err != nil || got != undecodable {
			t.Errorf("%s: apply = %q, %v; want undecodable, nil", p.name, got, err)
		}
	}
	if got := f.count(undecodable); got != float64(len(poison)) {
		t.Errorf("undecodable count %v, want %d", got, len(poison))
	}
	if n := strings.Count(f.logs.String(), "level=ERROR"); n != len(poison) {
		t.Errorf("%d error lines, want %d:\n%s", n, len(poison), f.logs)
	}
}

// Records without the optional headers are applied from their value alone.
func TestApplyWithoutHeaders(t *testing.T) {
	f := newFixture(storetest.NewMemory())
	r := record(t, created(uuid.New(), 1), 1)
	r.Headers = nil
	f.mustApply(t, r, applied)
}
