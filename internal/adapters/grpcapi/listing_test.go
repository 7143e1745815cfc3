package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/atlasmart/orderd/internal/adapters/auth"
	"github.com/atlasmart/orderd/internal/app/workflow"
	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/ledger"
	"github.com/atlasmart/orderd/projection"
	"github.com/atlasmart/orderd/projection/projectiontest"
	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

// monthReader holds orders by month, each month newest first (as the
// projection returns them), and pages through a month by offset.
type monthReader struct {
	mu     sync.Mutex
	months map[string][]order.Order // "YYYY-MM" -> orders, newest first
	calls  []string                 // "YYYY-MM/size" per CustomerOrders call
}

func (r *monthReader) Order(context.Context, string, uuid.UUID) (order.Order, error) {
	return order.Order{}, projection.ErrNotFound
}

func (r *monthReader) CustomerOrders(_ context.Context, _, _ string, month time.Time, size int, state []byte) (projection.Page, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := month.Format(monthLayout)
	r.calls = append(r.calls, fmt.Sprintf("%s/%d", m, size))
	all, from := r.months[m], 0
	if len(state) > 0 {
		from, _ = strconv.Atoi(string(state))
	}
	to := min(from+size, len(all))
	page := projection.Page{Orders: all[from:to]}
	if to < len(all) {
		page.NextState = []byte(strconv.Itoa(to))
	}
	return page, nil
}

// add puts n orders into month, newest first, named month#i.
func (r *monthReader) add(month string, n int) {
	if r.months == nil {
		r.months = map[string][]order.Order{}
	}
	for i := range n {
		r.months[month] = append(r.months[month], order.Order{Tenant: "acme", ID: uuid.New(), CustomerID: "cust-1",
			Month: month + "-01", Status: order.StatusCreated, Total: "1.00", Currency: "EUR", RequestID: uuid.New(),
			ShippingNote: fmt.Sprintf("%s#%d", month, i)})
	}
}

