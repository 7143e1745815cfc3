package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"gopkg.in/inf.v0"

	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

// server is the orderd with default settings that TestMain started for the
// whole run.
func server(t *testing.T) *orderdProcess {
	t.Helper()
	if shared == nil {
		t.Fatal("the shared orderd is not running")
	}
	return shared
}

func newRequest(total string) *ordersv1.CreateOrderRequest {
	return &ordersv1.CreateOrderRequest{
		RequestId:  uuid.NewString(),
		CustomerId: "cust-" + uuid.NewString()[:8],
		Total:      total,
		Currency:   "EUR",
	}
}

// create calls CreateOrder and returns the response and the replay header.
func create(t *testing.T, c ordersv1.OrderServiceClient, req *ordersv1.CreateOrderRequest) (*ordersv1.CreateOrderResponse, string, error) {
	t.Helper()
	var header metadata.MD
	resp, err := c.CreateOrder(callCtx(t), req, grpc.Header(&header))
	return resp, replayedHeader(header), err
}

// replayedHeader is a write's idempotency-replayed header ("" if absent).
func replayedHeader(header metadata.MD) string {
	if v := header.Get("idempotency-replayed"); len(v) == 1 {
		return v[0]
	}
	return ""
}

// rows is what the cluster holds for one request, read through a fresh session.
type rows struct {
	ledger     map[string]any // nil if absent
	byID       int
	byCustomer int
	events     int
	byIDTotal  string
	eventIDs   []string
}

func readRows(t *testing.T, requestID, customerID, orderID, month string) rows {
	t.Helper()
	month = storedMonth(month)
	s := freshSession(t)
	ctx := callCtx(t)
	var r rows
	if requestID != "" {
		row := map[string]any{}
		err := s.Query(`SELECT * FROM write_requests_by_id WHERE tenant = ? AND operation = 'CREATE_ORDER' AND request_id = ?`,
			tenant, requestID).SerialConsistency(gocql.LocalSerial).Consistency(gocql.LocalSerial).MapScanContext(ctx, row)
		switch err {
		case nil:
			r.ledger = row
		case gocql.ErrNotFound:
		default:
			t.Fatalf("read ledger: %v", err)
		}
	}
	if orderID != "" {
		iter := s.Query(`SELECT total FROM orders_by_id WHERE tenant = ? AND order_id = ?`, tenant, orderID).IterContext(ctx)
		var total *inf.Dec
		for iter.Scan(&total) {
			r.byID++
			r.byIDTotal = total.String()
		}
		if err := iter.Close(); err != nil {
			t.Fatalf("read orders_by_id: %v", err)
		}
		iter = s.Query(`SELECT event_id FROM order_events_by_order WHERE tenant = ? AND order_id = ?`, tenant, orderID).IterContext(ctx)
		var ev gocql.UUID
		for iter.Scan(&ev) {
			r.events++
			r.eventIDs = append(r.eventIDs, ev.String())
		}
		if err := iter.Close(); err != nil {
			t.Fatalf("read order_events_by_order: %v", err)
		}
	}
	if customerID != "" && month != "" {
		// The customer's partition for the month may hold other orders too:
		// count this order's rows (or all, when no order id is given). An
		// order written by two claims at two claim times has two rows.
		iter := s.Query(`SELECT order_id FROM orders_by_customer_time WHERE tenant = ? AND customer_id = ? AND order_month = ?`,
			tenant, customerID, month).IterContext(ctx)
		var id gocql.UUID
		for iter.Scan(&id) {
			if orderID == "" || id.String() == orderID {
				r.byCustomer++
			}
		}
		if err := iter.Close(); err != nil {
			t.Fatalf("read orders_by_customer_time: %v", err)
		}
	}
	return r
}

// assertExactlyOneOrder checks the rows of a request that completed: its
// claim in the ledger (left PENDING: the order row is the recorded
// outcome), one row per projection, one event keyed by the request.
func assertExactlyOneOrder(t *testing.T, req *ordersv1.CreateOrderRequest, o *ordersv1.Order, wantTotal string) rows {
	t.Helper()
	r := readRows(t, req.RequestId, req.CustomerId, o.OrderId, o.OrderMonth)
	if r.ledger == nil {
		t.Fatalf("no ledger row for request %s", req.RequestId)
	}
	if r.ledger["state"] != "PENDING" {
		t.Errorf("ledger state = %v, want the claim as it was made, PENDING", r.ledger["state"])
	}
	if got := fmt.Sprint(r.ledger["entity_id"]); got != o.OrderId {
		t.Errorf("ledger entity_id = %s, want the order id %s", got, o.OrderId)
	}
	if r.byID != 1 || r.byCustomer != 1 || r.events != 1 {
		t.Errorf("rows: orders_by_id %d, orders_by_customer_time %d, events %d; want 1 each", r.byID, r.byCustomer, r.events)
	}
	if r.byIDTotal != wantTotal {
		t.Errorf("orders_by_id total = %s, want %s", r.byIDTotal, wantTotal)
	}
	if len(r.eventIDs) == 1 && r.eventIDs[0] != req.RequestId {
		t.Errorf("event id = %s, want the request id %s", r.eventIDs[0], req.RequestId)
	}
	return r
}

