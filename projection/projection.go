package projection

import (
	"context"
	"errors"
	"fmt"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"
	"gopkg.in/inf.v0"

	"github.com/atlasmart/orderd/internal/cassandra"
	"github.com/atlasmart/orderd/internal/failpoint"
	"github.com/atlasmart/orderd/internal/fault"
	"github.com/atlasmart/orderd/internal/order"
)

// Table names, also used to name failpoints ("projection.orders_by_id").
const (
	OrdersByCustomer = "orders_by_customer"
	OrdersByID       = "orders_by_id"
	EventsByOrder    = "order_events_by_order"
)

// EventOrderCreated is the event every created order has.
const EventOrderCreated = "ORDER_CREATED"

const (
	upsertByCustomerCQL = `/* projection.orders_by_customer */ INSERT INTO orders_by_customer
		(tenant, customer_id, order_month, order_id, status, total, currency, request_id, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	upsertByIDCQL = `/* projection.orders_by_id */ INSERT INTO orders_by_id
		(tenant, order_id, customer_id, order_month, status, total, currency, request_id, lines, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	upsertEventCQL = `/* projection.order_events_by_order */ INSERT INTO order_events_by_order
		(tenant, order_id, event_id, event_type, detail, event_time)
		VALUES (?, ?, ?, ?, ?, ?)`

	selectByIDCQL = `/* projection.get_order */ SELECT order_id, customer_id, order_month, status, total, currency, request_id, lines, created_at
		FROM orders_by_id WHERE tenant = ? AND order_id = ?`
	selectByCustomerCQL = `/* projection.customer_orders */ SELECT order_id, customer_id, order_month, status, total, currency, request_id, created_at
		FROM orders_by_customer WHERE tenant = ? AND customer_id = ? AND order_month = ?`
)

// lineUDT is the order_line user type.
type lineUDT struct {
	SKU       string   `cql:"sku"`
	Quantity  int64    `cql:"quantity"`
	UnitPrice *inf.Dec `cql:"unit_price"`
}

// Store writes and reads the projections.
type Store struct {
	s          cassandra.Session
	failpoints *failpoint.Set
}

// NewStore returns a Store on a session whose keyspace holds the tables.
// failpoints may be nil.
func NewStore(s cassandra.Session, failpoints *failpoint.Set) *Store {
	return &Store{s: s, failpoints: failpoints}
}

// Tables lists the projection tables in the order design doc 000 §2 writes
// them one after another.
var Tables = []string{OrdersByCustomer, EventsByOrder, OrdersByID}

// Write projects o into every table: orders_by_customer and
// order_events_by_order concurrently, then, once both are confirmed,
// orders_by_id. orders_by_id goes last because it is the order's recorded
// outcome: once it exists the whole order is visible, and the workflow
// answers duplicates from it (docs/architecture.md). It returns nil only
// when every write is confirmed at LOCAL_QUORUM; otherwise a *fault.Error
// (Unavailable or OutcomeUnknown), and the whole Write may be replayed.
func (p *Store) Write(ctx context.Context, o order.Order) error {
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
	err = p.s.Query(stmt, args...).WithTimestamp(o.CreatedAt.UnixMicro()).Idempotent(true).ExecContext(ctx)
	if err != nil {
		return cassandra.WriteError("write "+table, err)
	}
	return p.failpoints.Eval(failpoint.AfterProjectionPrefix + table)
}

// upsertFor is the statement and values that project o into table; every
// value comes from the order.
func upsertFor(o order.Order, table string) (string, []any, error) {
	total, err := decimal(o.Total)
	if err != nil {
		return "", nil, err
	}
	month, err := time.Parse(time.DateOnly, o.Month)
	if err != nil {
		return "", nil, fmt.Errorf("order %s month %q: %w", o.ID, o.Month, err)
	}
	switch table {
	case OrdersByCustomer:
		return upsertByCustomerCQL, []any{o.Tenant, o.CustomerID, month, o.ID.String(), o.Status, total, o.Currency, o.RequestID.String(), o.CreatedAt, o.CreatedAt}, nil
	case OrdersByID:
		lines := make([]lineUDT, len(o.Lines))
		for i, l := range o.Lines {
			price, err := decimal(l.UnitPrice)
			if err != nil {
				return "", nil, err
			}
			lines[i] = lineUDT{SKU: l.SKU, Quantity: l.Quantity, UnitPrice: price}
		}
		return upsertByIDCQL, []any{o.Tenant, o.ID.String(), o.CustomerID, month, o.Status, total, o.Currency, o.RequestID.String(), lines, o.CreatedAt, o.CreatedAt}, nil
	case EventsByOrder:
		return upsertEventCQL, []any{o.Tenant, o.ID.String(), o.RequestID.String(), EventOrderCreated, "order created by request " + o.RequestID.String(), o.CreatedAt}, nil
	}
	return "", nil, fmt.Errorf("no projection table %q", table)
}

// ErrNotFound: no such order. Like every store's not-found
// (ledger.ErrNotFound), a sentinel *fault.Error of kind NotFound.
var ErrNotFound error = fault.New(fault.ReasonOrderNotFound, errors.New("projection: no such order"))

// Order reads one order by id.
func (p *Store) Order(ctx context.Context, tenant string, id uuid.UUID) (order.Order, error) {
	var (
		o        = order.Order{Tenant: tenant}
		orderID  gocql.UUID
		reqID    gocql.UUID
		month    time.Time
		total    *inf.Dec
		rawLines []lineUDT
	)
	err := p.s.Query(selectByIDCQL, tenant, id.String()).ScanContext(ctx,
		&orderID, &o.CustomerID, &month, &o.Status, &total, &o.Currency, &reqID, &rawLines, &o.CreatedAt)
	if errors.Is(err, gocql.ErrNotFound) {
		return order.Order{}, ErrNotFound
	}
	if err != nil {
		return order.Order{}, cassandra.ReadError("read order", err)
	}
	o.ID, o.RequestID, o.Month = uuid.UUID(orderID), uuid.UUID(reqID), month.Format(time.DateOnly)
	o.Total, o.CreatedAt = total.String(), o.CreatedAt.UTC()
	for _, l := range rawLines {
		o.Lines = append(o.Lines, order.Line{SKU: l.SKU, Quantity: l.Quantity, UnitPrice: l.UnitPrice.String()})
	}
	return o, nil
}

// Page is one page of a customer's orders.
type Page struct {
	Orders []order.Order
	// NextState is Cassandra's paging state for the next page, nil on the
	// last page. It is raw and unauthenticated: whoever hands it to a client
	// wraps it (internal/grpcapi signs it) and checks it before passing it back.
	NextState []byte
}

// CustomerOrders lists a customer's orders of one month (month is any day
// in it), pageSize at a time; state (nil for the first page) is a previous
// page's NextState, passed to Cassandra as it is.
func (p *Store) CustomerOrders(ctx context.Context, tenant, customerID string, month time.Time, pageSize int, state []byte) (Page, error) {
	first := month.UTC().AddDate(0, 0, 1-month.UTC().Day())
	iter := p.s.Query(selectByCustomerCQL, tenant, customerID, first).PageSize(pageSize).PageState(state).IterContext(ctx)
	var (
		page           Page
		orderID, reqID gocql.UUID
		m              time.Time
		total          *inf.Dec
	)
	// PageState disables automatic paging: this iterator covers one page.
	next := iter.PageState()
	o := order.Order{Tenant: tenant}
	for iter.Scan(&orderID, &o.CustomerID, &m, &o.Status, &total, &o.Currency, &reqID, &o.CreatedAt) {
		o.ID, o.RequestID, o.Month, o.Total, o.CreatedAt = uuid.UUID(orderID), uuid.UUID(reqID), m.Format(time.DateOnly), total.String(), o.CreatedAt.UTC()
		page.Orders = append(page.Orders, o)
		o = order.Order{Tenant: tenant}
	}
	if err := iter.Close(); err != nil {
		return Page{}, cassandra.ReadError("read customer orders", err)
	}
	if len(next) > 0 {
		page.NextState = next
	}
	return page, nil
}

func decimal(s string) (*inf.Dec, error) {
	d, ok := new(inf.Dec).SetString(s)
	if !ok {
		return nil, fmt.Errorf("amount %q is not a decimal", s)
	}
	return d, nil
}
