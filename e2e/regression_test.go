package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/ledger"
	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

// Regression tests for defects that only the whole binary on the real
// cluster shows. Each failed on the code as it landed (7fe1df1).

// TestFailingRequestWithVisibleOrderIsNeverDeadLettered (defect 2): the
// order is listed under its customer (orders_by_customer_time written) but
// the rest keeps failing (failpoint after-projection.orders_by_customer_time).
// However many attempts fail, the request stays PENDING (never FAILED /
// REQUEST_FAILED, which would contradict the listed order), its last_error
// is a stable reason (no driver text), clients are told to retry, and once
// the fault is gone it completes with the order that was already listed.
func TestFailingRequestWithVisibleOrderIsNeverDeadLettered(t *testing.T) {
	faulty := startOrderd(t, append([]string{"ORDERD_RECONCILE_MAX_ATTEMPTS=2",
		"ORDERD_FAILPOINTS=after-projection.orders_by_customer_time=error"}, fastReconciler...)...)
	req := newRequest("19.99")
	if _, _, err := create(t, faulty.client, req); status.Code(err) != codes.Unavailable {
		t.Fatalf("CreateOrder with its writes failing: %v, want Unavailable", err)
	}
	orderID := order.ID(tenant, uuid.MustParse(req.RequestId)).String()
	claim := readRows(t, req.RequestId, "", "", "").ledger
	if claim == nil {
		t.Fatal("no claim")
	}
	month := order.MonthOf(claim["created_at"].(time.Time))
	if n := readRows(t, req.RequestId, req.CustomerId, orderID, month).byCustomer; n != 1 {
		t.Fatalf("the order should be listed under its customer before the failure: %d rows", n)
	}
	// Let the reconciler fail it well past the maximum attempts.
	var w *ordersv1.WriteRequest
	if _, err := eventually(30*time.Second, func() error {
		resp, err := faulty.client.GetRequest(callCtx(t), &ordersv1.GetRequestRequest{RequestId: req.RequestId})
		if err != nil {
			return err
		}
		w = resp.Request
		if w.State != ordersv1.RequestState_REQUEST_STATE_PENDING {
			t.Fatalf("request with a visible order went %v (attempts %d, last_error %q): must stay PENDING", w.State, w.Attempts, w.LastError)
		}
		if w.Attempts < 4 {
			return status.Errorf(codes.Unavailable, "attempts %d", w.Attempts)
		}
		return nil
	}); err != nil {
		t.Fatalf("reconciler did not keep retrying: %v", err)
	}
	if w.LastError != "CLUSTER_UNAVAILABLE" {
		t.Errorf("last_error = %q, want the stable reason CLUSTER_UNAVAILABLE", w.LastError)
	}
	_, _, err := create(t, faulty.client, req)
	if st := status.Convert(err); st.Code() != codes.Unavailable || strings.Contains(st.Message(), "failpoint") {
		t.Errorf("client retry while the fault lasts: %v, want Unavailable with no internals", err)
	}
	if n := scrape(t, faulty, "orderd_reconciler_stuck_attempts_total"); n < 1 {
		t.Errorf("orderd_reconciler_stuck_attempts_total = %v, want >= 1", n)
	}
	if err := faulty.stop(); err != nil {
		t.Fatal(err)
	}

	healthy := startOrderd(t, fastReconciler...)
	waitRequestState(t, healthy.client, req.RequestId, ordersv1.RequestState_REQUEST_STATE_COMPLETE, 30*time.Second)
	resp, _, err := create(t, healthy.client, req)
	if err != nil {
		t.Fatal(err)
	}
	assertExactlyOneOrder(t, req, resp.Order, "19.99")
}

// deleteLedgerRow removes a request's ledger row as its retention TTL would
// (the table is LWT-only, so the delete is conditional too).
func deleteLedgerRow(t *testing.T, requestID string) {
	t.Helper()
	applied, err := freshSession(t).Query(`DELETE FROM write_requests_by_id WHERE tenant = ? AND operation = 'CREATE_ORDER' AND request_id = ? IF EXISTS`,
		tenant, requestID).SerialConsistency(gocql.LocalSerial).MapScanCASContext(callCtx(t), map[string]any{})
	if err != nil || !applied {
		t.Fatalf("expire ledger row of %s: applied=%v %v", requestID, applied, err)
	}
}

