package projectiontest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/platform/cassandra/memtable"
	"github.com/atlasmart/orderd/projection"
)

// Event is one row of order_events_by_order.
type Event = projection.Event

// Memory is projection.Store, the store's own protocol, on an in-memory
// table (see the package doc). What it sent is in the table's statement
// log: Sent, Creations and Writes read it. Safe for concurrent use; the
// zero value is not usable: call NewMemory.
type Memory struct {
	*projection.Store
	// Faults armed by statement name (projection.StmtOrdersByID, ...), served as a
	// cassandra.FaultSession serves them: Arm, Hits, Pending.
	*cassandra.Faults
	t *table
}

// NewMemory returns an empty store with nothing armed.
func NewMemory() *Memory {
	t := &table{rt: memtable.New(nil), parts: map[partKey]map[rowKey]cells{}}
	return &Memory{Store: projection.NewOnTable(t, nil), Faults: t.rt.Faults, t: t}
}

// FailNext makes the next n Write calls fail as refused (kind Unavailable)
// at their last step, before the order's recorded outcome (orders_by_id) is
// written: Arm(projection.StmtOrdersByID, cassandra.FaultUnavailable, n).
func (m *Memory) FailNext(n int) { m.Arm(projection.StmtOrdersByID, cassandra.FaultUnavailable, n) }

// Sent is how many statements named name were sent, failed ones included.
func (m *Memory) Sent(name cassandra.Stmt) int { return len(m.t.rt.Log(name)) }

// Creations is how many order creations were sent (Write sends one to
// every table, its recorded outcome last; this counts those of
// orders_by_customer_time, sent first), failed ones included.
func (m *Memory) Creations() int { return m.Sent(projection.StmtOrdersByCustomerTime) }

// Writes returns the orders whose recorded outcome (their orders_by_id
// row) a creation wrote, in the order written, as the table stored them.
func (m *Memory) Writes() []order.Order {
	var out []order.Order
	for _, l := range m.t.rt.Log(projection.StmtOrdersByID) {
		if l.Applied {
			o := l.About.(order.Order)
			o.Lines = slices.Clone(o.Lines)
			out = append(out, o)
		}
	}
	return out
}

// Events lists the rows of order_events_by_order for one order, in event_id
// order (a test helper: projection.Store reads only their changes). No
// fault is served.
func (m *Memory) Events(_ context.Context, tenant string, id uuid.UUID) (out []Event, _ error) {
	m.t.rt.Locked(func(time.Time) { out = m.t.eventsLocked(tenant, id) })
	return out, nil
}

// table is projection.Table in memory: partitions of rows of cells, each
// cell with the write time of the write that set it. It knows nothing of
// the protocol (projection.Store runs that on it).
type table struct {
	rt    *memtable.Runtime
	parts map[partKey]map[rowKey]cells
}

// partKey is a partition's key: orders_by_id's and the events' (tenant,
// id), the listing's (tenant, customer, month).
type partKey struct {
	table, tenant   string
	id              uuid.UUID
	customer, month string
}

// rowKey is a row's key in its partition: the listing's created_at (ms)
// and order id, the events' event id; orders_by_id has one row.
type rowKey struct {
	created int64
	id      uuid.UUID
}

// keyOf is the key of r's row in table.
func keyOf(table string, r projection.Row) (partKey, rowKey) {
	o := r.Order
	switch table {
	case projection.OrdersByCustomerTime:
		return partKey{table: table, tenant: o.Tenant, customer: o.CustomerID, month: o.Month}, rowKey{o.CreatedAt.UnixMilli(), o.ID}
	case projection.EventsByOrder:
		return partKey{table: table, tenant: o.Tenant, id: o.ID}, rowKey{id: r.Event.ID}
	}
	return partKey{table: table, tenant: o.Tenant, id: o.ID}, rowKey{}
}

// cells are a row's cells by column; a row exists while it has one.
type cells map[string]cell

type cell struct {
	ts int64 // write time, µs
	v  any
}

