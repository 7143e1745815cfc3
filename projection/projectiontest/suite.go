package projectiontest

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/projection"
)

// Subject is one store under test.
type Subject struct {
	Store *projection.Store
	// Arm makes the next times executions of a named statement fail
	// (Memory.Arm, or cassandra.FaultSession.Arm under a projection.Store).
	Arm func(statement cassandra.Stmt, f cassandra.Fault, times int)
	// Events reads the order's event rows, in event_id order (Memory.Events,
	// or a plain SELECT on the real table).
	Events func(ctx context.Context, tenant string, id uuid.UUID) ([]Event, error)
}

// Run is the projection store's contract. newSubject is called once per
// subtest, and subtests run in parallel: each gets its own Subject (its own
// armed faults), and the suite keeps subtests apart by tenant, so subjects
// may share one keyspace.
func Run(t *testing.T, newSubject func(t *testing.T) Subject) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSubject(t)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			tc.run(t, &suite{Subject: s, ctx: ctx, tenant: "contract-" + uuid.NewString()})
		})
	}
}

type suite struct {
	Subject
	ctx    context.Context
	tenant string
}

// base is a claim time in canonical form (UTC, milliseconds), mid-month.
var base = time.Date(2026, 3, 14, 10, 30, 0, 123_000_000, time.UTC)

// order is a canonical order of a fresh request, created at createdAt.
func (s *suite) order(customer string, createdAt time.Time, total string) order.Order {
	return order.New(s.tenant, uuid.New(), order.Command{
		CustomerID: customer,
		Total:      total,
		Currency:   "EUR",
		Lines: []order.Line{
			{SKU: "sku-a", Quantity: 2, UnitPrice: "5.25"},
			{SKU: "sku-b", Quantity: 1, UnitPrice: total},
		},
	}, createdAt)
}

// again is o re-created by another claim of the same request at createdAt
// with another total (same order id, same event id).
func again(o order.Order, createdAt time.Time, customer, total string) order.Order {
	return order.New(o.Tenant, o.RequestID, order.Command{
		CustomerID: customer, Total: total, Currency: o.Currency, Lines: o.Lines,
	}, createdAt)
}

// listed is o as a listing returns it: orders_by_customer_time has no lines.
func listed(o order.Order) order.Order {
	o.Lines, o.ShippingNote = nil, ""
	return o
}

func (s *suite) write(t *testing.T, o order.Order) {
	t.Helper()
	if err := s.Store.Write(s.ctx, o); err != nil {
		t.Fatalf("Write(%s): %v", o.ID, err)
	}
}

// writeAll writes the orders at once and returns each one's error.
func (s *suite) writeAll(orders []order.Order) []error {
	errs := make([]error, len(orders))
	var wg sync.WaitGroup
	for i, o := range orders {
		wg.Go(func() { errs[i] = s.Store.Write(s.ctx, o) })
	}
	wg.Wait()
	return errs
}

// wantOrder reads o's id and wants exactly want.
func (s *suite) wantOrder(t *testing.T, want order.Order) {
	t.Helper()
	got, err := s.Store.Order(s.ctx, want.Tenant, want.ID)
	if err != nil {
		t.Fatalf("Order(%s): %v", want.ID, err)
	}
	if d := diff(got, want); d != "" {
		t.Errorf("Order(%s): %s", want.ID, d)
	}
}

func (s *suite) wantNoOrder(t *testing.T, id uuid.UUID) {
	t.Helper()
	got, err := s.Store.Order(s.ctx, s.tenant, id)
	if !errors.Is(err, projection.ErrNotFound) || fault.KindOf(err) != fault.NotFound {
		t.Fatalf("Order(%s) = %+v, %v; want projection.ErrNotFound (kind NotFound)", id, got, err)
	}
}

// listAll reads every page of a customer's month, pageSize at a time.
func (s *suite) listAll(t *testing.T, customer string, month time.Time, pageSize int) (orders []order.Order, pages []int) {
	t.Helper()
	var state []byte
	for range 100 {
		p, err := s.Store.CustomerOrders(s.ctx, s.tenant, customer, month, pageSize, state)
		if err != nil {
			t.Fatalf("CustomerOrders(%s, %s, page %d): %v", customer, month.Format(time.DateOnly), len(pages)+1, err)
		}
		if pageSize > 0 && len(p.Orders) > pageSize {
			t.Errorf("page %d holds %d orders, more than the page size %d", len(pages)+1, len(p.Orders), pageSize)
		}
		orders, pages = append(orders, p.Orders...), append(pages, len(p.Orders))
		if p.NextState == nil {
			return orders, pages
		}
		state = p.NextState
	}
	t.Fatalf("CustomerOrders(%s): no last page after 100 pages", customer)
	return nil, nil
}

