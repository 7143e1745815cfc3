package grpcapi

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/atlasmart/orderd/internal/adapters/orderpb"
	"github.com/atlasmart/orderd/internal/app/workflow"
	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/domain/order"
	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

// Paging of both listings (AIP-158) and ListCustomerOrders' months.
const (
	defaultPageSize = 50
	// maxPageSize caps page_size: a larger value is read as this one.
	maxPageSize = 500
	monthLayout = "2006-01"
	// maxListedMonths bounds a month range (start_month to end_month,
	// inclusive).
	maxListedMonths = 120
	// defaultListedMonths is the range when start_month is not given.
	defaultListedMonths = 12
	// monthsPerCall bounds the reads of month partitions one
	// ListCustomerOrders call makes (workflow.Orders.CustomerOrders), so a
	// call over a range of empty months stays cheap: the page comes back
	// short with a token that starts at the next month.
	monthsPerCall = 12
)

// pageSize applies AIP-158's page_size rules: 0 is the default, above the
// maximum is the maximum, negative is refused.
func pageSize(v *[]fault.Violation, n int32) int {
	switch {
	case n < 0:
		*v = append(*v, fault.Violation{Field: "page_size", Description: fmt.Sprintf("must not be negative (0 means %d; at most %d are returned)", defaultPageSize, maxPageSize)})
		return 0
	case n == 0:
		return defaultPageSize
	}
	return min(int(n), maxPageSize)
}

// monthRange is the months a ListCustomerOrders call lists, newest first
// from end down to start.
type monthRange struct{ start, end time.Time }

// listMonths resolves month, start_month and end_month into a range. A
// continued listing (a page token sent) is not held to the range's width
// again: its token fixes where it ends, and a default end_month that moved
// on to a new month since the first page must not refuse it.
func listMonths(v *[]fault.Violation, req *ordersv1.ListCustomerOrdersRequest, now time.Time) monthRange {
	parse := func(field, s string) (time.Time, bool) {
		m, err := time.Parse(monthLayout, s)
		if err != nil || len(s) != len(monthLayout) {
			*v = append(*v, fault.Violation{Field: field, Description: "must be a month as YYYY-MM (e.g. 2026-09)"})
			return time.Time{}, false
		}
		return m, true
	}
	// month is deprecated (start_month and end_month replace it) but served.
	if legacy := req.GetMonth(); legacy != "" {
		if req.GetStartMonth() != "" || req.GetEndMonth() != "" {
			*v = append(*v, fault.Violation{Field: "month", Description: "deprecated: give start_month and end_month, or month alone, not both"})
			return monthRange{}
		}
		m, ok := parse("month", legacy)
		if !ok {
			return monthRange{}
		}
		return monthRange{start: m, end: m}
	}
	r := monthRange{end: time.Date(now.UTC().Year(), now.UTC().Month(), 1, 0, 0, 0, 0, time.UTC)}
	endOK, startOK := true, true
	if s := req.GetEndMonth(); s != "" {
		r.end, endOK = parse("end_month", s)
	}
	r.start = r.end.AddDate(0, -(defaultListedMonths - 1), 0)
	if s := req.GetStartMonth(); s != "" {
		r.start, startOK = parse("start_month", s)
	}
	if !endOK || !startOK {
		return r
	}
	switch {
	case r.start.After(r.end):
		*v = append(*v, fault.Violation{Field: "start_month", Description: "must not be after end_month"})
	case r.start.Before(r.end.AddDate(0, -(maxListedMonths-1), 0)) && req.GetPageToken() == "":
		*v = append(*v, fault.Violation{Field: "start_month", Description: fmt.Sprintf("at most %d months before end_month (%d months in all)", maxListedMonths-1, maxListedMonths)})
	}
	return r
}

// A ListCustomerOrders position (workflow.MonthPosition) in its page
// token: the month to read and the range's start as the first page
// resolved it (so a default that moves between calls cannot change a
// listing), then Cassandra's paging state within the month (empty: from
// the month's first row).
func encodeOrdersPosition(p workflow.MonthPosition) []byte {
	b := []byte(p.Month.Format(monthLayout) + p.Start.Format(monthLayout))
	return append(b, p.State...)
}

func decodeOrdersPosition(b []byte) (workflow.MonthPosition, error) {
	n := len(monthLayout)
	if len(b) < 2*n {
		return workflow.MonthPosition{}, errPageToken
	}
	month, err1 := time.Parse(monthLayout, string(b[:n]))
	start, err2 := time.Parse(monthLayout, string(b[n:2*n]))
	if err1 != nil || err2 != nil {
		return workflow.MonthPosition{}, errPageToken
	}
	return workflow.MonthPosition{Month: month, Start: start, State: b[2*n:]}, nil
}