// set writes v into column col at ts: the larger write time wins; at equal
// ones, the larger value, as Cassandra compares a cell's bytes (for text,
// bigint and timestamp cells, those a change writes; the cells a creation
// writes at one write time are equal by construction, and the first stays).
func (c cells) set(col string, v any, ts int64) {
	cur, ok := c[col]
	if !ok || cur.ts < ts || cur.ts == ts && larger(v, cur.v) {
		c[col] = cell{ts: ts, v: v}
	}
}

func larger(a, b any) bool {
	switch a := a.(type) {
	case string:
		return a > b.(string)
	case int64:
		return a > b.(int64)
	case time.Time:
		return a.After(b.(time.Time))
	}
	return false
}

// get is column col's value (T's zero value: null).
func get[T any](c cells, col string) T {
	v, _ := c[col].v.(T)
	return v
}

// write runs stmt, setting cols in r's row of table at ts.
func (t *table) write(ctx context.Context, stmt cassandra.Stmt, op, table string, r projection.Row, ts int64, cols map[string]any) error {
	pk, rk := keyOf(table, r)
	return t.rt.Write(ctx, stmt, r.Order, op, func(time.Time) {
		if t.parts[pk] == nil {
			t.parts[pk] = map[rowKey]cells{}
		}
		if t.parts[pk][rk] == nil {
			t.parts[pk][rk] = cells{}
		}
		for col, v := range cols {
			t.parts[pk][rk].set(col, v, ts)
		}
	})
}

// creationStmt and changeStmt name the writes of each table.
var (
	creationStmt = map[string]cassandra.Stmt{projection.OrdersByID: projection.StmtOrdersByID,
		projection.OrdersByCustomerTime: projection.StmtOrdersByCustomerTime, projection.EventsByOrder: projection.StmtEventsByOrder}
	changeStmt = map[string]cassandra.Stmt{projection.OrdersByID: projection.StmtChangeOrdersByID,
		projection.OrdersByCustomerTime: projection.StmtChangeOrdersByCustomerTime, projection.EventsByOrder: projection.StmtChangeEventsByOrder}
)

func (t *table) WriteCreation(ctx context.Context, table string, r projection.Row, ts int64) error {
	o, e := r.Order, r.Event
	cols := map[string]any{"type": e.Type, "detail": e.Detail, "time": e.Time, "version": e.Version}
	if table != projection.EventsByOrder {
		cols = map[string]any{"status": o.Status, "total": o.Total, "currency": o.Currency, "request_id": o.RequestID,
			"updated_at": o.UpdatedAt, "version": o.Version}
	}
	if table == projection.OrdersByID {
		cols["customer"], cols["month"], cols["created_at"], cols["lines"] = o.CustomerID, o.Month, o.CreatedAt, o.Lines
	}
	return t.write(ctx, creationStmt[table], "write "+table, table, r, ts, cols)
}

func (t *table) WriteChange(ctx context.Context, table string, r projection.Row, ts int64) error {
	o, e := r.Order, r.Event
	cols := map[string]any{"status": o.Status, "version": o.Version, "updated_at": o.UpdatedAt}
	if table == projection.EventsByOrder {
		cols = map[string]any{"type": e.Type, "detail": e.Detail, "time": e.Time, "version": e.Version}
	}
	if r.SetsNote && table == projection.OrdersByID {
		cols["note"] = o.ShippingNote
	}
	return t.write(ctx, changeStmt[table], "write a change to "+table, table, r, ts, cols)
}

// order is the order row of an order table: its key's columns, then its cells.
func (c cells) order(pk partKey, rk rowKey) order.Order {
	o := order.Order{Tenant: pk.tenant, ID: rk.id, CustomerID: pk.customer, Month: pk.month, CreatedAt: time.UnixMilli(rk.created).UTC(),
		Status: get[string](c, "status"), Total: get[string](c, "total"), Currency: get[string](c, "currency"),
		RequestID: get[uuid.UUID](c, "request_id"), UpdatedAt: get[time.Time](c, "updated_at"), Version: get[int64](c, "version"),
		ShippingNote: get[string](c, "note"), Lines: slices.Clone(get[[]order.Line](c, "lines"))}
	if pk.table == projection.OrdersByID {
		o.ID, o.CustomerID, o.Month, o.CreatedAt = pk.id, get[string](c, "customer"), get[string](c, "month"), get[time.Time](c, "created_at")
	}
	return o
}

