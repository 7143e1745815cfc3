package projection

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"
	"gopkg.in/inf.v0"

	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/platform/failpoint"
	"github.com/atlasmart/orderd/internal/platform/groupcommit"
)

// Table names, also used to name failpoints ("projection.orders_by_id")
// and statements (metrics, ORDERD_CQL_FAULTS).
const (
	// OrdersByCustomerTime is the customer listing (migration 0005): a
	// month's orders newest first. It replaced orders_by_customer (0001),
	// which no write or read uses any more but CopyListing's.
	OrdersByCustomerTime = "orders_by_customer_time"
	OrdersByID           = "orders_by_id"
	EventsByOrder        = "order_events_by_order"
)

// EventOrderCreated is the event every created order has.
const EventOrderCreated = order.EventOrderCreated

// The statements, by the names they give themselves in a leading comment
// (cassandra.StatementName): what a FaultSession and the in-memory store
// serve faults by, and what traces and metrics call them. A projection
// write is named by its table.
const (
	StmtOrdersByID           = "projection." + OrdersByID
	StmtOrdersByCustomerTime = "projection." + OrdersByCustomerTime
	StmtEventsByOrder        = "projection." + EventsByOrder
	StmtGetOrder             = "projection.get_order"
	StmtCustomerOrders       = "projection.customer_orders"
	StmtEvents               = "projection.order_events"
	StmtScanOrders           = "projection.scan_orders"
	// StmtChangePrefix + table names a change's write to table.
	StmtChangePrefix = "projection.change."
)

const (
	upsertByCustomerCQL = `/* ` + StmtOrdersByCustomerTime + ` */ INSERT INTO orders_by_customer_time
		(tenant, customer_id, order_month, created_at, order_id, status, total, currency, request_id, updated_at, version)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TIMESTAMP ?`
	upsertByIDCQL = `/* ` + StmtOrdersByID + ` */ INSERT INTO orders_by_id
		(tenant, order_id, customer_id, order_month, status, total, currency, request_id, lines, created_at, updated_at, version)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TIMESTAMP ?`
	upsertEventCQL = `/* ` + StmtEventsByOrder + ` */ INSERT INTO order_events_by_order
		(tenant, order_id, event_id, event_type, detail, event_time, version)
		VALUES (?, ?, ?, ?, ?, ?, ?) USING TIMESTAMP ?`

	// A change writes only the cells it changes, USING TIMESTAMP the
	// order's creation write time + the version it made (changeTimestamp).
	changeByCustomerCQL = `/* ` + StmtChangePrefix + OrdersByCustomerTime + ` */ UPDATE orders_by_customer_time
		SET status = ?, version = ?, updated_at = ?
		WHERE tenant = ? AND customer_id = ? AND order_month = ? AND created_at = ? AND order_id = ?`
	changeByIDCQL = `/* ` + StmtChangePrefix + OrdersByID + ` */ UPDATE orders_by_id
		SET status = ?, version = ?, updated_at = ? WHERE tenant = ? AND order_id = ?`
	changeByIDNoteCQL = `/* ` + StmtChangePrefix + OrdersByID + ` */ UPDATE orders_by_id
		SET status = ?, version = ?, updated_at = ?, shipping_note = ? WHERE tenant = ? AND order_id = ?`
	changeEventCQL = `/* ` + StmtChangePrefix + EventsByOrder + ` */ INSERT INTO order_events_by_order
		(tenant, order_id, event_id, event_type, detail, event_time, version)
		VALUES (?, ?, ?, ?, ?, ?, ?)`

	// An order's change event rows (ChangeEvents).
	selectEventsCQL = `/* ` + StmtEvents + ` */ SELECT event_id, event_type, detail, event_time, version
		FROM order_events_by_order WHERE tenant = ? AND order_id = ?`

	// byIDColumns are the orders_by_id columns an order is read from, in
	// the order orderScan.dest scans them.
	byIDColumns = `order_id, customer_id, order_month, status, total, currency, request_id, lines, created_at,
		version, shipping_note, updated_at`
	selectByIDCQL = `/* ` + StmtGetOrder + ` */ SELECT ` + byIDColumns + `
		FROM orders_by_id WHERE tenant = ? AND order_id = ?`
	// The reads of one tenant's orders that meet (Store.Order). Named as
	// the single read: a fault armed on get_order, and its metrics, cover
	// both.
	selectByIDsCQL = `/* ` + StmtGetOrder + ` */ SELECT ` + byIDColumns + `
		FROM orders_by_id WHERE tenant = ? AND order_id IN ?`
	// Every order, for the tools that walk them all (ScanOrders).
	scanByIDCQL = `/* ` + StmtScanOrders + ` */ SELECT tenant, ` + byIDColumns + ` FROM orders_by_id`
	// Newest first: the table's clustering order (created_at DESC, order_id ASC).
	selectByCustomerCQL = `/* ` + StmtCustomerOrders + ` */ SELECT order_id, customer_id, order_month, status, total, currency, request_id, created_at,
		version, updated_at
		FROM orders_by_customer_time WHERE tenant = ? AND customer_id = ? AND order_month = ?`
)

