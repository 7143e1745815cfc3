package projectiontest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"gopkg.in/inf.v0"

	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/projection"
)

// Store is what the contract covers: the methods of projection.Store that
// its callers use. (Declared here, not taken from workflow, so that
// workflow's tests can import this package.)
type Store interface {
	// Write projects o into every table, orders_by_id last.
	Write(ctx context.Context, o order.Order) error
	// Order reads one order; projection.ErrNotFound (kind NotFound) if absent.
	Order(ctx context.Context, tenant string, id uuid.UUID) (order.Order, error)
	// CustomerOrders lists one customer's orders of one month, a page at a time.
	CustomerOrders(ctx context.Context, tenant, customerID string, month time.Time, pageSize int, state []byte) (projection.Page, error)
	// WriteChange projects an accepted change of o (o as at the change).
	WriteChange(ctx context.Context, o order.Order, c order.Change) error
	// ChangeEvents reads what an order's event rows record of its changes.
	ChangeEvents(ctx context.Context, tenant string, id uuid.UUID) ([]projection.ChangeEvent, error)
}

// Event is one row of order_events_by_order.
type Event struct {
	ID      uuid.UUID // event_id: the creating request, or the change's id
	Type    string
	Detail  string
	Time    time.Time
	Version int64 // the order version the event made
}

// state is the cells a change rewrites (status, version, updated_at):
// Cassandra resolves each cell by its own timestamp, so they are kept
// apart from the creation's row.
type state struct {
	Version   int64
	Status    string
	UpdatedAt time.Time
}

var (
	_ Store = (*projection.Store)(nil)
	_ Store = (*Memory)(nil)
)

type idKey struct {
	tenant string
	id     uuid.UUID
}

type customerKey struct {
	tenant, customer, month string
}

// listingKey is the clustering key of an orders_by_customer_time row in
// its partition: created_at to the millisecond, then the order id.
type listingKey struct {
	created int64 // ms since the epoch, as Cassandra stores a timestamp
	id      uuid.UUID
}

func listingKeyOf(o order.Order) listingKey {
	return listingKey{created: o.CreatedAt.UnixMilli(), id: o.ID}
}

// compare orders listing keys as the table clusters them: created_at
// descending, then order id ascending (Cassandra sorts uuids of one
// version, as order ids all are, by their bytes).
func (k listingKey) compare(o listingKey) int {
	if c := cmp.Compare(o.created, k.created); c != 0 {
		return c
	}
	return bytes.Compare(k.id[:], o.id[:])
}

// customerRow is one row of orders_by_customer_time.
type customerRow struct {
	customerKey
	listingKey
}

// version is a stored row and the write timestamp (µs) its cells carry.
type version[T any] struct {
	ts  int64
	row T
}

// upsert stores row unless the stored one carries a larger timestamp: the
// larger timestamp wins, as in Cassandra. On equal timestamps Cassandra
// keeps, cell by cell, the larger value (its bytes compared); tie does the
// same for the cells of T (nil: the rows written at one timestamp are
// identical by construction, a creation's rows).
func upsert[K comparable, T any](m map[K]version[T], k K, ts int64, row T, tie func(cur, row T) T) {
	cur, ok := m[k]
	switch {
	case ok && cur.ts > ts:
		return
	case ok && cur.ts == ts:
		if tie != nil {
			m[k] = version[T]{ts: ts, row: tie(cur.row, row)}
		}
		return
	}
	m[k] = version[T]{ts: ts, row: row}
}

// laterTime is the larger of two timestamp cells (after 1970 their bytes
// order as their values).
func laterTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// stateTie resolves a change's cells written at one timestamp as Cassandra
// does: each cell its larger value.
func stateTie(cur, row state) state {
	return state{Version: max(cur.Version, row.Version), Status: max(cur.Status, row.Status), UpdatedAt: laterTime(cur.UpdatedAt, row.UpdatedAt)}
}

// eventTie is stateTie for an event row's cells.
func eventTie(cur, row Event) Event {
	return Event{ID: cur.ID, Type: max(cur.Type, row.Type), Detail: max(cur.Detail, row.Detail), Time: laterTime(cur.Time, row.Time),
		Version: max(cur.Version, row.Version)}
}

// noteTie is the larger of two shipping_note cells.
func noteTie(cur, row string) string { return max(cur, row) }