// wantListed lists the customer's month in one page and wants exactly want,
// newest first (sortListed).
func (s *suite) wantListed(t *testing.T, customer string, month time.Time, want ...order.Order) {
	t.Helper()
	got, _ := s.listAll(t, customer, month, 1000)
	want = slices.Clone(want)
	sortListed(want)
	if len(got) != len(want) {
		t.Fatalf("CustomerOrders(%s, %s) = %d orders %v, want %d %v", customer, month.Format(time.DateOnly), len(got), ids(got), len(want), ids(want))
	}
	for i := range got {
		if d := diff(got[i], listed(want[i])); d != "" {
			t.Errorf("CustomerOrders(%s) #%d: %s", customer, i, d)
		}
	}
}

// wantEvents reads o's event rows and wants exactly want, compared as a
// set: Cassandra orders uuid clustering keys
// by version first (a creating request's v4 id before a change's v5 id),
// the fake by bytes.
func (s *suite) wantEvents(t *testing.T, o order.Order, want ...Event) {
	t.Helper()
	got, err := s.Events(s.ctx, o.Tenant, o.ID)
	if err != nil {
		t.Fatalf("events of %s: %v", o.ID, err)
	}
	got, want = eventsByID(got...), eventsByID(slices.Clone(want)...)
	if len(got) != len(want) {
		t.Fatalf("events of %s = %+v, want %+v", o.ID, got, want)
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.ID != w.ID || g.Type != w.Type || g.Detail != w.Detail || !g.Time.Equal(w.Time) || g.Time.Location() != time.UTC ||
			g.Version != w.Version {
			t.Errorf("event %d of %s = %+v, want %+v", i, o.ID, g, w)
		}
	}
}

// createdEvent is the event Write records for o.
func createdEvent(o order.Order) Event {
	return Event{ID: o.RequestID, Type: projection.EventOrderCreated,
		Detail: "order created by request " + o.RequestID.String(), Time: o.CreatedAt, Version: 1}
}

// changeOf is a change of o from version expected, made at at.
func changeOf(o order.Order, op string, expected int64, note string, at time.Time) order.Change {
	cmd := order.ChangeCommand{OrderID: o.ID, ExpectedVersion: expected, ShippingNote: note}
	return order.NewChange(o.Tenant, op, uuid.New(), order.ChangeFingerprint(op, cmd.Encode()), cmd, at)
}

// changedEvent is the event row WriteChange records for c.
func changedEvent(c order.Change) Event {
	return Event{ID: c.ID, Type: c.EventType(), Detail: projection.ChangeDetail(c), Time: c.At, Version: c.Version}
}

func (s *suite) writeChange(t *testing.T, o order.Order, c order.Change) {
	t.Helper()
	if err := s.Store.WriteChange(s.ctx, o, c); err != nil {
		t.Fatalf("WriteChange(%s version %d): %v", o.ID, c.Version, err)
	}
}