// ListCustomerOrders implements ordersv1.OrderServiceServer: it reads the
// range's month partitions newest first, continuing into older months
// until the page is full, the range ends, or monthsPerCall months were
// read.
func (s *Server) ListCustomerOrders(ctx context.Context, req *ordersv1.ListCustomerOrdersRequest) (*ordersv1.ListCustomerOrdersResponse, error) {
	const method = "ListCustomerOrders"
	who, err := caller(ctx)
	if err != nil {
		return nil, s.Status(ctx, method, err)
	}
	v := order.CustomerIDViolations("customer_id", req.GetCustomerId())
	months := listMonths(&v, req, time.Now())
	listed := len(v) == 0
	size := pageSize(&v, req.GetPageSize())
	// The token is bound to the fields as sent (so a default end month that
	// moves on between calls does not invalidate it) and checked only once
	// they are valid: nothing unchecked reaches Cassandra.
	l := customerOrdersListing(who.Tenant, req.GetCustomerId(), req.GetMonth(), req.GetStartMonth(), req.GetEndMonth())
	pos := workflow.MonthPosition{Month: months.end, Start: months.start}
	if raw := s.tokens.openField(&v, listed, l, req.GetPageToken()); raw != nil {
		var err error
		if pos, err = decodeOrdersPosition(raw); err != nil || pos.Month.After(months.end) || pos.Month.Before(pos.Start) {
			v = append(v, badPageToken)
		}
	}
	if len(v) > 0 {
		return nil, s.Status(ctx, method, fault.InvalidArgs(v))
	}
	page, err := s.orders.CustomerOrders(ctx, who.Tenant, req.GetCustomerId(), pos, size, monthsPerCall)
	if err != nil {
		return nil, s.Status(ctx, method, err)
	}
	out := &ordersv1.ListCustomerOrdersResponse{}
	for _, o := range page.Orders {
		out.Orders = append(out.Orders, orderpb.Order(o))
	}
	if page.Next != nil {
		out.NextPageToken = s.tokens.seal(l, encodeOrdersPosition(*page.Next))
	}
	return out, nil
}

// requestsListing is a ListRequests listing: the tenant and the states.
func requestsListing(tenant, states string) listing {
	return listing{"requests", tenant, states}
}

// listStates resolves ListRequests' states: empty is PENDING and FAILED.
func listStates(v *[]fault.Violation, states []ordersv1.RequestState) []ordersv1.RequestState {
	if len(states) == 0 {
		return []ordersv1.RequestState{ordersv1.RequestState_REQUEST_STATE_PENDING, ordersv1.RequestState_REQUEST_STATE_FAILED}
	}
	var out []ordersv1.RequestState
	for i, st := range states {
		switch st {
		case ordersv1.RequestState_REQUEST_STATE_PENDING, ordersv1.RequestState_REQUEST_STATE_FAILED:
			if !slices.Contains(out, st) {
				out = append(out, st)
			}
		default:
			*v = append(*v, fault.Violation{Field: fmt.Sprintf("states[%d]", i), Description: "must be REQUEST_STATE_PENDING or REQUEST_STATE_FAILED"})
		}
	}
	slices.Sort(out)
	return out
}

// ListRequests implements ordersv1.OrderServiceServer: one bounded slice of
// the ledger scan per call, keeping the caller's tenant's requests in the
// asked states.
func (s *Server) ListRequests(ctx context.Context, req *ordersv1.ListRequestsRequest) (*ordersv1.ListRequestsResponse, error) {
	const method = "ListRequests"
	who, err := caller(ctx)
	if err != nil {
		return nil, s.Status(ctx, method, err)
	}
	if !s.requests.Operable() {
		return nil, status.Error(codes.Unimplemented, "listing requests is not available on this server")
	}
	var v []fault.Violation
	states := listStates(&v, req.GetStates())
	listed := len(v) == 0
	size := pageSize(&v, req.GetPageSize())
	names := make([]string, len(states))
	for i, st := range states {
		names[i] = st.String()
	}
	l := requestsListing(who.Tenant, strings.Join(names, ","))
	state := s.tokens.openField(&v, listed, l, req.GetPageToken())
	if len(v) > 0 {
		return nil, s.Status(ctx, method, fault.InvalidArgs(v))
	}
	want := make([]workflow.RequestState, len(states))
	for i, st := range states {
		want[i] = requestState(st)
	}
	page, err := s.requests.List(ctx, who.Tenant, want, size, state)
	if err != nil {
		return nil, s.Status(ctx, method, err)
	}
	out := &ordersv1.ListRequestsResponse{NextPageToken: s.tokens.seal(l, page.Next)}
	for _, rec := range page.Requests {
		out.Requests = append(out.Requests, writeRequest(rec))
	}
	return out, nil
}

// requestState is the workflow's state for one of ListRequests' states.
func requestState(st ordersv1.RequestState) workflow.RequestState {
	if st == ordersv1.RequestState_REQUEST_STATE_FAILED {
		return workflow.RequestFailed
	}
	return workflow.RequestPending
}
