package projection

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/domain/order"
)

// Table is the projection's storage, statement by statement: the rows of
// orders_by_id, orders_by_customer_time and order_events_by_order. The
// protocol (Store: which rows an order and a change write, in what order,
// at what write time, and what a read makes of the rows) runs on it and on
// nothing else, so the one protocol runs on Cassandra (NewCQLTable) and,
// in unit tests, on projectiontest's in-memory table; the contract suite
// (projectiontest.Run) holds both to the same answers.
//
// Each write is one statement (the CQL table may group the creation rows
// of orders whose writes meet into one batch), sent once; the driver may
// retry it, every write being idempotent. Every cell a write sets carries
// its write time ts (µs): in each cell the larger write time wins, and of
// two at one write time, the larger value. Errors are *fault.Error values
// as cassandra.ReadError and WriteError make them. Rows come back as
// Cassandra returns them: times in UTC to the millisecond, decimals in
// inf.Dec's form, "" for a null text, 0 for a null version, the zero time
// for a null timestamp, nil lines for none.
type Table interface {
	// WriteCreation writes a creation row of table (one of Tables) at ts:
	// of orders_by_id, every cell of r.Order; of orders_by_customer_time,
	// every cell of r.Order but its lines and shipping note; of
	// order_events_by_order, r.Event, in r.Order's partition.
	WriteCreation(ctx context.Context, table string, r Row, ts int64) error
	// WriteChange writes a change's cells into a row of table at ts: of
	// orders_by_id and orders_by_customer_time, r.Order's status, version
	// and updated_at (and, of orders_by_id if r.SetsNote, its shipping
	// note) in the row r.Order's key names; of order_events_by_order,
	// r.Event, in r.Order's partition.
	WriteChange(ctx context.Context, table string, r Row, ts int64) error

	// ReadOrder reads the orders_by_id row of order id (false: none).
	ReadOrder(ctx context.Context, tenant string, id uuid.UUID) (order.Order, bool, error)
	// ReadCustomer reads one page of the orders_by_customer_time partition
	// of a customer's month (month: its first day), pageSize rows at a
	// time (<= 0: all of them), in the table's clustering order, from
	// state (nil: the start; else a NextState this table returned). next
	// is nil on the last page. A row holding a change's cells only comes
	// back with its key and those cells, without a total.
	ReadCustomer(ctx context.Context, tenant, customerID string, month time.Time, pageSize int, state []byte) (rows []order.Order, next []byte, err error)
	// ReadEvents reads an order's order_events_by_order rows, in
	// event_id order.
	ReadEvents(ctx context.Context, tenant string, id uuid.UUID) ([]Event, error)
	// ScanOrders calls fn with every orders_by_id row, in no particular
	// order, reading the whole table a page at a time; it stops at fn's
	// first error and returns it.
	ScanOrders(ctx context.Context, fn func(order.Order) error) error
}

// Row is what one write sets in one row of a projection table.
type Row struct {
	// Order keys the row (orders_by_id: tenant and id; the listing: tenant,
	// customer, month, created_at and id; the events: tenant and id) and
	// holds the order tables' cells.
	Order order.Order
	// Event is the order_events_by_order row.
	Event Event
	// SetsNote: a change's write to orders_by_id sets the shipping note.
	SetsNote bool
}

// Event is one row of order_events_by_order.
type Event struct {
	ID      uuid.UUID // event_id: the creating request, or the change's id
	Type    string
	Detail  string
	Time    time.Time
	Version int64 // the order version the event made (0: none stored)
}