// TestLateRetryAfterLedgerExpiryNeverRewritesTheOrder (defect 3): once a
// request's ledger row is gone (past its retention), a retry of the same
// request_id meets the recorded order before any claim. A different
// payload must be rejected as REQUEST_ID_REUSED and change nothing (no
// overwritten order, no ledger row); the same payload is answered with the
// original order as a replay (its created_at, not a new one).
//
// The late retries go to another orderd instance: the one that answered
// first holds the outcome in its replay cache and would answer from it.
func TestLateRetryAfterLedgerExpiryNeverRewritesTheOrder(t *testing.T) {
	req := newRequest("30.00")
	first, _, err := create(t, server(t).client, req)
	if err != nil {
		t.Fatal(err)
	}
	deleteLedgerRow(t, req.RequestId)
	c := startOrderd(t).client

	other := proto.Clone(req).(*ordersv1.CreateOrderRequest)
	other.Total = "999.00"
	other.CustomerId = "cust-other"
	_, _, err = create(t, c, other)
	if st := status.Convert(err); st.Code() != codes.FailedPrecondition || reason(st) != "REQUEST_ID_REUSED" {
		t.Fatalf("late retry with another payload: %v, want FailedPrecondition REQUEST_ID_REUSED", err)
	}
	if r := readRows(t, req.RequestId, "", first.Order.OrderId, ""); r.ledger != nil || r.byIDTotal != "30.00" || r.events != 1 {
		t.Fatalf("after the rejected late retry: ledger %v, orders_by_id total %s, events %d; want no ledger row and the order unchanged",
			r.ledger, r.byIDTotal, r.events)
	}
	if n := readRows(t, "", other.CustomerId, first.Order.OrderId, first.Order.OrderMonth).byCustomer; n != 0 {
		t.Fatalf("the rejected payload listed the order under customer %s", other.CustomerId)
	}

	time.Sleep(5 * time.Millisecond) // a later claim time than the first, at millisecond precision
	again, replayed, err := create(t, c, req)
	if err != nil {
		t.Fatalf("late retry with the same payload: %v", err)
	}
	if !again.Replayed || replayed != "true" {
		t.Errorf("late retry with the same payload: replayed=%v header=%q, want a replay", again.Replayed, replayed)
	}
	if !again.Order.CreatedAt.AsTime().Equal(first.Order.CreatedAt.AsTime()) {
		t.Errorf("late retry answered created_at %v, want the original %v", again.Order.CreatedAt.AsTime(), first.Order.CreatedAt.AsTime())
	}
	// Answered from the recorded order: no claim, one of each row.
	r := readRows(t, req.RequestId, req.CustomerId, first.Order.OrderId, first.Order.OrderMonth)
	if r.ledger != nil || r.byID != 1 || r.byCustomer != 1 || r.events != 1 || r.byIDTotal != "30.00" {
		t.Errorf("after the late retries: ledger %v, orders_by_id %d (total %s), orders_by_customer_time %d, events %d; want no claim and one of each",
			r.ledger, r.byID, r.byIDTotal, r.byCustomer, r.events)
	}
}