// lineUDT is the order_line user type.
type lineUDT struct {
	SKU       string   `cql:"sku"`
	Quantity  int64    `cql:"quantity"`
	UnitPrice *inf.Dec `cql:"unit_price"`
}

// Config shapes how a Store writes.
type Config struct {
	// Batch is the most orders whose rows of one table share one write (an
	// unlogged batch of that table's upsert) when their writes meet, and
	// the most orders of one tenant whose reads by id share one query
	// (order_id IN ...) when they meet (internal/platform/groupcommit); 1: every
	// row and every read alone. Default DefaultBatch.
	Batch int
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
)

// Store writes and reads the projections.
type Store struct {
	s          cassandra.Session
	failpoints *failpoint.Set
	upserts    *groupcommit.Committer[string, row]        // by table
	reads      *groupcommit.Committer[string, *orderRead] // by tenant
}

// row is one order's upsert into one table.
type row struct {
	table, stmt string
	args        []any
}

// NewStore returns a Store with the default Config on a session whose
// keyspace holds the tables. failpoints may be nil.
func NewStore(s cassandra.Session, failpoints *failpoint.Set) *Store {
	return New(Config{}, s, failpoints)
}

// New returns a Store shaped by cfg.
func New(cfg Config, s cassandra.Session, failpoints *failpoint.Set) *Store {
	if cfg.Batch == 0 {
		cfg.Batch = DefaultBatch
	}
	p := &Store{s: s, failpoints: failpoints}
	p.upserts = groupcommit.New(groupcommit.Config{Limit: cfg.Batch, InFlight: inFlight, MaxWeight: maxBatchBytes},
		func(r row) string { return r.table }, rowWeight, p.writeRows)
	p.reads = groupcommit.New(groupcommit.Config{Limit: cfg.Batch, InFlight: inFlight},
		func(r *orderRead) string { return r.tenant }, nil, p.readOrders)
	return p
}

// Tables lists the projection tables in the order a request's rows are
// written, orders_by_id last (it is the recorded outcome).
var Tables = []string{OrdersByCustomerTime, EventsByOrder, OrdersByID}