func TestCreateOrderAcceptOnce(t *testing.T) {
	p := server(t)
	req := newRequest("77.7")
	resp, replayed, err := create(t, p.client, req)
	if err != nil {
		t.Fatalf("CreateOrder: %v", err)
	}
	if resp.Replayed || replayed != "false" {
		t.Errorf("first attempt: replayed=%v header=%q, want false/false", resp.Replayed, replayed)
	}
	o := resp.Order
	if o.Total != "77.70" || o.Currency != "EUR" || o.CustomerId != req.CustomerId || o.RequestId != req.RequestId ||
		o.Status != ordersv1.OrderStatus_ORDER_STATUS_CREATED || o.OrderMonth != o.CreatedAt.AsTime().UTC().Format("2006-01") {
		t.Errorf("unexpected order: %v", o)
	}
	assertExactlyOneOrder(t, req, o, "77.70")

	got, err := p.client.GetOrder(callCtx(t), &ordersv1.GetOrderRequest{OrderId: o.OrderId})
	if err != nil || !proto.Equal(got.Order, o) {
		t.Errorf("GetOrder = %v, %v; want %v", got.GetOrder(), err, o)
	}
	list, err := p.client.ListCustomerOrders(callCtx(t), &ordersv1.ListCustomerOrdersRequest{CustomerId: req.CustomerId, Month: o.OrderMonth[:7]})
	if err != nil || len(list.Orders) != 1 || list.Orders[0].OrderId != o.OrderId {
		t.Errorf("ListCustomerOrders = %v, %v; want the one order", list, err)
	}
	gr, err := p.client.GetRequest(callCtx(t), &ordersv1.GetRequestRequest{RequestId: req.RequestId})
	if err != nil {
		t.Fatalf("GetRequest: %v", err)
	}
	w := gr.Request
	if w.State != ordersv1.RequestState_REQUEST_STATE_COMPLETE || w.OrderId != o.OrderId || w.Operation != "CREATE_ORDER" ||
		w.Attempts != 0 || w.CompletedAt == nil || !w.CreatedAt.AsTime().Equal(o.CreatedAt.AsTime()) || len(w.PayloadFingerprint) != len("sha256:v1:")+64 {
		t.Errorf("GetRequest = %v", w)
	}
}

func TestCreateOrderLostResponseRetryGetsSameOutcome(t *testing.T) {
	p := server(t)
	req := newRequest("12.50")
	first, _, err := create(t, p.client, req)
	if err != nil {
		t.Fatalf("CreateOrder: %v", err)
	}
	// The first response is "lost": the client retries the same request.
	before := assertExactlyOneOrder(t, req, first.Order, "12.50")
	retry, replayed, err := create(t, p.client, req)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if !retry.Replayed || replayed != "true" {
		t.Errorf("retry: replayed=%v header=%q, want true/true", retry.Replayed, replayed)
	}
	want := proto.Clone(first).(*ordersv1.CreateOrderResponse)
	want.Replayed = true
	wb, _ := proto.MarshalOptions{Deterministic: true}.Marshal(want)
	gb, _ := proto.MarshalOptions{Deterministic: true}.Marshal(retry)
	if string(wb) != string(gb) {
		t.Errorf("retry answer differs from the recorded outcome:\n got %v\nwant %v", retry, want)
	}
	after := assertExactlyOneOrder(t, req, first.Order, "12.50")
	if fmt.Sprint(after.ledger["completed_at"]) != fmt.Sprint(before.ledger["completed_at"]) {
		t.Errorf("the retry rewrote the ledger: completed_at %v -> %v", before.ledger["completed_at"], after.ledger["completed_at"])
	}
}

