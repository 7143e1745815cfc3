package projection

import (
	"context"
	"errors"
	"fmt"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"
	"gopkg.in/inf.v0"

	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/platform/groupcommit"
)

const (
	upsertByCustomerCQL = `/* ` + string(StmtOrdersByCustomerTime) + ` */ INSERT INTO orders_by_customer_time
		(tenant, customer_id, order_month, created_at, order_id, status, total, currency, request_id, updated_at, version)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TIMESTAMP ?`
	upsertByIDCQL = `/* ` + string(StmtOrdersByID) + ` */ INSERT INTO orders_by_id
		(tenant, order_id, customer_id, order_month, status, total, currency, request_id, lines, created_at, updated_at, version)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TIMESTAMP ?`
	upsertEventCQL = `/* ` + string(StmtEventsByOrder) + ` */ INSERT INTO order_events_by_order
		(tenant, order_id, event_id, event_type, detail, event_time, version)
		VALUES (?, ?, ?, ?, ?, ?, ?) USING TIMESTAMP ?`

	// A change writes only the cells it changes, at the write time the
	// query carries (WithTimestamp).
	changeByCustomerCQL = `/* ` + string(StmtChangeOrdersByCustomerTime) + ` */ UPDATE orders_by_customer_time
		SET status = ?, version = ?, updated_at = ?
		WHERE tenant = ? AND customer_id = ? AND order_month = ? AND created_at = ? AND order_id = ?`
	changeByIDCQL = `/* ` + string(StmtChangeOrdersByID) + ` */ UPDATE orders_by_id
		SET status = ?, version = ?, updated_at = ? WHERE tenant = ? AND order_id = ?`
	changeByIDNoteCQL = `/* ` + string(StmtChangeOrdersByID) + ` */ UPDATE orders_by_id
		SET status = ?, version = ?, updated_at = ?, shipping_note = ? WHERE tenant = ? AND order_id = ?`
	changeEventCQL = `/* ` + string(StmtChangeEventsByOrder) + ` */ INSERT INTO order_events_by_order
		(tenant, order_id, event_id, event_type, detail, event_time, version)
		VALUES (?, ?, ?, ?, ?, ?, ?)`

	// An order's event rows (ChangeEvents).
	selectEventsCQL = `/* ` + string(StmtEvents) + ` */ SELECT event_id, event_type, detail, event_time, version
		FROM order_events_by_order WHERE tenant = ? AND order_id = ?`

	// byIDColumns are the orders_by_id columns an order is read from, in
	// the order orderScan.dest scans them.
	byIDColumns = `order_id, customer_id, order_month, status, total, currency, request_id, lines, created_at,
		version, shipping_note, updated_at`
	selectByIDCQL = `/* ` + string(StmtGetOrder) + ` */ SELECT ` + byIDColumns + `
		FROM orders_by_id WHERE tenant = ? AND order_id = ?`
	// The reads of one tenant's orders that meet (ReadOrder). Named as the
	// single read: a fault armed on get_order, and its metrics, cover both.
	selectByIDsCQL = `/* ` + string(StmtGetOrder) + ` */ SELECT ` + byIDColumns + `
		FROM orders_by_id WHERE tenant = ? AND order_id IN ?`
	// Every order, for the tools that walk them all (ScanOrders).
	scanByIDCQL = `/* ` + string(StmtScanOrders) + ` */ SELECT tenant, ` + byIDColumns + ` FROM orders_by_id`
	// Newest first: the table's clustering order (created_at DESC, order_id ASC).
	selectByCustomerCQL = `/* ` + string(StmtCustomerOrders) + ` */ SELECT order_id, customer_id, order_month, status, total, currency, request_id, created_at,
		version, updated_at
		FROM orders_by_customer_time WHERE tenant = ? AND customer_id = ? AND order_month = ?`
)

// lineUDT is the order_line user type.
type lineUDT struct {
	SKU       string   `cql:"sku"`
	Quantity  int64    `cql:"quantity"`
	UnitPrice *inf.Dec `cql:"unit_price"`
}