func newListAPI(t *testing.T, r workflow.OrderReader) *Server {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := New(Config{PageTokenKey: testKey, Auth: &auth.Authenticator{}}, workflow.New(workflow.Config{}, &spyLedger{}, unusedProjector{}, nil, log), workflow.NewOrders(r, nil), log)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// listAll pages through req and returns every order's marker, page by page.
func listAll(t *testing.T, s *Server, req *ordersv1.ListCustomerOrdersRequest) [][]string {
	t.Helper()
	var pages [][]string
	for range 50 {
		resp, err := s.ListCustomerOrders(acme(), req)
		if err != nil {
			t.Fatalf("page %d: %v", len(pages), err)
		}
		var page []string
		for _, o := range resp.GetOrders() {
			page = append(page, o.GetShippingNote())
			if o.GetOrderMonth() != o.GetShippingNote()[:7] {
				t.Errorf("order_month %q, want the request's format YYYY-MM", o.GetOrderMonth())
			}
		}
		pages = append(pages, page)
		if resp.GetNextPageToken() == "" {
			return pages
		}
		req.PageToken = resp.GetNextPageToken()
	}
	t.Fatal("no last page after 50 pages")
	return nil
}

// A range is listed newest month first, across month partitions, with
// pages filled from the next older month and tokens that resume mid-month.
func TestListCustomerOrdersAcrossMonthsNewestFirst(t *testing.T) {
	r := &monthReader{}
	r.add("2026-09", 3)
	r.add("2026-07", 1)
	r.add("2026-05", 2)
	r.add("2026-04", 5) // outside the range
	s := newListAPI(t, r)
	got := listAll(t, s, &ordersv1.ListCustomerOrdersRequest{CustomerId: "cust-1", StartMonth: "2026-05", EndMonth: "2026-09", PageSize: 2})
	want := [][]string{{"2026-09#0", "2026-09#1"}, {"2026-09#2", "2026-07#0"}, {"2026-05#0", "2026-05#1"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("pages %v, want %v", got, want)
	}
	for _, c := range r.calls {
		if c[:7] == "2026-04" {
			t.Errorf("read %s, outside the range", c)
		}
	}
}

// page_size above the maximum is read as the maximum (AIP-158), not
// refused; 0 is the default.
func TestListPageSizeIsCapped(t *testing.T) {
	for _, tc := range []struct {
		size int32
		want string
	}{{maxPageSize + 1, "2026-09/500"}, {1 << 30, "2026-09/500"}, {0, "2026-09/50"}, {7, "2026-09/7"}} {
		r := &monthReader{}
		s := newListAPI(t, r)
		if _, err := s.ListCustomerOrders(acme(), &ordersv1.ListCustomerOrdersRequest{CustomerId: "cust-1", Month: "2026-09", PageSize: tc.size}); err != nil {
			t.Fatalf("page_size %d: %v", tc.size, err)
		}
		if len(r.calls) != 1 || r.calls[0] != tc.want {
			t.Errorf("page_size %d: reader calls %v, want [%s]", tc.size, r.calls, tc.want)
		}
	}
}

// Without start_month a year of months is listed, ending this month; a call
// reads at most monthsPerCall months and hands back a token for the rest.
func TestListDefaultRangeAndMonthsPerCall(t *testing.T) {
	r := &monthReader{}
	now := time.Now().UTC()
	old := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC).AddDate(0, -(defaultListedMonths - 1), 0).Format(monthLayout)
	r.add(old, 1)
	r.add(time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC).AddDate(0, -defaultListedMonths, 0).Format(monthLayout), 1)
	s := newListAPI(t, r)
	got := listAll(t, s, &ordersv1.ListCustomerOrdersRequest{CustomerId: "cust-1"})
	if fmt.Sprint(got) != fmt.Sprint([][]string{{old + "#0"}}) {
		t.Errorf("pages %v, want only the order of %s (the oldest month of the default range)", got, old)
	}
	if len(r.calls) != defaultListedMonths {
		t.Errorf("reader calls %v, want one per month of the default range", r.calls)
	}

	r = &monthReader{}
	s = newListAPI(t, r)
	resp, err := s.ListCustomerOrders(acme(), &ordersv1.ListCustomerOrdersRequest{CustomerId: "cust-1", StartMonth: "2020-01", EndMonth: "2026-09"})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetOrders()) != 0 || resp.GetNextPageToken() == "" || len(r.calls) != monthsPerCall {
		t.Errorf("empty range: %d orders, token %q, %d months read; want none, a token, %d months", len(resp.GetOrders()), resp.GetNextPageToken(), len(r.calls), monthsPerCall)
	}
}

// A token resumes only the listing it was issued for: the same fields as
// sent, the same tenant.
func TestListTokenBoundToTheRange(t *testing.T) {
	r := &monthReader{}
	r.add("2026-09", 3)
	s := newListAPI(t, r)
	first := &ordersv1.ListCustomerOrdersRequest{CustomerId: "cust-1", StartMonth: "2026-08", EndMonth: "2026-09", PageSize: 1}
	resp, err := s.ListCustomerOrders(acme(), first)
	if err != nil || resp.GetNextPageToken() == "" {
		t.Fatalf("first page: %v, token %q", err, resp.GetNextPageToken())
	}
	for name, req := range map[string]*ordersv1.ListCustomerOrdersRequest{
		"other start": {CustomerId: "cust-1", StartMonth: "2026-07", EndMonth: "2026-09", PageToken: resp.GetNextPageToken()},
		"other end":   {CustomerId: "cust-1", StartMonth: "2026-08", EndMonth: "2026-10", PageToken: resp.GetNextPageToken()},
		"month alone": {CustomerId: "cust-1", Month: "2026-09", PageToken: resp.GetNextPageToken()},
	} {
		_, err := s.ListCustomerOrders(acme(), req)
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want INVALID_ARGUMENT", name, err)
		}
	}
}

