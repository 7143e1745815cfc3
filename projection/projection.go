package projection

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"
	"gopkg.in/inf.v0"

	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/platform/failpoint"
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
	StmtOrdersByID           cassandra.Stmt = "projection." + OrdersByID
	StmtOrdersByCustomerTime cassandra.Stmt = "projection." + OrdersByCustomerTime
	StmtEventsByOrder        cassandra.Stmt = "projection." + EventsByOrder
	StmtGetOrder             cassandra.Stmt = "projection.get_order"
	StmtCustomerOrders       cassandra.Stmt = "projection.customer_orders"
	StmtEvents               cassandra.Stmt = "projection.order_events"
	StmtScanOrders           cassandra.Stmt = "projection.scan_orders"
	// A change's write to each table.
	StmtChangeOrdersByID           cassandra.Stmt = "projection.change." + OrdersByID
	StmtChangeOrdersByCustomerTime cassandra.Stmt = "projection.change." + OrdersByCustomerTime
	StmtChangeEventsByOrder        cassandra.Stmt = "projection.change." + EventsByOrder
)

// Statements names every statement the store runs.
var Statements = []cassandra.Stmt{StmtOrdersByID, StmtOrdersByCustomerTime, StmtEventsByOrder, StmtGetOrder, StmtCustomerOrders,
	StmtEvents, StmtScanOrders, StmtChangeOrdersByID, StmtChangeOrdersByCustomerTime, StmtChangeEventsByOrder}

// Config shapes how a Store writes.
type Config struct {
	// Batch is the most orders whose rows of one table share one write (an
	// unlogged batch of that table's upsert) when their writes meet, and
	// the most orders of one tenant whose reads by id share one query
	// (order_id IN ...) when they meet (internal/platform/groupcommit); 1: every
	// row and every read alone. Default DefaultBatch.
	Batch int
}

// Store writes and reads the projections: the protocol on a Table.
type Store struct {
	t          Table
	failpoints *failpoint.Set
}

// NewStore returns a Store with the default Config on a session whose
// keyspace holds the tables. failpoints may be nil.
func NewStore(s cassandra.Session, failpoints *failpoint.Set) *Store {
	return New(Config{}, s, failpoints)
}

// New returns a Store shaped by cfg.
func New(cfg Config, s cassandra.Session, failpoints *failpoint.Set) *Store {
	return NewOnTable(NewCQLTable(cfg, s), failpoints)
}