func TestCreateOrderReusedRequestIDIsRejected(t *testing.T) {
	p := server(t)
	req := newRequest("77.70")
	first, _, err := create(t, p.client, req)
	if err != nil {
		t.Fatalf("CreateOrder: %v", err)
	}
	before := assertExactlyOneOrder(t, req, first.Order, "77.70")

	other := proto.Clone(req).(*ordersv1.CreateOrderRequest)
	other.Total = "99.99"
	_, _, err = create(t, p.client, other)
	st := status.Convert(err)
	if st.Code() != codes.FailedPrecondition || reason(st) != "REQUEST_ID_REUSED" {
		t.Fatalf("reuse with another total: %v (reason %q), want FailedPrecondition REQUEST_ID_REUSED", err, reason(st))
	}
	after := assertExactlyOneOrder(t, req, first.Order, "77.70")
	if after.ledger["payload_hash"] != before.ledger["payload_hash"] || fmt.Sprint(after.ledger["completed_at"]) != fmt.Sprint(before.ledger["completed_at"]) {
		t.Errorf("the conflicting attempt changed the ledger row:\nbefore %v\nafter  %v", before.ledger, after.ledger)
	}
}

func TestCreateOrder32ConcurrentIdenticalAttempts(t *testing.T) {
	assertIdenticalAttemptsMakeOneOrder(t, server(t).client, 32)
}

// assertIdenticalAttemptsMakeOneOrder sends n copies of one new request at
// once: every copy is answered with the same order, exactly one of them as
// new, and the rows hold that one order.
func assertIdenticalAttemptsMakeOneOrder(t *testing.T, c ordersv1.OrderServiceClient, n int) {
	t.Helper()
	req := newRequest("5.00")
	var (
		wg    sync.WaitGroup
		resps = make([]*ordersv1.CreateOrderResponse, n)
		errs  = make([]error, n)
		start = make(chan struct{})
	)
	for i := range n {
		wg.Go(func() {
			<-start
			resps[i], errs[i] = c.CreateOrder(callCtx(t), req)
		})
	}
	close(start)
	wg.Wait()
	fresh := 0
	var ref *ordersv1.Order
	for i := range n {
		if errs[i] != nil {
			t.Errorf("attempt %d: %v", i, errs[i])
			continue
		}
		if !resps[i].Replayed {
			fresh++
		}
		if ref == nil {
			ref = resps[i].Order
		} else if !proto.Equal(ref, resps[i].Order) {
			t.Errorf("attempt %d disagrees:\n%v\n%v", i, resps[i].Order, ref)
		}
	}
	if fresh != 1 {
		t.Errorf("%d attempts answered replayed=false, want exactly 1", fresh)
	}
	if ref != nil {
		assertExactlyOneOrder(t, req, ref, "5.00")
	}
}

func TestCreateOrderProjectionFailureStaysPendingThenRetryCompletes(t *testing.T) {
	failing := startOrderd(t, "ORDERD_FAILPOINTS=projection.orders_by_id=error")
	req := newRequest("33.30")
	_, _, err := create(t, failing.client, req)
	if st := status.Convert(err); st.Code() != codes.Unavailable {
		t.Fatalf("with orders_by_id failing: %v, want Unavailable", err)
	}
	r := readRows(t, req.RequestId, "", "", "")
	if r.ledger == nil || r.ledger["state"] != "PENDING" {
		t.Fatalf("ledger after the failed projection: %v, want PENDING", r.ledger)
	}
	var stored struct{ CustomerID, Total, Currency string }
	raw, _ := r.ledger["command"].([]byte)
	if err := json.Unmarshal(raw, &struct {
		CustomerID *string `json:"customer_id"`
		Total      *string `json:"total"`
		Currency   *string `json:"currency"`
	}{&stored.CustomerID, &stored.Total, &stored.Currency}); err != nil || stored.Total != "33.30" || stored.CustomerID != req.CustomerId {
		t.Fatalf("the PENDING row must store the command: %s (%v)", raw, err)
	}
	orderID := fmt.Sprint(r.ledger["entity_id"])
	if n := readRows(t, req.RequestId, "", orderID, "").byID; n != 0 {
		t.Fatalf("orders_by_id has %d rows although its write failed", n)
	}
	gr, err := failing.client.GetRequest(callCtx(t), &ordersv1.GetRequestRequest{RequestId: req.RequestId})
	if err != nil || gr.Request.State != ordersv1.RequestState_REQUEST_STATE_PENDING || gr.Request.LastError == "" {
		t.Fatalf("GetRequest after the failure = %v, %v; want PENDING with last_error", gr, err)
	}

	// The client retries with the same request id, on a healthy orderd.
	resp, replayed, err := create(t, server(t).client, req)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if resp.Order.OrderId != orderID || !resp.Replayed || replayed != "true" {
		t.Errorf("retry answered %v (header %q); want order %s, replayed", resp, replayed, orderID)
	}
	assertExactlyOneOrder(t, req, resp.Order, "33.30")
}