// A bad page_size and a bad page_token are reported together: page_size
// does not define the listing, so it does not keep the token from being
// checked.
func TestListReportsPageSizeAndPageTokenTogether(t *testing.T) {
	s := newListAPI(t, &monthReader{})
	_, err := s.ListCustomerOrders(acme(), &ordersv1.ListCustomerOrdersRequest{CustomerId: "cust-1", Month: "2026-09",
		PageSize: -1, PageToken: "not-a-token"})
	wantInvalid(t, err, "page_size", "page_token")

	rs := newRequestsAPI(t, &fakeScanner{}, nil)
	_, err = rs.ListRequests(acme(), &ordersv1.ListRequestsRequest{PageSize: -1, PageToken: "not-a-token"})
	wantInvalid(t, err, "page_size", "page_token")
}

// The widest range with the default end month, started on the last day of
// a month and continued (its token sent) on the first of the next: the
// default end has moved on a month, so the range as sent is now one month
// too wide; the token fixes the range, and the listing goes on. Without a
// token, the same fields are refused.
func TestListContinuedAcrossAMonthEnd(t *testing.T) {
	req := &ordersv1.ListCustomerOrdersRequest{CustomerId: "cust-1", StartMonth: "2016-10"}
	first := time.Date(2026, 9, 30, 23, 59, 0, 0, time.UTC)
	var v []fault.Violation
	if listMonths(&v, req, first); len(v) != 0 {
		t.Fatalf("first page on %s: %v", first.Format(time.DateOnly), v)
	}
	next := first.Add(2 * time.Minute)
	if listMonths(&v, req, next); len(v) != 1 || v[0].Field != "start_month" {
		t.Fatalf("a new listing on %s: violations %v, want one on start_month", next.Format(time.DateOnly), v)
	}
	v = nil
	req.PageToken = "a token of the first page"
	if r := listMonths(&v, req, next); len(v) != 0 || r.start.Format(monthLayout) != "2016-10" {
		t.Errorf("the listing continued on %s: violations %v, range from %s", next.Format(time.DateOnly), v, r.start.Format(monthLayout))
	}
}

// fakeScanner pages through records one Scan call per record, filtered as
// the ledger filters; it records every filter it was given.
type fakeScanner struct {
	records []ledger.Record
	filters []ledger.ScanFilter
	limits  []int
}

func (f *fakeScanner) Scan(ctx context.Context, flt ledger.ScanFilter, limit int, state []byte) (ledger.ScanPage, error) {
	f.filters, f.limits = append(f.filters, flt), append(f.limits, limit)
	i := 0
	if len(state) > 0 {
		i, _ = strconv.Atoi(string(state))
	}
	var page ledger.ScanPage
	if i < len(f.records) {
		if r := f.records[i]; r.Tenant == flt.Tenant && slices.Contains(flt.States, r.State) {
			rs := []ledger.Record{r}
			if err := flt.Resolve(ctx, rs); err != nil {
				return ledger.ScanPage{}, err
			}
			if flt.Keep(rs[0]) {
				page.Records = rs
			}
		}
		if i+1 < len(f.records) {
			page.Next = []byte(strconv.Itoa(i + 1))
		}
	}
	return page, nil
}

// Requeue is not the listing's: no test here requeues through it.
func (f *fakeScanner) Requeue(context.Context, ledger.Key) (ledger.Record, error) {
	return ledger.Record{}, errors.New("fakeScanner: no requeues")
}