// NewOnTable returns the Store on t. failpoints may be nil.
func NewOnTable(t Table, failpoints *failpoint.Set) *Store {
	return &Store{t: t, failpoints: failpoints}
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
	r, err := createdRow(o)
	if err != nil {
		return err
	}
	ts := o.CreatedAt.UnixMicro()
	g, gctx := errgroup.WithContext(ctx)
	for _, table := range Tables {
		if table != OrdersByID {
			g.Go(func() error { return p.writeCreation(gctx, table, r, ts) })
		}
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return p.writeCreation(ctx, OrdersByID, r, ts)
}

// WriteOne projects o into one table (one of Tables), every cell at the
// claim time (o.CreatedAt, to the microsecond).
func (p *Store) WriteOne(ctx context.Context, o order.Order, table string) error {
	if !slices.Contains(Tables, table) {
		return fmt.Errorf("no projection table %q", table)
	}
	r, err := createdRow(o)
	if err != nil {
		return err
	}
	return p.writeCreation(ctx, table, r, o.CreatedAt.UnixMicro())
}

// createdRow is what o's creation writes: o as the tables hold it, and
// its ORDER_CREATED event row. Made once per Write, for all three tables.
func createdRow(o order.Order) (Row, error) {
	s, err := stored(o)
	if err != nil {
		return Row{}, err
	}
	ev := Event{ID: o.RequestID, Type: EventOrderCreated, Detail: CreatedDetail(o), Time: s.CreatedAt, Version: o.Version}
	return Row{Order: s, Event: ev}, nil
}

// writeCreation writes r, a creation row, into table at ts.
func (p *Store) writeCreation(ctx context.Context, table string, r Row, ts int64) error {
	return p.write(table, func() error { return p.t.WriteCreation(ctx, table, r, ts) })
}

// write runs one write to table with the failpoints every write of the
// table has.
func (p *Store) write(table string, do func() error) error {
	if err := p.failpoints.Eval(failpoint.ProjectionPrefix + table); err != nil {
		return err
	}
	if err := do(); err != nil {
		return err
	}
	return p.failpoints.Eval(failpoint.AfterProjectionPrefix + table)
}

// stored is o's creation as the tables hold it and reads return it:
// decimals in inf.Dec's form, the month as a date, created_at (and
// updated_at, the creation's) in UTC to the millisecond, nil for no lines.
// An order whose amounts or month cannot be stored is refused here.
func stored(o order.Order) (order.Order, error) {
	s := o
	var err error
	if s.Total, err = decimal(o.Total); err != nil {
		return order.Order{}, err
	}
	if s.Month, err = monthOf(o); err != nil {
		return order.Order{}, err
	}
	s.CreatedAt = millis(o.CreatedAt)
	s.UpdatedAt, s.ShippingNote, s.Lines = s.CreatedAt, "", nil
	for _, l := range o.Lines {
		if l.UnitPrice, err = decimal(l.UnitPrice); err != nil {
			return order.Order{}, err
		}
		s.Lines = append(s.Lines, l)
	}
	return s, nil
}

// millis is t as a timestamp cell holds it: UTC, to the millisecond.
func millis(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

// monthOf is o's month as its date column holds it.
func monthOf(o order.Order) (string, error) {
	month, err := time.Parse(time.DateOnly, o.Month)
	if err != nil {
		return "", fmt.Errorf("order %s month %q: %w", o.ID, o.Month, err)
	}
	return month.Format(time.DateOnly), nil
}

// decimal is s in inf.Dec's form, as a decimal cell returns it.
func decimal(s string) (string, error) {
	d, ok := new(inf.Dec).SetString(s)
	if !ok {
		return "", fmt.Errorf("amount %q is not a decimal", s)
	}
	return d.String(), nil
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

// ChangeEvents reads the change event rows of an order (LOCAL_QUORUM),
// oldest version first.
func (p *Store) ChangeEvents(ctx context.Context, tenant string, id uuid.UUID) ([]ChangeEvent, error) {
	rows, err := p.t.ReadEvents(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	var out []ChangeEvent
	for _, r := range rows {
		if r.Version == 0 {
			continue // no version stored: not a change's row
		}
		if ev, ok := ChangeEventOf(r.ID, r.Type, r.Detail, r.Time, r.Version); ok {
			out = append(out, ev)
		}
	}
	slices.SortFunc(out, func(a, b ChangeEvent) int { return cmp.Compare(a.Version, b.Version) })
	return out, nil
}

// ChangeTimestamp is the write time of every cell change c projects: the
// creation write time of its order (created, the order's claim time) plus
// the version c made. Every finisher writes the same; a later version's
// cells win over an earlier one's whatever order the writes arrive in, and
// every change's over the creation's. (In microseconds: from version
// 1,000 a change's write time passes into the next millisecond, which is
// harmless: nothing but the order's own creation and changes writes its
// cells.)
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
	month, err := monthOf(o)
	if err != nil {
		return err
	}
	at := millis(c.At)
	key := order.Order{Tenant: o.Tenant, ID: o.ID, CustomerID: o.CustomerID, Month: month, CreatedAt: millis(o.CreatedAt),
		Status: c.Status, Version: c.Version, UpdatedAt: at, ShippingNote: c.ShippingNote}
	ev := Event{ID: c.ID, Type: c.EventType(), Detail: ChangeDetail(c), Time: at, Version: c.Version}
	change := func(ctx context.Context, table string) error {
		return p.write(table, func() error {
			return p.t.WriteChange(ctx, table, Row{Order: key, Event: ev, SetsNote: c.SetsNote()}, ts)
		})
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return change(gctx, OrdersByCustomerTime) })
	g.Go(func() error { return change(gctx, EventsByOrder) })
	if err := g.Wait(); err != nil {
		return err
	}
	return change(ctx, OrdersByID)
}

// ErrNotFound: no such order. Like every store's not-found
// (ledger.ErrNotFound), a sentinel *fault.Error of kind NotFound.
var ErrNotFound error = fault.New(fault.ReasonOrderNotFound, errors.New("projection: no such order"))

// Order reads one order by id. Reads of one tenant's orders that meet
// under load share one query (Config.Batch); each gets its own order or
// ErrNotFound, and a failed query fails each of them, as its own read
// failing would.
func (p *Store) Order(ctx context.Context, tenant string, id uuid.UUID) (order.Order, error) {
	o, ok, err := p.t.ReadOrder(ctx, tenant, id)
	if err != nil {
		return order.Order{}, err
	}
	if !ok {
		return order.Order{}, ErrNotFound
	}
	return read(o), nil
}

// read is a stored row as the store answers it: a row written before
// migration 0004 has no version, and is at version 1; one without
// updated_at was last updated when created.
func read(o order.Order) order.Order {
	o.Version = max(o.Version, order.CreatedVersion)
	if o.UpdatedAt.IsZero() {
		o.UpdatedAt = o.CreatedAt
	}
	return o
}

// ScanOrders calls fn with every order of tenant created in [from, to), as
// Order reads it, in no particular order; it stops at fn's first error. It
// reads the whole table a page at a time (the table is keyed by order):
// a tool's walk, never a request's.
func (p *Store) ScanOrders(ctx context.Context, tenant string, from, to time.Time, fn func(order.Order) error) error {
	return p.t.ScanOrders(ctx, func(o order.Order) error {
		if o.Tenant != tenant || o.CreatedAt.Before(from) || !o.CreatedAt.Before(to) {
			return nil
		}
		return fn(read(o))
	})
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
	rows, next, err := p.t.ReadCustomer(ctx, tenant, customerID, first, pageSize, state)
	if err != nil {
		return Page{}, err
	}
	page := Page{NextState: next}
	for _, o := range rows {
		if o.Total != "" { // "": a row without its creation's cells (above)
			page.Orders = append(page.Orders, read(o))
		}
	}
	return page, nil
}
