package grpcapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/atlasmart/orderd/internal/adapters/auth"
	"github.com/atlasmart/orderd/internal/app/workflow"
	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/ledger"
	"github.com/atlasmart/orderd/projection"
	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

// spyLedger counts every call that would reach the ledger table. It answers
// Get with ErrNotFound; any method it does not define is the embedded nil
// Store and panics, so a test here cannot reach storage unnoticed.
type spyLedger struct {
	ledger.Store
	mu    sync.Mutex
	calls []string
	rec   *ledger.Record // what Get answers; nil: ErrNotFound
}

func (l *spyLedger) note(m string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, m)
}

func (l *spyLedger) Calls() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.calls...)
}

func (l *spyLedger) Get(context.Context, ledger.Key) (ledger.Record, error) {
	l.note("Get")
	if l.rec != nil {
		return *l.rec, nil
	}
	return ledger.Record{}, ledger.ErrNotFound
}

func (l *spyLedger) Peek(context.Context, ledger.Key) (ledger.Record, error) {
	l.note("Peek")
	return ledger.Record{}, ledger.ErrNotFound
}

func (l *spyLedger) Claim(context.Context, ledger.Record, func(context.Context) error) (bool, ledger.Record, error) {
	l.note("Claim")
	return false, ledger.Record{}, errors.New("spy: no claims")
}

// unusedProjector is a workflow.Projector no test here may reach: every
// method is the embedded nil interface's and panics.
type unusedProjector struct{ workflow.Projector }

// fakeReader serves a customer's orders in pages of one, each page's paging
// state being the index of the next order; it records what it was asked.
type fakeReader struct {
	mu     sync.Mutex
	orders []order.Order
	states [][]byte // the state of every CustomerOrders call, in order
	err    error
}

func (r *fakeReader) Order(context.Context, string, uuid.UUID) (order.Order, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.states = append(r.states, []byte("Order"))
	return order.Order{}, projection.ErrNotFound
}

func (r *fakeReader) CustomerOrders(_ context.Context, _, _ string, _ time.Time, _ int, state []byte) (projection.Page, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.states = append(r.states, bytes.Clone(state))
	if r.err != nil {
		return projection.Page{}, r.err
	}
	i := 0
	if len(state) > 0 {
		i = int(state[0])
	}
	if i >= len(r.orders) {
		return projection.Page{}, nil
	}
	page := projection.Page{Orders: r.orders[i : i+1]}
	if i+1 < len(r.orders) {
		page.NextState = []byte{byte(i + 1)}
	}
	return page, nil
}

func (r *fakeReader) calls() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.states
}

func newTestAPI(t *testing.T, key []byte) (*Server, *spyLedger, *fakeReader) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	l := &spyLedger{}
	wf := workflow.New(workflow.Config{}, l, unusedProjector{}, nil, log)
	r := &fakeReader{}
	s, err := New(Config{PageTokenKey: key, Auth: &auth.Authenticator{}}, wf, workflow.NewOrders(r, nil), log)
	if err != nil {
		t.Fatal(err)
	}
	return s, l, r
}

func TestNewRejectsShortKey(t *testing.T) {
	for _, key := range [][]byte{nil, bytes.Repeat([]byte{1}, MinPageTokenKeyLength-1)} {
		if _, err := New(Config{PageTokenKey: key, Auth: &auth.Authenticator{}}, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil {
			t.Errorf("New accepted a key of %d bytes", len(key))
		}
	}
}

// wantInvalid checks err is INVALID_ARGUMENT with a BadRequest naming
// exactly the given fields.
func wantInvalid(t *testing.T, err error, fields ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want INVALID_ARGUMENT on %v", fields)
	}
	st, info, br, retry := statusDetails(t, err)
	if st.Code() != codes.InvalidArgument {
		t.Fatalf("code %s (%s), want InvalidArgument", st.Code(), st.Message())
	}
	if info.GetReason() != "INVALID_ARGUMENT" {
		t.Errorf("reason %q, want INVALID_ARGUMENT", info.GetReason())
	}
	if retry != nil {
		t.Errorf("RetryInfo %v on invalid input: a client would retry it forever", retry)
	}
	var got []string
	for _, v := range br.GetFieldViolations() {
		got = append(got, v.GetField())
		if v.GetDescription() == "" {
			t.Errorf("violation on %s without a description", v.GetField())
		}
	}
	if strings.Join(got, ",") != strings.Join(fields, ",") {
		t.Errorf("violations on %v, want %v", got, fields)
	}
}

const validID = "17000000-0000-0000-0000-000000000500"