// TestServeRefusesAKeyspaceNotFullyMigrated (the cursor part of defect 1):
// a schema version that is not recorded (half applied) and then re-run
// would reset the reconciler's cursors past entries written in between; so
// orderd does not serve until every version is applied.
func TestServeRefusesAKeyspaceNotFullyMigrated(t *testing.T) {
	isolated(t)
	ks := "e2e_partial_" + uuid.NewString()[:8]
	if out, err := runOrderd(context.Background(), "migrate", "--keyspace", ks); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	t.Cleanup(func() { dropKeyspace(context.Background(), ks) })
	s := freshSession(t)
	if applied, err := s.Query(`DELETE FROM `+ks+`.schema_migrations WHERE version = 2 IF EXISTS`).
		SerialConsistency(gocql.LocalSerial).MapScanCASContext(callCtx(t), map[string]any{}); err != nil || !applied {
		t.Fatalf("un-record version 2: %v %v", applied, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := runOrderd(ctx, "serve", "--keyspace", ks, "--grpc-addr", "127.0.0.1:0", "--metrics-addr", "")
	if err == nil || !strings.Contains(out, "0002_reconciler") || !strings.Contains(out, "orderd migrate") {
		t.Fatalf("orderd serve on a keyspace missing version 2: err %v, output:\n%s\nwant a refusal naming the version and `orderd migrate`", err, out)
	}
}

// TestUnreadableCommandIsDeadLetteredThenRequeued: the one request the
// reconciler sets aside is one whose stored command cannot be read (nothing
// of it was written). It ends FAILED with a stable reason and no order;
// once the row is repaired, `orderd requeue` (entry first, dated by the
// cluster's clock) brings it back and it completes.
func TestUnreadableCommandIsDeadLetteredThenRequeued(t *testing.T) {
	s := freshSession(t)
	ctx := callCtx(t)
	id, token := uuid.New(), uuid.New()
	orderID := order.ID(tenant, id)
	created := time.Now().UTC().Add(-time.Minute).Truncate(time.Millisecond)
	if applied, err := s.Query(`INSERT INTO write_requests_by_id
		(tenant, operation, request_id, entity_id, payload_hash, command, state, created_at, attempts, claim_token)
		VALUES (?, 'CREATE_ORDER', ?, ?, 'sha256:v1:garbage', ?, 'PENDING', ?, 0, ?) IF NOT EXISTS USING TTL 3600`,
		tenant, id.String(), orderID.String(), []byte("{not json"), created, token.String()).
		SerialConsistency(gocql.LocalSerial).MapScanCASContext(ctx, map[string]any{}); err != nil || !applied {
		t.Fatalf("seed a PENDING request with an unreadable command: %v %v", applied, err)
	}
	now := time.Now().UTC()
	if err := s.Query(`INSERT INTO due_requests (shard, due_bucket, tenant, operation, request_id, claim_token, created_at, not_before)
		VALUES (?, ?, ?, 'CREATE_ORDER', ?, ?, ?, ?) USING TTL 3600`,
		ledger.ShardOf(created), ledger.BucketOf(now), tenant, id.String(), token.String(), created, now).ExecContext(ctx); err != nil {
		t.Fatal(err)
	}
	rec := startOrderd(t, fastReconciler...)
	w := waitRequestState(t, rec.client, id.String(), ordersv1.RequestState_REQUEST_STATE_FAILED, 30*time.Second)
	if w.LastError != "COMMAND_UNREADABLE" {
		t.Errorf("last_error = %q, want COMMAND_UNREADABLE", w.LastError)
	}
	if _, err := rec.client.GetOrder(callCtx(t), &ordersv1.GetOrderRequest{OrderId: orderID.String()}); status.Code(err) != codes.NotFound {
		t.Errorf("a dead-lettered request has an order: GetOrder %v, want NotFound", err)
	}

	// Repair the row (as an operator would), then requeue it.
	cmd := order.Command{CustomerID: "cust-requeued", Total: "12.50", Currency: "EUR"}
	enc := cmd.Encode()
	if applied, err := s.Query(`UPDATE write_requests_by_id USING TTL 3600 SET command = ?, payload_hash = ?
		WHERE tenant = ? AND operation = 'CREATE_ORDER' AND request_id = ? IF state = 'FAILED'`,
		enc, order.Fingerprint(enc), tenant, id.String()).SerialConsistency(gocql.LocalSerial).MapScanCASContext(callCtx(t), map[string]any{}); err != nil || !applied {
		t.Fatalf("repair the command: %v %v", applied, err)
	}
	// Requeue is an admin call: a key without admin is refused and the
	// request stays FAILED; the run's default key (admin) requeues it.
	notAdmin, _ := addKey(t, rec, tenant, "create,read")
	if _, err := dialAs(t, rec.addr, sec.files.Client(notAdmin)).RequeueRequest(callCtx(t), &ordersv1.RequeueRequestRequest{RequestId: id.String()}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("RequeueRequest without admin: %v, want PERMISSION_DENIED", err)
	}
	waitRequestState(t, rec.client, id.String(), ordersv1.RequestState_REQUEST_STATE_FAILED, time.Second)
	if resp, err := rec.client.RequeueRequest(callCtx(t), &ordersv1.RequeueRequestRequest{RequestId: id.String()}); err != nil || resp.Request.State != ordersv1.RequestState_REQUEST_STATE_PENDING {
		t.Fatalf("RequeueRequest as admin: %v, %v; want the request PENDING", resp, err)
	}
	waitRequestState(t, rec.client, id.String(), ordersv1.RequestState_REQUEST_STATE_COMPLETE, 30*time.Second)
	got, err := rec.client.GetOrder(callCtx(t), &ordersv1.GetOrderRequest{OrderId: orderID.String()})
	if err != nil || got.Order.Total != "12.50" || got.Order.CustomerId != "cust-requeued" {
		t.Fatalf("requeued request's order: %v %v", got.GetOrder(), err)
	}
}