// Memory is an in-memory projection store with projection.Store's
// semantics (see the package doc). Safe for concurrent use; the zero value
// is not usable: call NewMemory.
type Memory struct {
	// Faults armed by statement name (projection.StmtOrdersByID, ...), served as a
	// cassandra.FaultSession serves them: Arm, Hits, Pending.
	*cassandra.Faults

	mu         sync.Mutex
	byID       map[idKey]version[order.Order]
	byCustomer map[customerKey]map[listingKey]version[order.Order]
	events     map[idKey]map[uuid.UUID]version[Event]
	// The cells changes write, by table.
	idState       map[idKey]version[state]
	idNote        map[idKey]version[string]
	customerState map[customerRow]version[state]

	calls  map[string]int // by method
	writes []order.Order  // the orders of Write calls that returned nil, as passed
}

// NewMemory returns an empty store with nothing armed.
func NewMemory() *Memory {
	return &Memory{
		byID:          map[idKey]version[order.Order]{},
		byCustomer:    map[customerKey]map[listingKey]version[order.Order]{},
		events:        map[idKey]map[uuid.UUID]version[Event]{},
		idState:       map[idKey]version[state]{},
		idNote:        map[idKey]version[string]{},
		customerState: map[customerRow]version[state]{},
		Faults:        cassandra.NewFaults(),
		calls:         map[string]int{},
	}
}

// FailNext makes the next n Write calls fail as refused (kind Unavailable)
// at their last step, before the order's recorded outcome (orders_by_id) is
// written: Arm(projection.StmtOrdersByID, cassandra.FaultUnavailable, n).
func (m *Memory) FailNext(n int) { m.Arm(projection.StmtOrdersByID, cassandra.FaultUnavailable, n) }

// Calls is how many times method ("Write", "Order", "CustomerOrders") was
// called, failed calls included.
func (m *Memory) Calls(method string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls[method]
}

// Writes returns the orders of every Write call that returned nil, in call
// order, as they were passed.
func (m *Memory) Writes() []order.Order {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]order.Order, len(m.writes))
	for i, o := range m.writes {
		out[i] = cloneOrder(o)
	}
	return out
}

// WriteCount is how many Write calls of order id returned nil.
func (m *Memory) WriteCount(id uuid.UUID) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, o := range m.writes {
		if o.ID == id {
			n++
		}
	}
	return n
}

func (m *Memory) enter(method string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls[method]++
}

// Write implements Store: orders_by_customer_time and order_events_by_order
// (both attempted; the first error is returned), then, only if both were
// confirmed, orders_by_id.
func (m *Memory) Write(ctx context.Context, o order.Order) error {
	m.enter("Write")
	o = o.AsCreated()
	var first error
	for _, table := range projection.Tables {
		if table == projection.OrdersByID {
			continue
		}
		if err := m.WriteOne(ctx, o, table); err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return first
	}
	if err := m.WriteOne(ctx, o, projection.OrdersByID); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.writes = append(m.writes, cloneOrder(o))
	return nil
}

// WriteOne projects o into one table (one of projection.Tables), as
// projection.Store.WriteOne does.
func (m *Memory) WriteOne(ctx context.Context, o order.Order, table string) error {
	row, err := stored(o)
	if err != nil {
		return err
	}
	switch table {
	case projection.OrdersByID, projection.OrdersByCustomerTime, projection.EventsByOrder:
	default:
		return fmt.Errorf("no projection table %q", table)
	}
	return m.write(ctx, "projection."+table, "write "+table, func() { m.apply(row, table, o.CreatedAt.UnixMicro()) })
}

// write runs do as a write of statement would run, under the fault armed
// for it (cassandra.Served, as every fake serves faults).
func (m *Memory) write(ctx context.Context, statement, op string, do func()) error {
	f, _ := m.Take(statement)
	_, err := cassandra.Served(ctx, statement, op, true, f, func() bool { do(); return true })
	return err
}