// Every string field of every RPC is bounded, and every violation is
// INVALID_ARGUMENT before anything reaches storage.
func TestFieldLimits(t *testing.T) {
	long := func(n int) string { return strings.Repeat("x", n) }
	validCreate := func() *ordersv1.CreateOrderRequest {
		return &ordersv1.CreateOrderRequest{RequestId: validID, CustomerId: "cust-1", Total: "7.70", Currency: "EUR",
			Lines: []*ordersv1.OrderLine{{Sku: "sku-1", Quantity: 1, UnitPrice: "7.70"}}}
	}
	create := func(mut func(r *ordersv1.CreateOrderRequest)) func(s *Server) error {
		return func(s *Server) error {
			r := validCreate()
			mut(r)
			_, err := s.CreateOrder(acme(), r)
			return err
		}
	}
	list := func(r *ordersv1.ListCustomerOrdersRequest) func(s *Server) error {
		return func(s *Server) error { _, err := s.ListCustomerOrders(acme(), r); return err }
	}
	getReq := func(r *ordersv1.GetRequestRequest) func(s *Server) error {
		return func(s *Server) error { _, err := s.GetRequest(acme(), r); return err }
	}
	getOrder := func(r *ordersv1.GetOrderRequest) func(s *Server) error {
		return func(s *Server) error { _, err := s.GetOrder(acme(), r); return err }
	}
	tests := []struct {
		name   string
		call   func(s *Server) error
		fields []string
	}{
		{"CreateOrder request_id too long", create(func(r *ordersv1.CreateOrderRequest) { r.RequestId = validID + long(1<<16) }), []string{"request_id"}},
		{"CreateOrder customer_id too long", create(func(r *ordersv1.CreateOrderRequest) { r.CustomerId = long(order.MaxIDLength + 1) }), []string{"customer_id"}},
		{"CreateOrder customer_id over 64 KiB", create(func(r *ordersv1.CreateOrderRequest) { r.CustomerId = long(1<<16 + 1) }), []string{"customer_id"}},
		{"CreateOrder total too long", create(func(r *ordersv1.CreateOrderRequest) { r.Total = "7.70" + strings.Repeat("0", order.MaxAmountLength) }), []string{"total"}},
		{"CreateOrder currency too long", create(func(r *ordersv1.CreateOrderRequest) { r.Currency = "EUR" + long(1<<16) }), []string{"currency"}},
		{"CreateOrder sku too long", create(func(r *ordersv1.CreateOrderRequest) { r.Lines[0].Sku = long(order.MaxIDLength + 1) }), []string{"lines[0].sku"}},
		{"CreateOrder unit_price too long", create(func(r *ordersv1.CreateOrderRequest) {
			r.Lines[0].UnitPrice = "7.70" + strings.Repeat("0", order.MaxAmountLength)
		}), []string{"lines[0].unit_price"}},

		{"GetRequest request_id too long", getReq(&ordersv1.GetRequestRequest{RequestId: long(1 << 16)}), []string{"request_id"}},
		{"GetRequest operation too long", getReq(&ordersv1.GetRequestRequest{RequestId: validID, Operation: long(1<<16 + 1)}), []string{"operation"}},
		{"GetRequest unknown operation", getReq(&ordersv1.GetRequestRequest{RequestId: validID, Operation: "DELETE_ORDER"}), []string{"operation"}},
		{"GetRequest operation in lower case", getReq(&ordersv1.GetRequestRequest{RequestId: validID, Operation: "create_order"}), []string{"operation"}},
		{"GetRequest both bad", getReq(&ordersv1.GetRequestRequest{RequestId: "x", Operation: "x"}), []string{"request_id", "operation"}},

		{"GetOrder order_id too long", getOrder(&ordersv1.GetOrderRequest{OrderId: long(1 << 16)}), []string{"order_id"}},

		{"List customer_id too long", list(&ordersv1.ListCustomerOrdersRequest{CustomerId: long(order.MaxIDLength + 1), Month: "2026-09"}), []string{"customer_id"}},
		{"List customer_id over 64 KiB", list(&ordersv1.ListCustomerOrdersRequest{CustomerId: long(1<<16 + 1), Month: "2026-09"}), []string{"customer_id"}},
		{"List customer_id missing", list(&ordersv1.ListCustomerOrdersRequest{Month: "2026-09"}), []string{"customer_id"}},
		{"List customer_id with a space", list(&ordersv1.ListCustomerOrdersRequest{CustomerId: "cust 1", Month: "2026-09"}), []string{"customer_id"}},
		{"List month too long", list(&ordersv1.ListCustomerOrdersRequest{CustomerId: "cust-1", Month: "2026-09" + long(1<<16)}), []string{"month"}},
		{"List page_token too long", list(&ordersv1.ListCustomerOrdersRequest{CustomerId: "cust-1", Month: "2026-09", PageToken: long(MaxPageTokenLength + 1)}), []string{"page_token"}},
		{"List page_token too long with a bad customer", list(&ordersv1.ListCustomerOrdersRequest{CustomerId: "", Month: "2026-09", PageToken: long(MaxPageTokenLength + 1)}), []string{"customer_id", "page_token"}},
		{"List bad month with a well-formed token", list(&ordersv1.ListCustomerOrdersRequest{CustomerId: "cust-1", Month: "2026-13",
			PageToken: testTokens(t).seal(testListing, testState)}), []string{"month"}},
		{"List page_size negative", list(&ordersv1.ListCustomerOrdersRequest{CustomerId: "cust-1", Month: "2026-09", PageSize: -1}), []string{"page_size"}},
		{"List month with start_month", list(&ordersv1.ListCustomerOrdersRequest{CustomerId: "cust-1", Month: "2026-09", StartMonth: "2026-08"}), []string{"month"}},
		{"List start_month after end_month", list(&ordersv1.ListCustomerOrdersRequest{CustomerId: "cust-1", StartMonth: "2026-10", EndMonth: "2026-09"}), []string{"start_month"}},
		{"List range over 120 months", list(&ordersv1.ListCustomerOrdersRequest{CustomerId: "cust-1", StartMonth: "2016-09", EndMonth: "2026-09"}), []string{"start_month"}},
		{"List end_month as a date", list(&ordersv1.ListCustomerOrdersRequest{CustomerId: "cust-1", EndMonth: "2026-09-01"}), []string{"end_month"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, l, r := newTestAPI(t, testKey)
			wantInvalid(t, tc.call(s), tc.fields...)
			if c := l.Calls(); len(c) > 0 {
				t.Errorf("the ledger was called: %v", c)
			}
			if c := r.calls(); len(c) > 0 {
				t.Errorf("the projections were read: %q", c)
			}
		})
	}
}