// Write projects o into every table: orders_by_customer_time and
// order_events_by_order concurrently, then, once both are confirmed,
// orders_by_id. orders_by_id goes last because it is the order's recorded
// outcome: once it exists the whole order is visible, and the workflow
// answers duplicates from it (docs/architecture.md). It returns nil only
// when every write is confirmed at LOCAL_QUORUM; otherwise a *fault.Error
// (Unavailable or OutcomeUnknown), and the whole Write may be replayed.
//
// o is written as created (order.Order.AsCreated: version 1), whatever
// its current state: a finisher rewriting an order that has changed since
// writes at the creation's timestamp, below every change's.
func (p *Store) Write(ctx context.Context, o order.Order) error {
	o = o.AsCreated()
	g, gctx := errgroup.WithContext(ctx)
	for _, table := range Tables {
		if table != OrdersByID {
			g.Go(func() error { return p.WriteOne(gctx, o, table) })
		}
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return p.WriteOne(ctx, o, OrdersByID)
}

// WriteOne projects o into one table (one of Tables).
func (p *Store) WriteOne(ctx context.Context, o order.Order, table string) error {
	stmt, args, err := upsertFor(o, table)
	if err != nil {
		return err
	}
	if err := p.failpoints.Eval(failpoint.ProjectionPrefix + table); err != nil {
		return err
	}
	if err := p.upserts.Add(ctx, row{table: table, stmt: stmt, args: args}); err != nil {
		return cassandra.WriteError("write "+table, err)
	}
	return p.failpoints.Eval(failpoint.AfterProjectionPrefix + table)
}

// writeRows writes rows of one table: one statement, or the rows of
// orders whose writes met, as one unlogged batch (each row keeps its own
// USING TIMESTAMP). A batch is not atomic and need not be: each row is an
// idempotent upsert its order may replay, and a failed batch fails every
// order in it, each of which then settles as any failed write does.
func (p *Store) writeRows(ctx context.Context, rows []row) error {
	if len(rows) == 1 {
		return p.s.Query(rows[0].stmt, rows[0].args...).Idempotent(true).ExecContext(ctx)
	}
	values := make([][]any, len(rows))
	for i, r := range rows {
		values[i] = r.args
	}
	return p.s.ExecBatch(ctx, rows[0].stmt, values)
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

// upsertFor is the statement and values that project o into table; every
// value comes from the order, and the write time (the last value) is the
// claim time.
func upsertFor(o order.Order, table string) (string, []any, error) {
	ts := o.CreatedAt.UnixMicro()
	total, err := decimal(o.Total)
	if err != nil {
		return "", nil, err
	}
	month, err := time.Parse(time.DateOnly, o.Month)
	if err != nil {
		return "", nil, fmt.Errorf("order %s month %q: %w", o.ID, o.Month, err)
	}
	switch table {
	case OrdersByCustomerTime:
		return upsertByCustomerCQL, []any{o.Tenant, o.CustomerID, month, o.CreatedAt, o.ID.String(), o.Status, total, o.Currency, o.RequestID.String(),
			o.CreatedAt, o.Version, ts}, nil
	case OrdersByID:
		lines := make([]lineUDT, len(o.Lines))
		for i, l := range o.Lines {
			price, err := decimal(l.UnitPrice)
			if err != nil {
				return "", nil, err
			}
			lines[i] = lineUDT{SKU: l.SKU, Quantity: l.Quantity, UnitPrice: price}
		}
		return upsertByIDCQL, []any{o.Tenant, o.ID.String(), o.CustomerID, month, o.Status, total, o.Currency, o.RequestID.String(), lines,
			o.CreatedAt, o.CreatedAt, o.Version, ts}, nil
	case EventsByOrder:
		return upsertEventCQL, []any{o.Tenant, o.ID.String(), o.RequestID.String(), EventOrderCreated, CreatedDetail(o),
			o.CreatedAt, o.Version, ts}, nil
	}
	return "", nil, fmt.Errorf("no projection table %q", table)
}

// CreatedDetail is the detail of o's ORDER_CREATED event row.
func CreatedDetail(o order.Order) string { return "order created by request " + o.RequestID.String() }

// ChangeDetail is the detail of c's event row.
func ChangeDetail(c order.Change) string {
	verb := "amended"
	if c.Operation == order.OperationCancel {
		verb = "cancelled"
	}
	return fmt.Sprintf("order %s to version %d by request %s", verb, c.Version, c.RequestID)
}

// ChangeEvent is what an order's event row records of an accepted change:
// enough, with the change request's claim in the ledger, to make the
// change again exactly (order.NewChange).
type ChangeEvent struct {
	ID        uuid.UUID // the change id
	Operation string    // order.OperationCancel or order.OperationAmend
	Version   int64     // the version it made
	RequestID uuid.UUID
	At        time.Time // the change's time (event_time)
}

// ChangeEventOf reads a change event row's cells; false for a row that is
// no change's (the creation's) or that ChangeDetail did not write.
func ChangeEventOf(id uuid.UUID, eventType, detail string, at time.Time, version int64) (ChangeEvent, bool) {
	ev := ChangeEvent{ID: id, Version: version, At: at.UTC()}
	var verb, rid string
	var v int64
	switch eventType {
	case order.EventOrderCancelled:
		ev.Operation = order.OperationCancel
	case order.EventOrderAmended:
		ev.Operation = order.OperationAmend
	default:
		return ChangeEvent{}, false
	}
	if _, err := fmt.Sscanf(detail, "order %s to version %d by request %s", &verb, &v, &rid); err != nil || v != version {
		return ChangeEvent{}, false
	}
	var err error
	if ev.RequestID, err = uuid.Parse(rid); err != nil {
		return ChangeEvent{}, false
	}
	return ev, true
}

// ChangeEvents reads the change event rows of an order (LOCAL_QUORUM),
// oldest version first.
func (p *Store) ChangeEvents(ctx context.Context, tenant string, id uuid.UUID) ([]ChangeEvent, error) {
	iter := p.s.Query(selectEventsCQL, tenant, id.String()).IterContext(ctx)
	var (
		out       []ChangeEvent
		eventID   gocql.UUID
		eventType string
		detail    string
		at        time.Time
		version   *int64
	)
	for iter.Scan(&eventID, &eventType, &detail, &at, &version) {
		if version != nil {
			if ev, ok := ChangeEventOf(uuid.UUID(eventID), eventType, detail, at, *version); ok {
				out = append(out, ev)
			}
		}
		version = nil
	}
	if err := iter.Close(); err != nil {
		return nil, cassandra.ReadError("read an order's events", err)
	}
	slices.SortFunc(out, func(a, b ChangeEvent) int { return cmp.Compare(a.Version, b.Version) })
	return out, nil
}

// ChangeTimestamp is the write time of every cell change c projects: the
// creation write time of its order (created, the order's claim time) plus
// the version c made. Every finisher writes the same; a later version's
// cells win over an earlier one's whatever order the writes arrive in, and
// every change's over the creation's. (Microseconds: versions would need
// to exceed a million to reach the next millisecond's creation.)
func ChangeTimestamp(created time.Time, c order.Change) int64 { return created.UnixMicro() + c.Version }

// WriteChange projects the accepted change c of order o (o as it is at
// c.Version, order.Order.At): orders_by_customer_time and the change's
// event row concurrently, then orders_by_id, each a plain idempotent write
// at ChangeTimestamp. The listing row is found by o.CreatedAt, the
// creation time Write keyed it by (o comes from the recorded order, whose
// created_at is that of the claim that wrote it). Nil only when every
// write is confirmed; the whole WriteChange may be replayed.
func (p *Store) WriteChange(ctx context.Context, o order.Order, c order.Change) error {
	ts := ChangeTimestamp(o.CreatedAt, c)
	month, err := time.Parse(time.DateOnly, o.Month)
	if err != nil {
		return fmt.Errorf("order %s month %q: %w", o.ID, o.Month, err)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		return p.exec(gctx, OrdersByCustomerTime, ts, changeByCustomerCQL,
			c.Status, c.Version, c.At, o.Tenant, o.CustomerID, month, o.CreatedAt, o.ID.String())
	})
	g.Go(func() error {
		return p.exec(gctx, EventsByOrder, ts, changeEventCQL,
			o.Tenant, o.ID.String(), c.ID.String(), c.EventType(), ChangeDetail(c), c.At, c.Version)
	})
	if err := g.Wait(); err != nil {
		return err
	}
	if c.SetsNote() {
		return p.exec(ctx, OrdersByID, ts, changeByIDNoteCQL, c.Status, c.Version, c.At, c.ShippingNote, o.Tenant, o.ID.String())
	}
	return p.exec(ctx, OrdersByID, ts, changeByIDCQL, c.Status, c.Version, c.At, o.Tenant, o.ID.String())
}

// exec runs one change write to table at timestamp ts, with the
// failpoints every write of the table has.
func (p *Store) exec(ctx context.Context, table string, ts int64, stmt string, args ...any) error {
	if err := p.failpoints.Eval(failpoint.ProjectionPrefix + table); err != nil {
		return err
	}
	if err := p.s.Query(stmt, args...).WithTimestamp(ts).Idempotent(true).ExecContext(ctx); err != nil {
		return cassandra.WriteError("write a change to "+table, err)
	}
	return p.failpoints.Eval(failpoint.AfterProjectionPrefix + table)
}

// ErrNotFound: no such order. Like every store's not-found
// (ledger.ErrNotFound), a sentinel *fault.Error of kind NotFound.
var ErrNotFound error = fault.New(fault.ReasonOrderNotFound, errors.New("projection: no such order"))

// Order reads one order by id. Reads of one tenant's orders that meet
// under load share one query (Config.Batch); each gets its own order or
// ErrNotFound, and a failed query fails each of them, as its own read
// failing would.
func (p *Store) Order(ctx context.Context, tenant string, id uuid.UUID) (order.Order, error) {
	r := &orderRead{tenant: tenant, id: id.String()}
	if err := p.reads.Add(ctx, r); err != nil {
		return order.Order{}, cassandra.ReadError("read order", err)
	}
	if !r.found {
		return order.Order{}, ErrNotFound
	}
	return r.got, nil
}

// orderRead is one Order call: what it asks for and, once its query ran,
// what it found.
type orderRead struct {
	tenant, id string
	found      bool
	got        order.Order
}

// readOrders reads the orders of reads (one tenant's): one query, by id or
// by ids. Every read is answered once it returns nil.
func (p *Store) readOrders(ctx context.Context, reads []*orderRead) error {
	tenant := reads[0].tenant
	if len(reads) == 1 {
		var sc orderScan
		err := p.s.Query(selectByIDCQL, tenant, reads[0].id).ScanContext(ctx, sc.dest()...)
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
	iter := p.s.Query(selectByIDsCQL, tenant, ids).IterContext(ctx)
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
	updated  time.Time
}

// dest is what to scan byIDColumns into.
func (sc *orderScan) dest() []any {
	return []any{&sc.orderID, &sc.o.CustomerID, &sc.month, &sc.o.Status, &sc.total, &sc.o.Currency, &sc.reqID, &sc.rawLines,
		&sc.o.CreatedAt, &sc.version, &sc.note, &sc.updated}
}

// order is the row scanned, as an order of tenant.
func (sc *orderScan) order(tenant string) order.Order {
	o := sc.o
	o.Tenant = tenant
	o.ID, o.RequestID, o.Month = uuid.UUID(sc.orderID), uuid.UUID(sc.reqID), sc.month.Format(time.DateOnly)
	o.Total, o.CreatedAt = sc.total.String(), o.CreatedAt.UTC()
	o.Version, o.UpdatedAt = versionOf(sc.version), updatedOf(sc.updated, o.CreatedAt)
	if sc.note != nil {
		o.ShippingNote = *sc.note
	}
	for _, l := range sc.rawLines {
		o.Lines = append(o.Lines, order.Line{SKU: l.SKU, Quantity: l.Quantity, UnitPrice: l.UnitPrice.String()})
	}
	return o
}

// scanPage is how many orders_by_id rows one page of ScanOrders reads.
const scanPage = 500

// ScanOrders calls fn with every order of tenant created in [from, to), as
// Order reads it, in no particular order; it stops at fn's first error. It
// reads the whole table a page at a time (the table is keyed by order):
// a tool's walk, never a request's.
func (p *Store) ScanOrders(ctx context.Context, tenant string, from, to time.Time, fn func(order.Order) error) error {
	iter := p.s.Query(scanByIDCQL).PageSize(scanPage).IterContext(ctx)
	var (
		rowTenant string
		sc        orderScan
	)
	for iter.Scan(append([]any{&rowTenant}, sc.dest()...)...) {
		o := sc.order(rowTenant)
		sc = orderScan{}
		if rowTenant != tenant || o.CreatedAt.Before(from) || !o.CreatedAt.Before(to) {
			continue
		}
		if err := fn(o); err != nil {
			_ = iter.Close()
			return err
		}
	}
	return cassandra.ReadError("scan orders", iter.Close())
}

// Page is one page of a customer's orders.
type Page struct {
	Orders []order.Order
	// NextState is Cassandra's paging state for the next page, nil on the
	// last page. It is raw and unauthenticated: whoever hands it to a client
	// wraps it (internal/adapters/grpcapi signs it) and checks it before passing it back.
	NextState []byte
}

// CustomerOrders lists a customer's orders of one month (month is any day
// in it, taken in UTC) newest first: by created_at descending (to the
// millisecond), orders created in the same millisecond by order id
// ascending. pageSize at a time; state (nil for the first page) is a
// previous page's NextState, passed to Cassandra as it is.
//
// A row that holds a change's cells but not its creation's is left out (a
// page may then hold fewer than pageSize orders): only a change projected
// while a fleet older than migration 0005 still wrote orders_by_customer
// instead writes one, until `orderd copy-listing` brings the creation
// across (docs/operations.md "Upgrading").
func (p *Store) CustomerOrders(ctx context.Context, tenant, customerID string, month time.Time, pageSize int, state []byte) (Page, error) {
	first := month.UTC().AddDate(0, 0, 1-month.UTC().Day())
	iter := p.s.Query(selectByCustomerCQL, tenant, customerID, first).PageSize(pageSize).PageState(state).IterContext(ctx)
	var (
		page           Page
		orderID, reqID gocql.UUID
		m              time.Time
		total          *inf.Dec
		version        *int64
		updated        time.Time
	)
	// PageState disables automatic paging: this iterator covers one page.
	next := iter.PageState()
	o := order.Order{Tenant: tenant}
	for iter.Scan(&orderID, &o.CustomerID, &m, &o.Status, &total, &o.Currency, &reqID, &o.CreatedAt, &version, &updated) {
		if total != nil { // nil: a row without its creation's cells (above)
			o.ID, o.RequestID, o.Month, o.Total, o.CreatedAt = uuid.UUID(orderID), uuid.UUID(reqID), m.Format(time.DateOnly), total.String(), o.CreatedAt.UTC()
			o.Version, o.UpdatedAt = versionOf(version), updatedOf(updated, o.CreatedAt)
			page.Orders = append(page.Orders, o)
		}
		version, updated, o = nil, time.Time{}, order.Order{Tenant: tenant}
	}
	if err := iter.Close(); err != nil {
		return Page{}, cassandra.ReadError("read customer orders", err)
	}
	if len(next) > 0 {
		page.NextState = next
	}
	return page, nil
}

// versionOf is a stored version; rows written before migration 0004 have
// none, and are at version 1.
func versionOf(v *int64) int64 {
	if v == nil || *v < order.CreatedVersion {
		return order.CreatedVersion
	}
	return *v
}

// updatedOf is a stored updated_at, in UTC; created for a row without one.
func updatedOf(updated, created time.Time) time.Time {
	if updated.IsZero() {
		return created
	}
	return updated.UTC()
}

func decimal(s string) (*inf.Dec, error) {
	d, ok := new(inf.Dec).SetString(s)
	if !ok {
		return nil, fmt.Errorf("amount %q is not a decimal", s)
	}
	return d, nil
}
