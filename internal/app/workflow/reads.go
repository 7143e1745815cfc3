package workflow

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/projection"
)

// OrderReader reads orders from the projections (projection.Store).
type OrderReader interface {
	// Order returns an error of kind NotFound when there is no such order.
	Order(ctx context.Context, tenant string, id uuid.UUID) (order.Order, error)
	// CustomerOrders reads one page of a customer's orders of one month,
	// newest first; state is Cassandra's raw paging state (nil for the
	// first page; Page.NextState nil on the last).
	CustomerOrders(ctx context.Context, tenant, customerID string, month time.Time, pageSize int, state []byte) (projection.Page, error)
}

// Orders is the read side of orders (GetOrder, ListCustomerOrders): the
// one door the transport reads them through, so that it knows no store.
type Orders struct {
	reader    OrderReader
	admission Admission
}

// NewOrders returns the order reads over r, each call admitted by a (nil
// admits all).
func NewOrders(r OrderReader, a Admission) *Orders { return &Orders{reader: r, admission: a} }

// admit admits one read of tenant.
func (o *Orders) admit(tenant string) error {
	if o.admission == nil {
		return nil
	}
	return o.admission.Read(tenant)
}

// Get returns the order with id of tenant. Another tenant's order is
// looked up under this tenant's key: it is not found, exactly as an id
// that never existed.
func (o *Orders) Get(ctx context.Context, tenant string, id uuid.UUID) (order.Order, error) {
	if err := o.admit(tenant); err != nil {
		return order.Order{}, err
	}
	return o.reader.Order(ctx, tenant, id)
}

// MonthPosition is where a listing of a customer's orders over a range of
// months stands: the month to read, Cassandra's paging state within it
// (empty: from the month's first row), and the range's oldest month.
// The transport carries it between calls (grpcapi signs it into the page
// token); it is raw and unauthenticated, so whoever hands it out checks
// it before passing it back.
type MonthPosition struct {
	Month, Start time.Time
	State        []byte
}

// CustomerOrdersPage is one call's slice of a listing over months.
type CustomerOrdersPage struct {
	Orders []order.Order
	// Next is where the next call starts; nil when the range is done.
	Next *MonthPosition
}

// CustomerOrders reads a customer's orders from at, newest first: the
// month partitions of the range from at.Month down to at.Start, going on
// into older months until size orders are read, the range ends, or
// maxReads reads were made (so a call over a range of empty months stays
// cheap: the page comes back short, with a position at the next month).
func (o *Orders) CustomerOrders(ctx context.Context, tenant, customerID string, at MonthPosition, size, maxReads int) (CustomerOrdersPage, error) {
	if err := o.admit(tenant); err != nil {
		return CustomerOrdersPage{}, err
	}
	var out CustomerOrdersPage
	for read := 0; ; read++ {
		if read == maxReads || len(out.Orders) == size {
			out.Next = &at
			return out, nil
		}
		page, err := o.reader.CustomerOrders(ctx, tenant, customerID, at.Month, size-len(out.Orders), at.State)
		if err != nil {
			return CustomerOrdersPage{}, err
		}
		out.Orders = append(out.Orders, page.Orders...)
		if len(page.NextState) > 0 {
			at.State = page.NextState
			continue
		}
		if !at.Month.After(at.Start) {
			return out, nil // the range's oldest month is done
		}
		at = MonthPosition{Month: at.Month.AddDate(0, -1, 0), Start: at.Start}
	}
}