// WriteChange implements Store, as projection.Store.WriteChange: the
// customer's row and the event first (both attempted), then orders_by_id,
// each cell at projection.ChangeTimestamp.
func (m *Memory) WriteChange(ctx context.Context, o order.Order, c order.Change) error {
	m.enter("WriteChange")
	ts := projection.ChangeTimestamp(o.CreatedAt, c)
	id := idKey{o.Tenant, o.ID}
	st := state{Version: c.Version, Status: c.Status, UpdatedAt: c.At.UTC().Truncate(time.Millisecond)}
	first := m.write(ctx, projection.StmtChangePrefix+projection.OrdersByCustomerTime, "write a change to "+projection.OrdersByCustomerTime, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		upsert(m.customerState, customerRow{customerKey{o.Tenant, o.CustomerID, o.Month}, listingKeyOf(o)}, ts, st, stateTie)
	})
	err := m.write(ctx, projection.StmtChangePrefix+projection.EventsByOrder, "write a change to "+projection.EventsByOrder, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.events[id] == nil {
			m.events[id] = map[uuid.UUID]version[Event]{}
		}
		upsert(m.events[id], c.ID, ts, Event{ID: c.ID, Type: c.EventType(), Detail: projection.ChangeDetail(c), Time: st.UpdatedAt, Version: c.Version}, eventTie)
	})
	if first == nil {
		first = err
	}
	if first != nil {
		return first
	}
	return m.write(ctx, projection.StmtChangePrefix+projection.OrdersByID, "write a change to "+projection.OrdersByID, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		upsert(m.idState, id, ts, st, stateTie)
		if c.SetsNote() {
			upsert(m.idNote, id, ts, c.ShippingNote, noteTie)
		}
	})
}

// withState is o (a stored creation row) with the cells changes wrote.
func withState(o order.Order, st version[state], note version[string]) order.Order {
	if st.ts != 0 {
		o.Version, o.Status, o.UpdatedAt = st.row.Version, st.row.Status, st.row.UpdatedAt
	}
	if note.ts != 0 {
		o.ShippingNote = note.row
	}
	return o
}

func (m *Memory) apply(o order.Order, table string, ts int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id := idKey{o.Tenant, o.ID}
	created := state{Version: o.Version, Status: o.Status, UpdatedAt: o.CreatedAt}
	switch table {
	case projection.OrdersByID:
		upsert(m.byID, id, ts, o, nil)
		upsert(m.idState, id, ts, created, stateTie)
	case projection.OrdersByCustomerTime:
		k := customerKey{o.Tenant, o.CustomerID, o.Month}
		if m.byCustomer[k] == nil {
			m.byCustomer[k] = map[listingKey]version[order.Order]{}
		}
		listed := o
		listed.Lines = nil // orders_by_customer_time has no lines column
		upsert(m.byCustomer[k], listingKeyOf(o), ts, listed, nil)
		upsert(m.customerState, customerRow{k, listingKeyOf(o)}, ts, created, stateTie)
	case projection.EventsByOrder:
		if m.events[id] == nil {
			m.events[id] = map[uuid.UUID]version[Event]{}
		}
		upsert(m.events[id], o.RequestID, ts, Event{
			ID:      o.RequestID,
			Type:    projection.EventOrderCreated,
			Detail:  projection.CreatedDetail(o),
			Time:    o.CreatedAt,
			Version: o.Version,
		}, eventTie)
	}
}