const (
	// DefaultBatch keeps a batch within Cassandra's
	// unlogged_batch_across_partitions_warn_threshold (10 partitions):
	// each order's row of a table is in a partition of its own (the
	// listing's rows of one customer and month share one).
	DefaultBatch = 8
	// inFlight is how many partial batches of one table go at once before
	// the rows that arrive wait to share the next: a slot is free at low
	// load, so a row waits for nothing; under load the rows that meet
	// share a write, and a full batch (DefaultBatch rows) goes at once
	// whatever is in flight, so this bounds no rate. One, not four: side
	// by side (orderbench -phases cost, 3,000 new orders at 16 and 64
	// streams) orderd spent 23-28% less CPU per order with one, at no
	// worse latency, because four slots let most rows go in batches of
	// one or two (docs/architecture.md, "Group-committed projection rows").
	inFlight = 1
	// maxBatchBytes bounds a batch's estimated size (rowWeight) below
	// Cassandra's batch_size_warn_threshold (5 KiB); a larger row goes
	// alone.
	maxBatchBytes = 4 << 10
	// scanPage is how many orders_by_id rows one page of ScanOrders reads.
	scanPage = 500
)

// cqlTable is Table on Cassandra. The creation rows of one table from
// orders written at the same moment share one unlogged batch, and the
// reads of one tenant's orders that meet share one query (Config.Batch).
type cqlTable struct {
	s       cassandra.Session
	upserts *groupcommit.Committer[string, row]        // by table
	reads   *groupcommit.Committer[string, *orderRead] // by tenant
}

// row is one order's creation row of one table, as its statement's values.
type row struct {
	table, stmt string
	args        []any
}

// NewCQLTable returns the projection tables of s's keyspace, writing and
// reading as cfg says.
func NewCQLTable(cfg Config, s cassandra.Session) Table {
	if cfg.Batch == 0 {
		cfg.Batch = DefaultBatch
	}
	t := &cqlTable{s: s}
	t.upserts = groupcommit.New(groupcommit.Config{Limit: cfg.Batch, InFlight: inFlight, MaxWeight: maxBatchBytes},
		func(r row) string { return r.table }, rowWeight, t.writeRows)
	t.reads = groupcommit.New(groupcommit.Config{Limit: cfg.Batch, InFlight: inFlight},
		func(r *orderRead) string { return r.tenant }, nil, t.readOrders)
	return t
}

func (t *cqlTable) WriteCreation(ctx context.Context, table string, r Row, ts int64) error {
	stmt, args, err := creationRow(r, table)
	if err != nil {
		return err
	}
	return cassandra.WriteError("write "+table, t.upserts.Add(ctx, row{table: table, stmt: stmt, args: append(args, ts)}))
}

// creationRow is the statement and values (but the write time) that write
// r's creation row of table.
func creationRow(r Row, table string) (string, []any, error) {
	o := r.Order
	total, month, err := decimalAndMonth(o)
	if err != nil {
		return "", nil, err
	}
	switch table {
	case OrdersByCustomerTime:
		return upsertByCustomerCQL, []any{o.Tenant, o.CustomerID, month, o.CreatedAt, o.ID.String(), o.Status, total, o.Currency, o.RequestID.String(),
			o.UpdatedAt, o.Version}, nil
	case OrdersByID:
		lines := make([]lineUDT, len(o.Lines))
		for i, l := range o.Lines {
			price, ok := new(inf.Dec).SetString(l.UnitPrice)
			if !ok {
				return "", nil, fmt.Errorf("amount %q is not a decimal", l.UnitPrice)
			}
			lines[i] = lineUDT{SKU: l.SKU, Quantity: l.Quantity, UnitPrice: price}
		}
		return upsertByIDCQL, []any{o.Tenant, o.ID.String(), o.CustomerID, month, o.Status, total, o.Currency, o.RequestID.String(), lines,
			o.CreatedAt, o.UpdatedAt, o.Version}, nil
	case EventsByOrder:
		e := r.Event
		return upsertEventCQL, []any{o.Tenant, o.ID.String(), e.ID.String(), e.Type, e.Detail, e.Time, e.Version}, nil
	}
	return "", nil, fmt.Errorf("no projection table %q", table)
}

// decimalAndMonth are o's total and month as their columns take them.
func decimalAndMonth(o order.Order) (*inf.Dec, time.Time, error) {
	total, ok := new(inf.Dec).SetString(o.Total)
	if !ok {
		return nil, time.Time{}, fmt.Errorf("amount %q is not a decimal", o.Total)
	}
	month, err := time.Parse(time.DateOnly, o.Month)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("order %s month %q: %w", o.ID, o.Month, err)
	}
	return total, month, nil
}