// TestDuplicateSubmissionWorkedExample replays the worked example of a duplicate: request
// 17000000-...-500 for cust-safe, 77.70, submitted twice; the second
// INSERT ... IF NOT EXISTS is not applied and returns the existing row.
func TestDuplicateSubmissionWorkedExample(t *testing.T) {
	p := server(t)
	req := &ordersv1.CreateOrderRequest{RequestId: "17000000-0000-0000-0000-000000000500", CustomerId: "cust-safe", Total: "77.70", Currency: "EUR"}
	first, _, err := create(t, p.client, req)
	if err != nil {
		t.Fatalf("CreateOrder: %v", err)
	}
	if first.Replayed {
		t.Fatalf("the first submission in a fresh keyspace must not be a replay")
	}
	second, replayed, err := create(t, p.client, req)
	if err != nil || !second.Replayed || replayed != "true" || !proto.Equal(first.Order, second.Order) {
		t.Fatalf("submitting exactly the same request again: %v (header %q), %v; want the recorded outcome", second, replayed, err)
	}
	assertExactlyOneOrder(t, req, first.Order, "77.70")

	// The doc's own CQL: the same claim again gives [applied] = false and
	// the existing row.
	s := freshSession(t)
	existing := map[string]any{}
	applied, err := s.Query(`INSERT INTO write_requests_by_id (tenant, operation, request_id, entity_id, payload_hash, state, created_at)
		VALUES (?, 'CREATE_ORDER', 17000000-0000-0000-0000-000000000500, 17171717-1717-1717-1717-171717171700, 'sha256:demo-v1', 'PENDING', '2026-09-08T07:30:00Z')
		IF NOT EXISTS`, tenant).MapScanCASContext(callCtx(t), existing)
	if err != nil || applied {
		t.Fatalf("second claim: applied=%v err=%v; want [applied] = false", applied, err)
	}
	if existing["state"] != "PENDING" || fmt.Sprint(existing["entity_id"]) != first.Order.OrderId {
		t.Errorf("[applied] = false should return the existing row, got %v", existing)
	}
}

// A request larger than the receive limit (ORDERD_GRPC_MAX_RECV_BYTES, 1 MiB)
// is refused before it is read, RESOURCE_EXHAUSTED, and writes nothing; the
// connection keeps serving.
func TestCreateOrderOversizedRequestIsRefusedAndWritesNothing(t *testing.T) {
	p := server(t)
	req := newRequest("10.00")
	req.CustomerId = strings.Repeat("x", 2<<20)
	if _, _, err := create(t, p.client, req); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a 2 MiB request: %v, want ResourceExhausted", err)
	}
	if r := readRows(t, req.RequestId, "", "", ""); r.ledger != nil {
		t.Errorf("an oversized request left a ledger row: %v", r.ledger)
	}
	if _, _, err := create(t, p.client, newRequest("10.00")); err != nil {
		t.Errorf("the next request on the same connection: %v", err)
	}
}

func TestCreateOrderInvalidInputWritesNothing(t *testing.T) {
	p := server(t)
	req := newRequest("-5")
	req.Currency = "EURO"
	_, _, err := create(t, p.client, req)
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument {
		t.Fatalf("invalid request: %v, want InvalidArgument", err)
	}
	fields := map[string]bool{}
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.FieldViolations {
				fields[v.Field] = true
			}
		}
	}
	if !fields["total"] || !fields["currency"] || len(fields) != 2 {
		t.Errorf("field violations = %v, want exactly total and currency", fields)
	}
	if r := readRows(t, req.RequestId, "", "", ""); r.ledger != nil {
		t.Errorf("an invalid request left a ledger row: %v", r.ledger)
	}
	_, err = p.client.GetRequest(callCtx(t), &ordersv1.GetRequestRequest{RequestId: req.RequestId})
	if status.Code(err) != codes.NotFound {
		t.Errorf("GetRequest of the invalid request: %v, want NotFound", err)
	}
}

func reason(st *status.Status) string {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.Reason
		}
	}
	return ""
}

// storedMonth is an API order_month ("YYYY-MM") as the projection tables
// key it (a date: the first day of the month).
func storedMonth(apiMonth string) string {
	if len(apiMonth) == len("2006-01") {
		return apiMonth + "-01"
	}
	return apiMonth
}