func newRequestsAPI(t *testing.T, sc workflow.RequestLedger, proj workflow.Projector) *Server {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	wf := workflow.New(workflow.Config{}, &spyLedger{}, proj, nil, log)
	s, err := New(Config{PageTokenKey: testKey, Auth: &auth.Authenticator{}, Requests: workflow.NewRequests(wf, sc)},
		wf, workflow.NewOrders(&monthReader{}, nil), log)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// ListRequests scans for the caller's tenant only, PENDING and FAILED by
// default, pages with signed tokens bound to the states, and refuses
// COMPLETE, UNSPECIFIED and a negative page_size before scanning.
func TestListRequests(t *testing.T) {
	rec := func(tenant string, st ledger.State) ledger.Record {
		return ledger.Record{Key: ledger.Key{Tenant: tenant, Operation: order.OperationCreate, RequestID: uuid.New()}, State: st, Fingerprint: "f", CreatedAt: time.Now()}
	}
	// A create whose order is recorded: PENDING in the ledger, COMPLETE to
	// its client (a create's completion writes nothing to the ledger).
	proj := projectiontest.NewMemory()
	finished := rec("acme", ledger.Pending)
	_, cmd, err := order.Canonicalize(order.Input{RequestID: finished.RequestID.String(), CustomerID: "cust-1", Total: "1.00", Currency: "EUR"})
	if err != nil {
		t.Fatal(err)
	}
	finished.Command, finished.EntityID = cmd.Encode(), order.ID("acme", finished.RequestID)
	if err := proj.Write(context.Background(), order.New("acme", finished.RequestID, cmd, finished.CreatedAt)); err != nil {
		t.Fatal(err)
	}
	unfinished := rec("acme", ledger.Pending)
	unfinished.Command, unfinished.EntityID = cmd.Encode(), order.ID("acme", unfinished.RequestID)

	sc := &fakeScanner{records: []ledger.Record{unfinished, rec("acme", ledger.Complete), finished, rec("globex", ledger.Pending), rec("acme", ledger.Failed)}}
	s := newRequestsAPI(t, sc, proj)
	var states []ordersv1.RequestState
	req := &ordersv1.ListRequestsRequest{PageSize: 1000}
	for range 10 {
		resp, err := s.ListRequests(acme(), req)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range resp.GetRequests() {
			states = append(states, r.GetState())
			if r.GetTenant() != "acme" {
				t.Errorf("listed %v of another tenant", r)
			}
		}
		if resp.GetNextPageToken() == "" {
			break
		}
		req.PageToken = resp.GetNextPageToken()
	}
	want := []ordersv1.RequestState{ordersv1.RequestState_REQUEST_STATE_PENDING, ordersv1.RequestState_REQUEST_STATE_FAILED}
	if !slices.Equal(states, want) {
		t.Errorf("listed states %v, want %v", states, want)
	}
	if sc.limits[0] != maxPageSize || sc.filters[0].Tenant != "acme" {
		t.Errorf("first scan: limit %d for %q, want %d for acme", sc.limits[0], sc.filters[0].Tenant, maxPageSize)
	}

	first, err := s.ListRequests(acme(), &ordersv1.ListRequestsRequest{States: []ordersv1.RequestState{ordersv1.RequestState_REQUEST_STATE_PENDING}})
	if err != nil || first.GetNextPageToken() == "" {
		t.Fatalf("first page: %v, token %q", err, first.GetNextPageToken())
	}
	scans := len(sc.filters)
	for name, bad := range map[string]*ordersv1.ListRequestsRequest{
		"token of other states": {PageToken: first.GetNextPageToken(), States: []ordersv1.RequestState{ordersv1.RequestState_REQUEST_STATE_FAILED}},
		"COMPLETE":              {States: []ordersv1.RequestState{ordersv1.RequestState_REQUEST_STATE_COMPLETE}},
		"UNSPECIFIED":           {States: []ordersv1.RequestState{ordersv1.RequestState_REQUEST_STATE_UNSPECIFIED}},
		"negative page_size":    {PageSize: -1},
	} {
		if _, err := s.ListRequests(acme(), bad); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want INVALID_ARGUMENT", name, err)
		}
	}
	if len(sc.filters) != scans {
		t.Errorf("a refused request reached the ledger (%d scans, want %d)", len(sc.filters), scans)
	}
	if _, err := newRequestsAPI(t, nil, proj).ListRequests(acme(), &ordersv1.ListRequestsRequest{}); status.Code(err) != codes.Unimplemented {
		t.Errorf("without a scanner: %v, want UNIMPLEMENTED", err)
	}
}