func (t *table) ReadOrder(ctx context.Context, tenant string, id uuid.UUID) (o order.Order, ok bool, err error) {
	err = t.rt.Read(ctx, projection.StmtGetOrder, id, "read order", func(time.Time) {
		pk := partKey{table: projection.OrdersByID, tenant: tenant, id: id}
		if c := t.parts[pk][rowKey{}]; c != nil {
			o, ok = c.order(pk, rowKey{}), true
		}
	})
	return o, ok && err == nil, err
}

func (t *table) ScanOrders(ctx context.Context, fn func(order.Order) error) error {
	var all []order.Order
	if err := t.rt.Read(ctx, projection.StmtScanOrders, nil, "scan orders", func(time.Time) {
		for pk, rows := range t.parts {
			if c := rows[rowKey{}]; pk.table == projection.OrdersByID && c != nil {
				all = append(all, c.order(pk, rowKey{}))
			}
		}
	}); err != nil {
		return err
	}
	for _, o := range all {
		if err := fn(o); err != nil {
			return err
		}
	}
	return nil
}

func (t *table) ReadEvents(ctx context.Context, tenant string, id uuid.UUID) (out []Event, err error) {
	err = t.rt.Read(ctx, projection.StmtEvents, id, "read an order's events", func(time.Time) { out = t.eventsLocked(tenant, id) })
	return out, err
}

func (t *table) eventsLocked(tenant string, id uuid.UUID) []Event {
	var out []Event
	for rk, c := range t.parts[partKey{table: projection.EventsByOrder, tenant: tenant, id: id}] {
		out = append(out, Event{ID: rk.id, Type: get[string](c, "type"), Detail: get[string](c, "detail"),
			Time: get[time.Time](c, "time"), Version: get[int64](c, "version")})
	}
	slices.SortFunc(out, func(a, b Event) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	return out
}

// clusterOrder orders the listing's rows as the table clusters them:
// created_at descending, then order id ascending (Cassandra sorts uuids of
// one version, as order ids all are, by their bytes).
func clusterOrder(a, b rowKey) int {
	return cmp.Or(cmp.Compare(b.created, a.created), bytes.Compare(a.id[:], b.id[:]))
}

// memoryState marks the page states the table hands out; the key of the
// page's last row follows it (created_at in ms, big-endian; the order id).
const memoryState = "projectiontest.Memory/"

// ReadCustomer pages as Cassandra does: a full page always has a next
// state (Cassandra does not look past the page it returns), so a listing
// whose last page is exactly full ends with an empty page.
func (t *table) ReadCustomer(ctx context.Context, tenant, customerID string, month time.Time, pageSize int, state []byte) ([]order.Order, []byte, error) {
	var after *rowKey
	if len(state) > 0 {
		rest, ok := bytes.CutPrefix(state, []byte(memoryState))
		if !ok || len(rest) != 8+16 {
			return nil, nil, fault.New(fault.ReasonInternal, fmt.Errorf("read customer orders: page state %q is not one of this store's", state))
		}
		after = &rowKey{int64(binary.BigEndian.Uint64(rest[:8])), uuid.UUID(rest[8:])}
	}
	pk := partKey{table: projection.OrdersByCustomerTime, tenant: tenant, customer: customerID, month: month.Format(time.DateOnly)}
	var keys []rowKey
	var rows []order.Order
	err := t.rt.Read(ctx, projection.StmtCustomerOrders, customerID, "read customer orders", func(time.Time) {
		for rk := range t.parts[pk] {
			if after == nil || clusterOrder(rk, *after) > 0 {
				keys = append(keys, rk)
			}
		}
		slices.SortFunc(keys, clusterOrder)
		if pageSize > 0 && len(keys) > pageSize {
			keys = keys[:pageSize]
		}
		for _, rk := range keys {
			rows = append(rows, t.parts[pk][rk].order(pk, rk))
		}
	})
	if err != nil || pageSize <= 0 || len(keys) < pageSize {
		return rows, nil, err
	}
	last := keys[len(keys)-1]
	return rows, append(binary.BigEndian.AppendUint64([]byte(memoryState), uint64(last.created)), last.id[:]...), nil
}