// writeRows writes rows of one table: one statement, or the rows of
// orders whose writes met, as one unlogged batch (each row keeps its own
// USING TIMESTAMP). A batch is not atomic and need not be: each row is an
// idempotent upsert its order may replay, and a failed batch fails every
// order in it, each of which then settles as any failed write does.
func (t *cqlTable) writeRows(ctx context.Context, rows []row) error {
	if len(rows) == 1 {
		return t.s.Query(rows[0].stmt, rows[0].args...).Idempotent(true).ExecContext(ctx)
	}
	values := make([][]any, len(rows))
	for i, r := range rows {
		values[i] = r.args
	}
	return t.s.ExecBatch(ctx, rows[0].stmt, values)
}

// rowWeight estimates a row's share of a batch's size in bytes: its text
// and its lines, with a fixed allowance per value.
func rowWeight(r row) int {
	n := 0
	for _, a := range r.args {
		switch v := a.(type) {
		case string:
			n += len(v) + 8
		case []lineUDT:
			for _, l := range v {
				n += len(l.SKU) + 48
			}
		default:
			n += 16
		}
	}
	return n
}

func (t *cqlTable) WriteChange(ctx context.Context, table string, r Row, ts int64) error {
	o := r.Order
	var stmt string
	var args []any
	switch table {
	case OrdersByCustomerTime:
		month, err := time.Parse(time.DateOnly, o.Month)
		if err != nil {
			return fmt.Errorf("order %s month %q: %w", o.ID, o.Month, err)
		}
		stmt, args = changeByCustomerCQL, []any{o.Status, o.Version, o.UpdatedAt, o.Tenant, o.CustomerID, month, o.CreatedAt, o.ID.String()}
	case OrdersByID:
		stmt, args = changeByIDCQL, []any{o.Status, o.Version, o.UpdatedAt, o.Tenant, o.ID.String()}
		if r.SetsNote {
			stmt, args = changeByIDNoteCQL, []any{o.Status, o.Version, o.UpdatedAt, o.ShippingNote, o.Tenant, o.ID.String()}
		}
	case EventsByOrder:
		e := r.Event
		stmt, args = changeEventCQL, []any{o.Tenant, o.ID.String(), e.ID.String(), e.Type, e.Detail, e.Time, e.Version}
	default:
		return fmt.Errorf("no projection table %q", table)
	}
	err := t.s.Query(stmt, args...).WithTimestamp(ts).Idempotent(true).ExecContext(ctx)
	return cassandra.WriteError("write a change to "+table, err)
}

func (t *cqlTable) ReadEvents(ctx context.Context, tenant string, id uuid.UUID) ([]Event, error) {
	iter := t.s.Query(selectEventsCQL, tenant, id.String()).IterContext(ctx)
	var (
		out     []Event
		e       Event
		eventID gocql.UUID
		version *int64
	)
	for iter.Scan(&eventID, &e.Type, &e.Detail, &e.Time, &version) {
		e.ID, e.Time = uuid.UUID(eventID), e.Time.UTC()
		if version != nil {
			e.Version = *version
		}
		out = append(out, e)
		e, version = Event{}, nil
	}
	return out, cassandra.ReadError("read an order's events", iter.Close())
}

// orderRead is one ReadOrder call: what it asks for and, once its query
// ran, what it found.
type orderRead struct {
	tenant, id string
	found      bool
	got        order.Order
}

func (t *cqlTable) ReadOrder(ctx context.Context, tenant string, id uuid.UUID) (order.Order, bool, error) {
	r := &orderRead{tenant: tenant, id: id.String()}
	if err := t.reads.Add(ctx, r); err != nil {
		return order.Order{}, false, cassandra.ReadError("read order", err)
	}
	return r.got, r.found, nil
}