// eventsByID sorts events as the table does (event_id order).
func eventsByID(es ...Event) []Event {
	slices.SortFunc(es, func(a, b Event) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	return es
}

func wantKind(t *testing.T, what string, err error, kind fault.Kind) {
	t.Helper()
	if err == nil || fault.KindOf(err) != kind {
		t.Fatalf("%s: error %v (kind %s), want kind %s", what, err, fault.KindOf(err), kind)
	}
}

// diff describes how got differs from want, field by field ("" if not):
// time zones and nil-versus-empty lines count, since callers compare whole
// orders.
func diff(got, want order.Order) string {
	var d []string
	add := func(field string, g, w any) { d = append(d, fmt.Sprintf("%s = %v, want %v", field, g, w)) }
	if got.ID != want.ID {
		add("id", got.ID, want.ID)
	}
	if got.Tenant != want.Tenant {
		add("tenant", got.Tenant, want.Tenant)
	}
	if got.CustomerID != want.CustomerID {
		add("customer", got.CustomerID, want.CustomerID)
	}
	if got.Month != want.Month {
		add("month", got.Month, want.Month)
	}
	if got.Status != want.Status {
		add("status", got.Status, want.Status)
	}
	if got.Total != want.Total {
		add("total", got.Total, want.Total)
	}
	if got.Currency != want.Currency {
		add("currency", got.Currency, want.Currency)
	}
	if got.RequestID != want.RequestID {
		add("request id", got.RequestID, want.RequestID)
	}
	if !got.CreatedAt.Equal(want.CreatedAt) || got.CreatedAt.Location() != time.UTC {
		add("created_at", got.CreatedAt, want.CreatedAt)
	}
	if got.Version != want.Version {
		add("version", got.Version, want.Version)
	}
	if got.ShippingNote != want.ShippingNote {
		add("shipping note", got.ShippingNote, want.ShippingNote)
	}
	if !got.UpdatedAt.Equal(want.UpdatedAt) || got.UpdatedAt.Location() != time.UTC {
		add("updated_at", got.UpdatedAt, want.UpdatedAt)
	}
	if !slices.Equal(got.Lines, want.Lines) || (got.Lines == nil) != (want.Lines == nil) {
		add("lines", fmt.Sprintf("%#v", got.Lines), fmt.Sprintf("%#v", want.Lines))
	}
	return strings.Join(d, "; ")
}

// sortListed sorts orders as a listing returns them: newest first by
// created_at to the millisecond (as Cassandra stores it), orders of one
// millisecond by order id (its bytes: Cassandra's order of uuids of one
// version, which order ids all are).
func sortListed(os []order.Order) {
	slices.SortFunc(os, listingOrder)
}

func listingOrder(a, b order.Order) int {
	if c := cmp.Compare(b.CreatedAt.UnixMilli(), a.CreatedAt.UnixMilli()); c != 0 {
		return c
	}
	return bytes.Compare(a.ID[:], b.ID[:])
}

// asStored is o with its times as the tables hold them (UTC, milliseconds).
func asStored(o order.Order) order.Order {
	o.CreatedAt, o.UpdatedAt = o.CreatedAt.UTC().Truncate(time.Millisecond), o.UpdatedAt.UTC().Truncate(time.Millisecond)
	return o
}

func ids(os []order.Order) []string {
	out := make([]string, len(os))
	for i, o := range os {
		out[i] = o.ID.String()[:8]
	}
	return out
}

var writeFaults = []struct {
	fault   cassandra.Fault
	kind    fault.Kind
	applied bool
}{
	{cassandra.FaultUnavailable, fault.Unavailable, false},
	{cassandra.FaultTimeout, fault.OutcomeUnknown, false},
	{cassandra.FaultLoseResponse, fault.OutcomeUnknown, true},
}

var cases = []struct {
	name string
	run  func(t *testing.T, s *suite)
}{
	{"write then read back", func(t *testing.T, s *suite) {
		o := s.order("cust-1", base, "42.50")
		s.write(t, o)
		s.wantOrder(t, o)
		s.wantListed(t, "cust-1", base, o)
		s.wantEvents(t, o, createdEvent(o))
	}},

	{"replaying a write changes nothing", func(t *testing.T, s *suite) {
		o := s.order("cust-1", base, "42.50")
		for range 3 {
			s.write(t, o)
		}
		s.wantOrder(t, o)
		s.wantListed(t, "cust-1", base, o)
		s.wantEvents(t, o, createdEvent(o))
	}},

	{"an older write does not overwrite a newer one", func(t *testing.T, s *suite) {
		// Newer first, then older: the newer stays.
		newer := s.order("cust-1", base.Add(time.Second), "20.00")
		older := again(newer, base, "cust-1", "10.00")
		s.write(t, newer)
		s.write(t, older)
		s.wantOrder(t, newer)
		s.wantEvents(t, newer, createdEvent(newer))
		// The listing is keyed by creation time as well: the two claims'
		// rows are two rows (see the next case).
		s.wantListed(t, "cust-1", base, newer, older)

		// Older first, then newer (a millisecond later): the newer replaces it.
		old2 := s.order("cust-2", base, "10.00")
		new2 := again(old2, base.Add(time.Millisecond), "cust-2", "30.00")
		s.write(t, old2)
		s.write(t, new2)
		s.wantOrder(t, new2)
		s.wantEvents(t, new2, createdEvent(new2))
		s.wantListed(t, "cust-2", base, new2, old2)
	}},

	{"a newer write under another customer leaves the older listing row", func(t *testing.T, s *suite) {
		// orders_by_customer_time is keyed by customer, month and creation
		// time: a second claim of one request id with another command, or
		// at another time, writes a second row there. (This is why
		// workflow.Finish reads orders_by_id before writing.)
		older := s.order("cust-a", base, "10.00")
		newer := again(older, base.Add(time.Second), "cust-b", "99.00")
		s.write(t, older)
		s.write(t, newer)
		s.wantOrder(t, newer)
		s.wantListed(t, "cust-a", base, older)
		s.wantListed(t, "cust-b", base, newer)
		s.wantEvents(t, newer, createdEvent(newer))
	}},

	{"values come back as the tables hold them", func(t *testing.T, s *suite) {
		// Microseconds in another zone, a non-canonical decimal, no lines.
		at := time.Date(2026, 4, 1, 1, 0, 0, 987_654_321, time.FixedZone("UTC+2", 2*3600))
		o := order.New(s.tenant, uuid.New(), order.Command{CustomerID: "cust-1", Total: "0012.50", Currency: "EUR",
			Lines: []order.Line{}}, at)
		o.CreatedAt = at // order.New converts to UTC; a caller might not
		s.write(t, o)
		want := o
		want.Tenant, want.Total, want.Lines = s.tenant, "12.50", nil
		want.CreatedAt = time.Date(2026, 3, 31, 23, 0, 0, 987_000_000, time.UTC)
		want.UpdatedAt = want.CreatedAt
		if want.Month != "2026-03-01" {
			t.Fatalf("order.New month = %s, want the UTC month 2026-03-01", want.Month)
		}
		s.wantOrder(t, want)
		s.wantListed(t, "cust-1", want.CreatedAt, want)
		s.wantEvents(t, o, Event{ID: o.RequestID, Type: projection.EventOrderCreated,
			Detail: "order created by request " + o.RequestID.String(), Time: want.CreatedAt, Version: 1})
	}},

	{"an invalid order writes nothing", func(t *testing.T, s *suite) {
		o := s.order("cust-1", base, "42.50")
		o.Total = "forty-two"
		err := s.Store.Write(s.ctx, o)
		if err == nil {
			t.Fatal("Write of an order with total \"forty-two\" = nil, want an error")
		}
		if k := fault.KindOf(err); k == fault.Unavailable || k == fault.OutcomeUnknown {
			t.Errorf("Write of an invalid order: kind %s, want one that is not retried", k)
		}
		s.wantNoOrder(t, o.ID)
		s.wantListed(t, "cust-1", base)
		s.wantEvents(t, o)
	}},

	{"a failed orders_by_id write: the rest is there, the order is not", func(t *testing.T, s *suite) {
		// orders_by_id goes last, once the other two are confirmed.
		for _, wf := range writeFaults {
			if wf.applied {
				continue
			}
			customer := "cust-" + wf.fault.String()
			o := s.order(customer, base, "42.50")
			s.Arm(projection.StmtOrdersByID, wf.fault, 1)
			wantKind(t, "Write with orders_by_id "+wf.fault.String(), s.Store.Write(s.ctx, o), wf.kind)
			s.wantNoOrder(t, o.ID)
			s.wantListed(t, customer, base, o)
			s.wantEvents(t, o, createdEvent(o))

			s.write(t, o) // the retry completes it
			s.wantOrder(t, o)
		}
	}},

	{"a lost orders_by_id response: the whole order is there", func(t *testing.T, s *suite) {
		o := s.order("cust-1", base, "42.50")
		s.Arm(projection.StmtOrdersByID, cassandra.FaultLoseResponse, 1)
		wantKind(t, "Write with orders_by_id lose-response", s.Store.Write(s.ctx, o), fault.OutcomeUnknown)
		s.wantOrder(t, o)
		s.wantListed(t, "cust-1", base, o)
		s.wantEvents(t, o, createdEvent(o))

		s.write(t, o)
		s.wantOrder(t, o)
	}},

	{"a failed orders_by_customer_time write: no orders_by_id row", func(t *testing.T, s *suite) {
		for _, wf := range writeFaults {
			customer := "cust-" + wf.fault.String()
			o := s.order(customer, base, "42.50")
			s.Arm(projection.StmtOrdersByCustomerTime, wf.fault, 1)
			wantKind(t, "Write with orders_by_customer_time "+wf.fault.String(), s.Store.Write(s.ctx, o), wf.kind)
			s.wantNoOrder(t, o.ID) // written only after the other two
			if wf.applied {
				s.wantListed(t, customer, base, o)
			} else {
				s.wantListed(t, customer, base)
			}
			// The event write runs beside it and may or may not have been cut short.
			s.write(t, o)
			s.wantOrder(t, o)
			s.wantListed(t, customer, base, o)
			s.wantEvents(t, o, createdEvent(o))
		}
	}},

	{"a failed order_events_by_order write: no orders_by_id row", func(t *testing.T, s *suite) {
		for _, wf := range writeFaults {
			o := s.order("cust-1", base, "42.50")
			s.Arm(projection.StmtEventsByOrder, wf.fault, 1)
			wantKind(t, "Write with order_events_by_order "+wf.fault.String(), s.Store.Write(s.ctx, o), wf.kind)
			s.wantNoOrder(t, o.ID)
			if wf.applied {
				s.wantEvents(t, o, createdEvent(o))
			} else {
				s.wantEvents(t, o)
			}
			s.write(t, o)
			s.wantOrder(t, o)
			s.wantEvents(t, o, createdEvent(o))
		}
	}},

	{"concurrent writes: each order lands whole, the newest claim of a request wins", func(t *testing.T, s *suite) {
		// Writes that meet may share one statement (projection.Config.Batch):
		// each row keeps its own write time, so two claims of one request
		// written together still leave the newer one, and orders of one
		// customer and month (one listing partition) all stay listed.
		var orders, older []order.Order
		for i := range 24 {
			o := s.order(fmt.Sprintf("cust-%d", i%3), base.Add(time.Duration(i)*time.Second), fmt.Sprintf("%d.00", i+1))
			orders = append(orders, o)
			if i%4 == 0 {
				older = append(older, again(o, o.CreatedAt.Add(-time.Millisecond), o.CustomerID, "0.50"))
			}
		}
		errs := s.writeAll(append(slices.Clone(orders), older...))
		for i, err := range errs {
			if err != nil {
				t.Fatalf("concurrent write %d: %v", i, err)
			}
		}
		for _, o := range orders {
			s.wantOrder(t, o)
			s.wantEvents(t, o, createdEvent(o))
		}
		for c := range 3 {
			customer := fmt.Sprintf("cust-%d", c)
			var want []order.Order
			for _, o := range append(slices.Clone(orders), older...) {
				if o.CustomerID == customer {
					want = append(want, o)
				}
			}
			s.wantListed(t, customer, base, want...)
		}
	}},

	{"a failed write among concurrent ones: every order it failed is absent, the rest whole", func(t *testing.T, s *suite) {
		// The real store may have put several orders' rows in the failed
		// statement; the fake fails one order. Either way each order's
		// answer tells the truth about its rows.
		var orders []order.Order
		for i := range 16 {
			orders = append(orders, s.order(fmt.Sprintf("cust-%d", i), base, "42.50"))
		}
		s.Arm(projection.StmtOrdersByID, cassandra.FaultUnavailable, 1)
		errs := s.writeAll(orders)
		failed := 0
		for i, err := range errs {
			if err == nil {
				s.wantOrder(t, orders[i])
				continue
			}
			failed++
			wantKind(t, "a concurrent Write with orders_by_id unavailable", err, fault.Unavailable)
			s.wantNoOrder(t, orders[i].ID)
			s.write(t, orders[i]) // the retry completes it
			s.wantOrder(t, orders[i])
		}
		if failed == 0 {
			t.Fatal("no concurrent Write failed, want the writes in the failed statement to")
		}
	}},

	{"concurrent reads: each gets its own order, an unknown one NotFound", func(t *testing.T, s *suite) {
		// Reads that meet may share one query (projection.Config.Batch):
		// each must still get exactly its own answer, an id asked for twice
		// included, and another tenant's read of the same id nothing.
		var written []order.Order
		for i := range 10 {
			o := s.order(fmt.Sprintf("cust-%d", i), base.Add(time.Duration(i)*time.Second), fmt.Sprintf("%d.00", i+1))
			s.write(t, o)
			written = append(written, o)
		}
		type read struct {
			tenant string
			id     uuid.UUID
			want   *order.Order // nil: NotFound
		}
		var reads []read
		for i := range written {
			o := &written[i]
			reads = append(reads, read{s.tenant, o.ID, o}, read{s.tenant, o.ID, o}, read{s.tenant + "-other", o.ID, nil},
				read{s.tenant, uuid.New(), nil})
		}
		got := make([]order.Order, len(reads))
		errs := make([]error, len(reads))
		var wg sync.WaitGroup
		for i, r := range reads {
			wg.Go(func() { got[i], errs[i] = s.Store.Order(s.ctx, r.tenant, r.id) })
		}
		wg.Wait()
		for i, r := range reads {
			switch {
			case r.want == nil && !errors.Is(errs[i], projection.ErrNotFound):
				t.Errorf("read %d (%s under %s) = %+v, %v; want ErrNotFound", i, r.id, r.tenant, got[i], errs[i])
			case r.want != nil && errs[i] != nil:
				t.Errorf("read %d (%s): %v", i, r.id, errs[i])
			case r.want != nil:
				if d := diff(got[i], *r.want); d != "" {
					t.Errorf("read %d (%s): %s", i, r.id, d)
				}
			}
		}
	}},

	{"a failed read among concurrent ones fails only the reads it held", func(t *testing.T, s *suite) {
		var written []order.Order
		for i := range 16 {
			o := s.order(fmt.Sprintf("cust-%d", i), base, "42.50")
			s.write(t, o)
			written = append(written, o)
		}
		s.Arm(projection.StmtGetOrder, cassandra.FaultTimeout, 1)
		got := make([]order.Order, len(written))
		errs := make([]error, len(written))
		var wg sync.WaitGroup
		for i, o := range written {
			wg.Go(func() { got[i], errs[i] = s.Store.Order(s.ctx, o.Tenant, o.ID) })
		}
		wg.Wait()
		failed := 0
		for i, o := range written {
			if errs[i] != nil {
				failed++
				wantKind(t, "a concurrent Order with get_order timing out", errs[i], fault.Unavailable)
				s.wantOrder(t, o) // read again: there
				continue
			}
			if d := diff(got[i], o); d != "" {
				t.Errorf("read %d: %s", i, d)
			}
		}
		if failed == 0 {
			t.Fatal("no concurrent Order failed, want the reads in the failed query to")
		}
	}},

	{"an unknown order is NotFound", func(t *testing.T, s *suite) {
		s.wantNoOrder(t, uuid.New())
		o := s.order("cust-1", base, "42.50")
		s.write(t, o)
		// Orders are scoped by tenant.
		if got, err := s.Store.Order(s.ctx, s.tenant+"-other", o.ID); !errors.Is(err, projection.ErrNotFound) {
			t.Errorf("Order under another tenant = %+v, %v; want ErrNotFound", got, err)
		}
		if p, err := s.Store.CustomerOrders(s.ctx, s.tenant+"-other", "cust-1", base, 10, nil); err != nil || len(p.Orders) != 0 || p.NextState != nil {
			t.Errorf("CustomerOrders under another tenant = %+v, %v; want an empty last page", p, err)
		}
	}},

	{"read faults are Unavailable", func(t *testing.T, s *suite) {
		o := s.order("cust-1", base, "42.50")
		s.write(t, o)
		for _, wf := range writeFaults {
			s.Arm(projection.StmtGetOrder, wf.fault, 1)
			_, err := s.Store.Order(s.ctx, s.tenant, o.ID)
			wantKind(t, "Order with get_order "+wf.fault.String(), err, fault.Unavailable)
			s.Arm(projection.StmtCustomerOrders, wf.fault, 1)
			_, err = s.Store.CustomerOrders(s.ctx, s.tenant, "cust-1", base, 10, nil)
			wantKind(t, "CustomerOrders with customer_orders "+wf.fault.String(), err, fault.Unavailable)
		}
		s.wantOrder(t, o)
		s.wantListed(t, "cust-1", base, o)
	}},

	{"listing by customer and month", func(t *testing.T, s *suite) {
		var march []order.Order
		for i := range 5 {
			o := s.order("cust-1", base.Add(time.Duration(i)*time.Hour), fmt.Sprintf("%d.00", 10+i))
			march = append(march, o)
			s.write(t, o)
		}
		april := s.order("cust-1", base.AddDate(0, 1, 0), "1.00")
		other := s.order("cust-2", base, "2.00")
		s.write(t, april)
		s.write(t, other)
		// Any instant of the month names it; the month is taken in UTC.
		s.wantListed(t, "cust-1", time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), march...)
		s.wantListed(t, "cust-1", time.Date(2026, 3, 31, 23, 59, 59, 0, time.UTC), march...)
		s.wantListed(t, "cust-1", time.Date(2026, 4, 1, 1, 0, 0, 0, time.FixedZone("UTC+2", 2*3600)), march...)
		s.wantListed(t, "cust-1", base.AddDate(0, 1, 0), april)
		s.wantListed(t, "cust-2", base, other)
		s.wantListed(t, "cust-3", base)
	}},

	{"paging", func(t *testing.T, s *suite) {
		var all []order.Order
		for i := range 5 {
			o := s.order("cust-1", base.Add(time.Duration(i)*time.Minute), "1.00")
			all = append(all, o)
			s.write(t, o)
		}
		slices.Reverse(all) // newest first
		got, pages := s.listAll(t, "cust-1", base, 2)
		if !slices.Equal(pages, []int{2, 2, 1}) {
			t.Errorf("pages of 2 over 5 orders hold %v, want [2 2 1]", pages)
		}
		if !slices.Equal(ids(got), ids(all)) {
			t.Errorf("pages list %v, want %v (newest first)", ids(got), ids(all))
		}
		if _, pages := s.listAll(t, "cust-1", base, 10); !slices.Equal(pages, []int{5}) {
			t.Errorf("pages of 10 over 5 orders hold %v, want [5]", pages)
		}
		// A last page that is exactly full.
		if got, pages := s.listAll(t, "cust-1", base, 5); !slices.Equal(ids(got), ids(all)) || !slices.Equal(pages, exactlyFull) {
			t.Errorf("pages of 5 over 5 orders hold %v (%d orders), want %v", pages, len(got), exactlyFull)
		}
	}},

	{"WriteChange: the order and its listing show the version, the event row is written", func(t *testing.T, s *suite) {
		o := s.order("cust-1", base, "42.50")
		s.write(t, o)
		amend := changeOf(o, order.OperationAmend, 1, "leave at the door", base.Add(time.Hour))
		v2 := o.Apply(amend)
		s.writeChange(t, v2, amend)
		s.wantOrder(t, v2)
		s.wantListed(t, "cust-1", base, v2)
		cancel := changeOf(o, order.OperationCancel, 2, "", base.Add(2*time.Hour))
		v3 := v2.Apply(cancel)
		s.writeChange(t, v3, cancel)
		s.writeChange(t, v3, cancel) // replayed: nothing changes
		if v3.Version != 3 || v3.Status != order.StatusCancelled || v3.ShippingNote != "leave at the door" {
			t.Fatalf("the order at version 3 = %+v", v3)
		}
		s.wantOrder(t, v3)
		s.wantListed(t, "cust-1", base, v3)
		s.wantEvents(t, o, createdEvent(o), changedEvent(amend), changedEvent(cancel))
	}},

	{"ChangeEvents: each change as its event row records it, oldest version first; none before a change", func(t *testing.T, s *suite) {
		o := s.order("cust-1", base, "42.50")
		s.write(t, o)
		if got, err := s.Store.ChangeEvents(s.ctx, o.Tenant, o.ID); err != nil || len(got) != 0 {
			t.Fatalf("ChangeEvents of an order never changed = %+v, %v; want none", got, err)
		}
		amend := changeOf(o, order.OperationAmend, 1, "leave at the door", base.Add(time.Hour))
		cancel := changeOf(o, order.OperationCancel, 2, "", base.Add(2*time.Hour))
		v2 := o.Apply(amend)
		s.writeChange(t, v2.Apply(cancel), cancel) // the later first: the order is by version, not by write
		s.writeChange(t, v2, amend)
		got, err := s.Store.ChangeEvents(s.ctx, o.Tenant, o.ID)
		if err != nil {
			t.Fatal(err)
		}
		var want []projection.ChangeEvent
		for _, c := range []order.Change{amend, cancel} {
			want = append(want, projection.ChangeEvent{ID: c.ID, Operation: c.Operation, Version: c.Version, RequestID: c.RequestID, At: c.At})
		}
		if !slices.Equal(got, want) {
			t.Errorf("ChangeEvents =\n%+v\nwant\n%+v", got, want)
		}
		s.Arm(projection.StmtEvents, cassandra.FaultUnavailable, 1)
		if _, err := s.Store.ChangeEvents(s.ctx, o.Tenant, o.ID); fault.KindOf(err) != fault.Unavailable {
			t.Errorf("ChangeEvents with the read failing = %v, want Unavailable", err)
		}
	}},

	{"WriteChange: an older version written after a newer one does not win, cell by cell", func(t *testing.T, s *suite) {
		o := s.order("cust-1", base, "42.50")
		s.write(t, o)
		amend := changeOf(o, order.OperationAmend, 1, "ring twice", base.Add(time.Hour))
		cancel := changeOf(o, order.OperationCancel, 2, "", base.Add(2*time.Hour))
		v2 := o.Apply(amend)
		v3 := v2.Apply(cancel)
		s.writeChange(t, v3, cancel) // version 3 lands first (a finisher of 2 was slow)
		s.writeChange(t, v2, amend)
		s.write(t, o) // and a finisher of the creation rewrites it
		s.wantOrder(t, v3)
		s.wantListed(t, "cust-1", base, v3)
	}},

	{"WriteChange: one version written twice with different values resolves cell by cell, the larger value winning", func(t *testing.T, s *suite) {
		for i, laterFirst := range []bool{false, true} {
			o := s.order(fmt.Sprintf("cust-tie-%d", i), base, "42.50")
			s.write(t, o)
			early := changeOf(o, order.OperationAmend, 1, "ring twice", base.Add(time.Hour))
			late := early
			late.At = base.Add(2 * time.Hour) // the same change, dated by another claim
			writes := []order.Change{early, late}
			if laterFirst {
				writes = []order.Change{late, early}
			}
			for _, c := range writes {
				s.writeChange(t, o.Apply(c), c)
			}
			s.wantOrder(t, o.Apply(late))
			s.wantListed(t, o.CustomerID, base, o.Apply(late))
			s.wantEvents(t, o, createdEvent(o), changedEvent(late))
		}
	}},

	{"WriteChange: faults", func(t *testing.T, s *suite) {
		for _, wf := range writeFaults {
			o := s.order("cust-"+wf.fault.String(), base, "42.50")
			s.write(t, o)
			amend := changeOf(o, order.OperationAmend, 1, "x", base.Add(time.Hour))
			v2 := o.Apply(amend)
			s.Arm(projection.StmtChangeOrdersByID, wf.fault, 1)
			wantKind(t, "WriteChange with "+wf.fault.String(), s.Store.WriteChange(s.ctx, v2, amend), wf.kind)
			if wf.applied {
				s.wantOrder(t, v2)
			} else {
				s.wantOrder(t, o)
			}
			s.writeChange(t, v2, amend) // the retry completes it
			s.wantOrder(t, v2)
		}
	}},

	{"a listing is newest first, across pages", func(t *testing.T, s *suite) {
		// Creation times out of order, the month's first and last
		// milliseconds, an instant twice, and three orders within one
		// millisecond (created_at is kept to the millisecond: they tie, and
		// come by order id).
		first := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
		last := time.Date(2026, 3, 31, 23, 59, 59, 999_000_000, time.UTC)
		at := []time.Time{
			base, base.Add(-time.Hour), base.Add(time.Hour), last,
			base.Add(200 * time.Microsecond), base.Add(time.Hour), first,
			base.Add(900 * time.Microsecond), base.Add(time.Millisecond), base.Add(-time.Millisecond),
		}
		var written []order.Order
		for i, a := range at {
			o := s.order("cust-1", a, fmt.Sprintf("%d.00", i+1))
			written = append(written, o)
			s.write(t, o)
		}
		s.write(t, s.order("cust-1", first.Add(-time.Millisecond), "1.00")) // February
		s.write(t, s.order("cust-2", base, "1.00"))

		want := make([]order.Order, len(written))
		for i, o := range written {
			want[i] = listed(asStored(o))
		}
		sortListed(want)
		if !want[0].CreatedAt.Equal(last) || !want[len(want)-1].CreatedAt.Equal(first) {
			t.Fatalf("sortListed: first %s, last %s; want %s and %s", want[0].CreatedAt, want[len(want)-1].CreatedAt, last, first)
		}
		for _, size := range []int{1, 2, 3, 4, 9, 10, 11, 1000} {
			got, pages := s.listAll(t, "cust-1", base, size)
			if len(got) != len(want) {
				t.Fatalf("pages of %d: %d orders %v, want %d %v", size, len(got), ids(got), len(want), ids(want))
			}
			for i := range got {
				if d := diff(got[i], want[i]); d != "" {
					t.Errorf("pages of %d, order #%d: %s", size, i, d)
				}
				if i > 0 && listingOrder(got[i-1], got[i]) >= 0 {
					t.Errorf("pages of %d: order #%d (%s, %s) is not after #%d (%s, %s)", size, i,
						got[i].CreatedAt.Format(time.RFC3339Nano), got[i].ID, i-1, got[i-1].CreatedAt.Format(time.RFC3339Nano), got[i-1].ID)
				}
			}
			wantPages := len(want)/size + 1 // a full last page is followed by an empty one
			if len(pages) != wantPages {
				t.Errorf("pages of %d over %d orders hold %v, want %d pages", size, len(want), pages, wantPages)
			}
		}
	}},

	{"a change keeps its order's place in the listing", func(t *testing.T, s *suite) {
		// The change's order carries its creation time to the microsecond
		// (as a finisher holding the claim in memory may): the listing row
		// is found to the millisecond, as Write keyed it.
		older := s.order("cust-1", base.Add(-time.Minute), "1.00")
		o := s.order("cust-1", base.Add(456*time.Microsecond), "2.00")
		newer := s.order("cust-1", base.Add(time.Minute), "3.00")
		for _, w := range []order.Order{older, o, newer} {
			s.write(t, w)
		}
		amend := changeOf(o, order.OperationAmend, 1, "back door", base.Add(time.Hour))
		v2 := o.Apply(amend)
		s.writeChange(t, v2, amend)
		got, _ := s.listAll(t, "cust-1", base, 1000)
		if want := []string{newer.ID.String()[:8], o.ID.String()[:8], older.ID.String()[:8]}; !slices.Equal(ids(got), want) {
			t.Fatalf("listing after the change: %v, want %v", ids(got), want)
		}
		if d := diff(got[1], listed(asStored(v2))); d != "" {
			t.Errorf("the changed order in its listing: %s", d)
		}
	}},

	{"a change without its creation's row is not listed", func(t *testing.T, s *suite) {
		// Only while instances older than migration 0005 still write the
		// old listing: one creates the order there, a newer one projects a
		// change here. The row holds the change's cells only; it takes its
		// place in a page (Cassandra returns it) but is left out.
		o := s.order("cust-1", base, "42.50")
		amend := changeOf(o, order.OperationAmend, 1, "x", base.Add(time.Hour))
		v2 := o.Apply(amend)
		s.writeChange(t, v2, amend)
		if got, pages := s.listAll(t, "cust-1", base, 1000); len(got) != 0 || !slices.Equal(pages, []int{0}) {
			t.Errorf("listing of a change alone, pages of 1000: %v in pages %v; want no order, one page", ids(got), pages)
		}
		if got, pages := s.listAll(t, "cust-1", base, 1); len(got) != 0 || !slices.Equal(pages, []int{0, 0}) {
			t.Errorf("listing of a change alone, pages of 1: %v in pages %v; want no order, pages [0 0]", ids(got), pages)
		}
		// Once the creation is there (written late, at its own, older
		// timestamp), the order is listed at the change's version.
		s.write(t, o)
		s.wantListed(t, "cust-1", base, v2)
		s.wantOrder(t, v2)
	}},
}

// exactlyFull is how a listing of 5 orders 5 at a time is paged: Cassandra
// does not look past a page, so a full page has a NextState and an empty
// page follows.
var exactlyFull = []int{5, 0}