// The limits are inclusive: values at them get past validation.
func TestFieldLimitsInclusive(t *testing.T) {
	s, l, r := newTestAPI(t, testKey)
	ctx := acme()
	if _, err := s.GetRequest(ctx, &ordersv1.GetRequestRequest{RequestId: validID, Operation: order.OperationCreate}); status.Code(err) != codes.NotFound {
		t.Errorf("GetRequest with operation %s: %v, want NotFound from the ledger", order.OperationCreate, err)
	}
	if _, err := s.GetRequest(ctx, &ordersv1.GetRequestRequest{RequestId: validID}); status.Code(err) != codes.NotFound {
		t.Errorf("GetRequest with the default operation: %v, want NotFound from the ledger", err)
	}
	if got := l.Calls(); len(got) != 2 {
		t.Errorf("ledger calls %v, want two Gets", got)
	}
	req := &ordersv1.ListCustomerOrdersRequest{CustomerId: strings.Repeat("c", order.MaxIDLength), Month: "2026-09", PageSize: maxPageSize}
	if _, err := s.ListCustomerOrders(ctx, req); err != nil {
		t.Errorf("ListCustomerOrders with a %d-byte customer_id: %v", order.MaxIDLength, err)
	}
	if len(r.calls()) != 1 {
		t.Errorf("reader calls %q, want one", r.calls())
	}
}

func TestListPagesThroughSignedTokens(t *testing.T) {
	s, _, r := newTestAPI(t, testKey)
	for i := range 3 {
		r.orders = append(r.orders, order.Order{Tenant: "acme", ID: uuid.New(), CustomerID: "cust-1", Month: "2026-09-01",
			Status: order.StatusCreated, Total: "1.00", Currency: "EUR", RequestID: uuid.New(), CreatedAt: time.Unix(int64(i), 0)})
	}
	ctx := acme()
	req := &ordersv1.ListCustomerOrdersRequest{CustomerId: "cust-1", Month: "2026-09", PageSize: 1}
	var seen int
	for page := 0; ; page++ {
		resp, err := s.ListCustomerOrders(ctx, req)
		if err != nil {
			t.Fatalf("page %d: %v", page, err)
		}
		seen += len(resp.Orders)
		tok := resp.GetNextPageToken()
		if tok == "" {
			break
		}
		if bytes.Contains([]byte(tok), []byte{byte(page + 1)}) {
			t.Errorf("token %q is not opaque", tok)
		}
		req = proto.Clone(req).(*ordersv1.ListCustomerOrdersRequest)
		req.PageToken = tok
	}
	if seen != 3 {
		t.Errorf("listed %d orders over the pages, want 3", seen)
	}
	want := [][]byte{{}, {1}, {2}}
	got := r.calls()
	if len(got) != len(want) {
		t.Fatalf("reader states %v, want %v", got, want)
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Errorf("call %d: state %v, want %v (the token must carry the paging state unchanged)", i, got[i], want[i])
		}
	}
}