// readOrders reads the orders of reads (one tenant's): one query, by id or
// by ids. Every read is answered once it returns nil; a failed query fails
// each of them, as its own read failing would.
func (t *cqlTable) readOrders(ctx context.Context, reads []*orderRead) error {
	tenant := reads[0].tenant
	if len(reads) == 1 {
		var sc orderScan
		err := t.s.Query(selectByIDCQL, tenant, reads[0].id).ScanContext(ctx, sc.dest()...)
		if errors.Is(err, gocql.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		reads[0].got, reads[0].found = sc.order(tenant), true
		return nil
	}
	byID := make(map[string][]*orderRead, len(reads))
	ids := make([]string, 0, len(reads))
	for _, r := range reads {
		if byID[r.id] == nil {
			ids = append(ids, r.id)
		}
		byID[r.id] = append(byID[r.id], r)
	}
	iter := t.s.Query(selectByIDsCQL, tenant, ids).IterContext(ctx)
	var sc orderScan
	for iter.Scan(sc.dest()...) {
		o := sc.order(tenant)
		for _, r := range byID[o.ID.String()] {
			r.got, r.found = o, true
		}
		sc = orderScan{}
	}
	return iter.Close()
}

// orderScan holds one orders_by_id row as the driver scans it.
type orderScan struct {
	o        order.Order
	orderID  gocql.UUID
	reqID    gocql.UUID
	month    time.Time
	total    *inf.Dec
	rawLines []lineUDT
	version  *int64
	note     *string
}

// dest is what to scan byIDColumns into.
func (sc *orderScan) dest() []any {
	return []any{&sc.orderID, &sc.o.CustomerID, &sc.month, &sc.o.Status, &sc.total, &sc.o.Currency, &sc.reqID, &sc.rawLines,
		&sc.o.CreatedAt, &sc.version, &sc.note, &sc.o.UpdatedAt}
}

// order is the row scanned, as a row of tenant.
func (sc *orderScan) order(tenant string) order.Order {
	o := sc.o
	o.Tenant = tenant
	o.ID, o.RequestID, o.Month = uuid.UUID(sc.orderID), uuid.UUID(sc.reqID), sc.month.Format(time.DateOnly)
	o.CreatedAt, o.UpdatedAt = o.CreatedAt.UTC(), utc(o.UpdatedAt)
	if sc.total != nil {
		o.Total = sc.total.String()
	}
	if sc.version != nil {
		o.Version = *sc.version
	}
	if sc.note != nil {
		o.ShippingNote = *sc.note
	}
	for _, l := range sc.rawLines {
		o.Lines = append(o.Lines, order.Line{SKU: l.SKU, Quantity: l.Quantity, UnitPrice: l.UnitPrice.String()})
	}
	return o
}

// utc is t in UTC, the zero time (a null timestamp) as it is.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}

func (t *cqlTable) ScanOrders(ctx context.Context, fn func(order.Order) error) error {
	iter := t.s.Query(scanByIDCQL).PageSize(scanPage).IterContext(ctx)
	var (
		tenant string
		sc     orderScan
	)
	for iter.Scan(append([]any{&tenant}, sc.dest()...)...) {
		o := sc.order(tenant)
		sc = orderScan{}
		if err := fn(o); err != nil {
			_ = iter.Close()
			return err
		}
	}
	return cassandra.ReadError("scan orders", iter.Close())
}

func (t *cqlTable) ReadCustomer(ctx context.Context, tenant, customerID string, month time.Time, pageSize int, state []byte) ([]order.Order, []byte, error) {
	iter := t.s.Query(selectByCustomerCQL, tenant, customerID, month).PageSize(pageSize).PageState(state).IterContext(ctx)
	var (
		rows           []order.Order
		orderID, reqID gocql.UUID
		m              time.Time
		total          *inf.Dec
		version        *int64
	)
	// PageState disables automatic paging: this iterator covers one page.
	next := iter.PageState()
	o := order.Order{Tenant: tenant}
	for iter.Scan(&orderID, &o.CustomerID, &m, &o.Status, &total, &o.Currency, &reqID, &o.CreatedAt, &version, &o.UpdatedAt) {
		o.ID, o.RequestID, o.Month = uuid.UUID(orderID), uuid.UUID(reqID), m.Format(time.DateOnly)
		o.CreatedAt, o.UpdatedAt = o.CreatedAt.UTC(), utc(o.UpdatedAt)
		if total != nil {
			o.Total = total.String()
		}
		if version != nil {
			o.Version = *version
		}
		rows = append(rows, o)
		total, version, o = nil, nil, order.Order{Tenant: tenant}
	}
	if err := iter.Close(); err != nil {
		return nil, nil, cassandra.ReadError("read customer orders", err)
	}
	if len(next) == 0 {
		next = nil
	}
	return rows, next, nil
}