// Order implements Store.
func (m *Memory) Order(ctx context.Context, tenant string, id uuid.UUID) (order.Order, error) {
	m.enter("Order")
	if err := m.read(ctx, projection.StmtGetOrder, "read order"); err != nil {
		return order.Order{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.byID[idKey{tenant, id}]
	if !ok {
		return order.Order{}, projection.ErrNotFound
	}
	k := idKey{tenant, id}
	return cloneOrder(withState(v.row, m.idState[k], m.idNote[k])), nil
}

// read fails as a read of statement would: any fault, or an ended
// context, is Unavailable (cassandra.Served).
func (m *Memory) read(ctx context.Context, statement, op string) error {
	f, _ := m.Take(statement)
	_, err := cassandra.Served(ctx, statement, op, false, f, func() bool { return false })
	return err
}

// memoryState marks the page states Memory hands out: the marker, then the
// clustering key of the page's last row (created_at in ms, big-endian,
// then the order id).
const memoryState = "projectiontest.Memory/"

// CustomerOrders implements Store: the customer's orders of month's month
// (in UTC), newest first as the table clusters them (created_at to the
// millisecond descending, then order id ascending), without lines;
// pageSize <= 0 is one page of all. A row that holds a change's cells but
// not its creation's takes its place in a page and is left out of it, as
// projection.Store leaves it out of the rows Cassandra returns. A full page
// always has a NextState, so a listing whose last page is exactly full ends
// with an empty page, as on Cassandra.
func (m *Memory) CustomerOrders(ctx context.Context, tenant, customerID string, month time.Time, pageSize int, state []byte) (projection.Page, error) {
	m.enter("CustomerOrders")
	if err := m.read(ctx, projection.StmtCustomerOrders, "read customer orders"); err != nil {
		return projection.Page{}, err
	}
	var after *listingKey
	if len(state) > 0 {
		rest, ok := bytes.CutPrefix(state, []byte(memoryState))
		if !ok || len(rest) != 8+16 {
			return projection.Page{}, fault.New(fault.ReasonInternal, fmt.Errorf("read customer orders: page state %q is not one of this store's", state))
		}
		after = &listingKey{created: int64(binary.BigEndian.Uint64(rest[:8])), id: uuid.UUID(rest[8:])}
	}
	first := month.UTC().AddDate(0, 0, 1-month.UTC().Day())
	k := customerKey{tenant, customerID, first.Format(time.DateOnly)}
	type listed struct {
		key listingKey
		o   *order.Order // nil: a change's cells only, not listed
	}
	m.mu.Lock()
	var rows []listed
	for lk, v := range m.byCustomer[k] {
		if after == nil || lk.compare(*after) > 0 {
			o := withState(v.row, m.customerState[customerRow{k, lk}], version[string]{})
			rows = append(rows, listed{lk, &o})
		}
	}
	for row := range m.customerState {
		if _, created := m.byCustomer[k][row.listingKey]; row.customerKey == k && !created && (after == nil || row.compare(*after) > 0) {
			rows = append(rows, listed{key: row.listingKey})
		}
	}
	m.mu.Unlock()
	slices.SortFunc(rows, func(a, b listed) int { return a.key.compare(b.key) })
	var page projection.Page
	if pageSize > 0 && len(rows) >= pageSize {
		// A full page has a next one, even if that one is empty: Cassandra
		// does not look past the page it returns.
		rows = rows[:pageSize]
		last := rows[len(rows)-1].key
		page.NextState = binary.BigEndian.AppendUint64([]byte(memoryState), uint64(last.created))
		page.NextState = append(page.NextState, last.id[:]...)
	}
	for _, r := range rows {
		if r.o != nil {
			page.Orders = append(page.Orders, cloneOrder(*r.o))
		}
	}
	return page, nil
}

// ChangeEvents implements projection.Store.ChangeEvents.
func (m *Memory) ChangeEvents(ctx context.Context, tenant string, id uuid.UUID) ([]projection.ChangeEvent, error) {
	if err := m.read(ctx, projection.StmtEvents, "read an order's events"); err != nil {
		return nil, err
	}
	rows, _ := m.Events(ctx, tenant, id)
	var out []projection.ChangeEvent
	for _, r := range rows {
		if ev, ok := projection.ChangeEventOf(r.ID, r.Type, r.Detail, r.Time, r.Version); ok {
			out = append(out, ev)
		}
	}
	slices.SortFunc(out, func(a, b projection.ChangeEvent) int { return cmp.Compare(a.Version, b.Version) })
	return out, nil
}

// Events lists the rows of order_events_by_order for one order, in event_id
// order (a test helper: projection.Store has no reader of that table).
func (m *Memory) Events(_ context.Context, tenant string, id uuid.UUID) ([]Event, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Event
	for _, v := range m.events[idKey{tenant, id}] {
		out = append(out, v.row)
	}
	slices.SortFunc(out, func(a, b Event) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	return out, nil
}

// stored is o as the tables hold it and reads return it: the checks
// projection.Store makes before writing, decimals as inf.Dec prints them,
// the month as a date, created_at in UTC to the millisecond, nil for no lines.
func stored(o order.Order) (order.Order, error) {
	total, err := decimal(o.Total)
	if err != nil {
		return order.Order{}, err
	}
	month, err := time.Parse(time.DateOnly, o.Month)
	if err != nil {
		return order.Order{}, fmt.Errorf("order %s month %q: %w", o.ID, o.Month, err)
	}
	out := o
	out.Total, out.Month = total, month.Format(time.DateOnly)
	out.CreatedAt = o.CreatedAt.UTC().Truncate(time.Millisecond)
	out.Lines = nil
	for _, l := range o.Lines {
		price, err := decimal(l.UnitPrice)
		if err != nil {
			return order.Order{}, err
		}
		l.UnitPrice = price
		out.Lines = append(out.Lines, l)
	}
	return out, nil
}

func decimal(s string) (string, error) {
	d, ok := new(inf.Dec).SetString(s)
	if !ok {
		return "", fmt.Errorf("amount %q is not a decimal", s)
	}
	return d.String(), nil
}

func cloneOrder(o order.Order) order.Order {
	o.Lines = slices.Clone(o.Lines)
	return o
}