// A token that fails to decode or verify, or was issued for another
// listing, is INVALID_ARGUMENT on page_token and never reaches the reader.
func TestListRejectsForeignTokens(t *testing.T) {
	issuer, _, r := newTestAPI(t, testKey)
	r.orders = []order.Order{{Tenant: "acme", CustomerID: "cust-1", Month: "2026-09-01", Total: "1.00", Currency: "EUR"}, {Tenant: "acme", CustomerID: "cust-1", Month: "2026-09-01", Total: "2.00", Currency: "EUR"}}
	resp, err := issuer.ListCustomerOrders(acme(), &ordersv1.ListCustomerOrdersRequest{CustomerId: "cust-1", Month: "2026-09", PageSize: 1})
	if err != nil || resp.GetNextPageToken() == "" {
		t.Fatalf("first page: %v, token %q", err, resp.GetNextPageToken())
	}
	tok := resp.GetNextPageToken()
	raw, _ := pageTokenEncoding.DecodeString(tok)
	tampered := bytes.Clone(raw)
	tampered[1] ^= 0x01

	tests := []struct {
		name     string
		key      []byte
		customer string
		month    string
		token    string
	}{
		{"forged raw paging state (valid base64)", testKey, "cust-1", "2026-09", pageTokenEncoding.EncodeToString([]byte("\x00\x04forged-paging-state"))},
		{"not base64", testKey, "cust-1", "2026-09", "%%%"},
		{"tampered", testKey, "cust-1", "2026-09", pageTokenEncoding.EncodeToString(tampered)},
		{"truncated", testKey, "cust-1", "2026-09", tok[:len(tok)-4]},
		{"another customer", testKey, "cust-2", "2026-09", tok},
		{"another month", testKey, "cust-1", "2026-10", tok},
		{"another key", bytes.Repeat([]byte{0x33}, MinPageTokenKeyLength), "cust-1", "2026-09", tok},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _, r := newTestAPI(t, tc.key)
			_, err := s.ListCustomerOrders(acme(), &ordersv1.ListCustomerOrdersRequest{
				CustomerId: tc.customer, Month: tc.month, PageToken: tc.token})
			wantInvalid(t, err, "page_token")
			_, _, br, _ := statusDetails(t, err)
			if d := br.GetFieldViolations()[0].GetDescription(); d != "not a token from a previous page of this listing" {
				t.Errorf("description %q", d)
			}
			if c := r.calls(); len(c) > 0 {
				t.Errorf("the reader was called with %q", c)
			}
		})
	}
}

// A reader's unmapped error (driver text and all) reaches the client as a
// bare "internal error".
func TestListInternalErrorCarriesNoDriverText(t *testing.T) {
	s, _, r := newTestAPI(t, testKey)
	r.err = errors.New("gocql: no hosts available in the pool: 127.0.0.2:9042 secret")
	_, err := s.ListCustomerOrders(acme(), &ordersv1.ListCustomerOrdersRequest{CustomerId: "cust-1", Month: "2026-09"})
	st, _, _, _ := statusDetails(t, err)
	if st.Code() != codes.Internal || st.Message() != "internal error" {
		t.Errorf("status %s %q, want Internal \"internal error\"", st.Code(), st.Message())
	}
	if len(st.Details()) != 0 {
		t.Errorf("details %v on an internal error", st.Details())
	}
}

// GetRequest's last_error carries a stable reason, never text a ledger row
// may hold from an older version (driver messages, hosts).
func TestGetRequestLastErrorIsAReason(t *testing.T) {
	for stored, want := range map[string]string{
		"":                    "",
		"CLUSTER_UNAVAILABLE": "CLUSTER_UNAVAILABLE",
		"OUTCOME_UNKNOWN":     "OUTCOME_UNKNOWN",
		"the database is unavailable; retry with the same request_id: gocql: no response from 127.0.0.2:9042": "INTERNAL",
	} {
		s, l, _ := newTestAPI(t, testKey)
		l.rec = &ledger.Record{Key: ledger.Key{Tenant: "acme", Operation: order.OperationCreate, RequestID: uuid.MustParse(validID)},
			State: ledger.Pending, Attempts: 1, LastError: stored}
		resp, err := s.GetRequest(acme(), &ordersv1.GetRequestRequest{RequestId: validID})
		if err != nil {
			t.Fatalf("GetRequest: %v", err)
		}
		if got := resp.GetRequest().GetLastError(); got != want {
			t.Errorf("stored last_error %q answered as %q, want %q", stored, got, want)
		}
	}
}
