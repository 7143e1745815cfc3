package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/platform/failpoint"
	"github.com/atlasmart/orderd/ledger"
	"github.com/atlasmart/orderd/projection"
	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

// Settings of an orderd whose reconciler acts within seconds. The grace
// must exceed request timeout + CQL timeout + 2 x max clock skew (orderd
// refuses to start otherwise): 1.5 + 3 + 1 < 6 s. A CQL timeout of 3 s is
// still longer than the local cluster's write and CAS timeouts.
var fastReconciler = []string{
	"ORDERD_RECONCILER=true",
	"ORDERD_RECONCILE_GRACE=6s",
	"ORDERD_REQUEST_TIMEOUT=1500ms",
	"ORDERD_CQL_TIMEOUT=3s",
	"ORDERD_MAX_CLOCK_SKEW=500ms",
	"ORDERD_RECONCILE_INTERVAL=300ms",
	"ORDERD_RECONCILE_BACKOFF=300ms",
	"ORDERD_RECONCILE_BACKOFF_MAX=1s",
}

// withoutReconciler is fastReconciler's settings (so its due-queue entries
// fall due as soon as the healer's reconciler looks for them) with the
// reconciler itself off, plus extra settings.
func withoutReconciler(extra ...string) []string {
	return append(append(append([]string{}, fastReconciler...), "ORDERD_RECONCILER=false"), extra...)
}

// waitRequestState polls GetRequest until the request is in state want.
func waitRequestState(t *testing.T, c ordersv1.OrderServiceClient, requestID string, want ordersv1.RequestState, within time.Duration) *ordersv1.WriteRequest {
	t.Helper()
	var last *ordersv1.WriteRequest
	var lastErr error
	_, err := eventually(within, func() error {
		resp, err := c.GetRequest(callCtx(t), &ordersv1.GetRequestRequest{RequestId: requestID})
		last, lastErr = resp.GetRequest(), err
		if err == nil && last.State == want {
			return nil
		}
		return fmt.Errorf("state %v, error %v", last.GetState(), err)
	})
	if err != nil {
		t.Fatalf("request %s not %v within %s: last %v, %v", requestID, want, within, last, lastErr)
	}
	return last
}

// TestReconcilerFinishesEveryCrashPoint crashes orderd at each failpoint of
// the write path, checks what was left, and lets a fresh orderd's reconciler
// finish the request; the client's retry then gets the original outcome.
func TestReconcilerFinishesEveryCrashPoint(t *testing.T) {
	points := []struct {
		name string
		// tables that must hold the order's row when the process died
		written []string
	}{
		{failpoint.AfterClaim, nil},
		{failpoint.AfterProjectionPrefix + projection.OrdersByCustomerTime, []string{projection.OrdersByCustomerTime}},
		{failpoint.AfterProjectionPrefix + projection.EventsByOrder, []string{projection.EventsByOrder}},
		// orders_by_id, the recorded outcome, goes last: at these two the
		// order is complete and only its due entry is left to release.
		{failpoint.AfterProjectionPrefix + projection.OrdersByID, []string{projection.OrdersByCustomerTime, projection.OrdersByID, projection.EventsByOrder}},
		{failpoint.BeforeRelease, []string{projection.OrdersByCustomerTime, projection.OrdersByID, projection.EventsByOrder}},
	}
	for _, p := range points {
		t.Run(p.name, func(t *testing.T) {
			crashing := startOrderd(t, withoutReconciler("ORDERD_FAILPOINTS="+p.name+"=exit")...)
			req := newRequest("41.00")
			_, _, err := create(t, crashing.client, req)
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("CreateOrder on a process that crashes: %v, want Unavailable (connection lost)", err)
			}
			if code := crashing.waitExit(t, 10*time.Second); code != failpoint.ExitCode {
				t.Fatalf("orderd exit code %d, want %d (the failpoint's)", code, failpoint.ExitCode)
			}
			r := readRows(t, req.RequestId, "", "", "")
			if r.ledger == nil || r.ledger["state"] != "PENDING" {
				t.Fatalf("after the crash the ledger row is %v, want PENDING", r.ledger)
			}
			orderID := fmt.Sprint(r.ledger["entity_id"])
			month := order.MonthOf(r.ledger["created_at"].(time.Time))
			r = readRows(t, req.RequestId, req.CustomerId, orderID, month)
			have := map[string]int{projection.OrdersByCustomerTime: r.byCustomer, projection.OrdersByID: r.byID, projection.EventsByOrder: r.events}
			for _, table := range p.written {
				if have[table] != 1 {
					t.Errorf("%s has %d rows at the crash, want 1 (it was written before %s)", table, have[table], p.name)
				}
			}
			if p.name == failpoint.AfterClaim && (r.byCustomer+r.byID+r.events) != 0 {
				t.Errorf("rows written before any projection: %+v", have)
			}
			t.Logf("at the crash: ledger PENDING, rows %v", have)

			healer := startOrderd(t, fastReconciler...)
			waitRequestState(t, healer.client, req.RequestId, ordersv1.RequestState_REQUEST_STATE_COMPLETE, 30*time.Second)
			o, err := healer.client.GetOrder(callCtx(t), &ordersv1.GetOrderRequest{OrderId: orderID})
			if err != nil {
				t.Fatalf("GetOrder after reconciling: %v", err)
			}
			assertExactlyOneOrder(t, req, o.Order, "41.00")
			retry, replayed, err := create(t, healer.client, req)
			if err != nil || !retry.Replayed || replayed != "true" || !proto.Equal(retry.Order, o.Order) {
				t.Fatalf("client retry after reconciling: %v (header %q), %v; want the original outcome, replayed", retry, replayed, err)
			}
		})
	}
}

// TestReconcileDrillCrashAfterClaim is the reconcile drill: request ...501 is
// claimed, the worker crashes before the projections, the reconciler finishes
// it to total 88.80, and replaying every statement again changes nothing.
func TestReconcileDrillCrashAfterClaim(t *testing.T) {
	req := &ordersv1.CreateOrderRequest{RequestId: "17000000-0000-0000-0000-000000000501", CustomerId: "cust-safe", Total: "88.80", Currency: "EUR"}
	crashing := startOrderd(t, withoutReconciler("ORDERD_FAILPOINTS="+failpoint.AfterClaim+"=exit")...)
	if _, _, err := create(t, crashing.client, req); status.Code(err) != codes.Unavailable {
		t.Fatalf("CreateOrder with a crash after the claim: %v, want Unavailable", err)
	}
	crashing.waitExit(t, 10*time.Second)
	r := readRows(t, req.RequestId, "", "", "")
	if r.ledger == nil || r.ledger["state"] != "PENDING" {
		t.Fatalf("simulated worker crash: ledger row %v, want PENDING", r.ledger)
	}

	healer := startOrderd(t, fastReconciler...)
	waitRequestState(t, healer.client, req.RequestId, ordersv1.RequestState_REQUEST_STATE_COMPLETE, 30*time.Second)
	got, err := healer.client.GetOrder(callCtx(t), &ordersv1.GetOrderRequest{OrderId: fmt.Sprint(r.ledger["entity_id"])})
	if err != nil {
		t.Fatal(err)
	}
	before := assertExactlyOneOrder(t, req, got.Order, "88.80")
	beforeState := snapshot(t, got.Order)

	// Replay all the statements once more: every write is idempotent.
	s := cassandra.Wrap(freshSession(t))
	store, err := ledger.NewCassandraStore(s, ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	id := uuid.MustParse(req.RequestId)
	rec, err := store.Get(callCtx(t), ledger.Key{Tenant: tenant, Operation: order.OperationCreate, RequestID: id})
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := order.DecodeCommand(rec.Command)
	if err != nil {
		t.Fatal(err)
	}
	o := order.New(rec.Tenant, rec.RequestID, cmd, rec.CreatedAt)
	if err := projection.NewStore(s, nil).Write(callCtx(t), o); err != nil {
		t.Fatalf("replay the projection writes: %v", err)
	}
	if err := store.Release(callCtx(t), rec); err != nil {
		t.Fatalf("replay the release: %v", err)
	}
	again := rec
	again.ClaimToken, again.CreatedAt = uuid.New(), time.Now().UTC().Truncate(time.Millisecond)
	if won, cur, err := store.Claim(callCtx(t), again, nil); err != nil || won || cur.ClaimToken != rec.ClaimToken {
		t.Fatalf("replaying the claim must not apply again: won %v, token %s (was %s), %v", won, cur.ClaimToken, rec.ClaimToken, err)
	}
	assertExactlyOneOrder(t, req, got.Order, "88.80")
	if afterState := snapshot(t, got.Order); afterState != beforeState {
		t.Errorf("replaying every statement changed the final state:\nbefore %s\nafter  %s", beforeState, afterState)
	}
	if before.ledger["payload_hash"] != rec.Fingerprint {
		t.Errorf("ledger fingerprint changed")
	}
}

// snapshot renders an order's rows with their write times.
func snapshot(t *testing.T, o *ordersv1.Order) string {
	t.Helper()
	s := freshSession(t)
	var parts []string
	for _, q := range []struct{ stmt string }{
		{`SELECT customer_id, status, total, currency, request_id, created_at, writetime(total) FROM orders_by_id WHERE tenant = ? AND order_id = ?`},
		{`SELECT event_id, event_type, detail, event_time, writetime(event_type) FROM order_events_by_order WHERE tenant = ? AND order_id = ?`},
	} {
		row := map[string]any{}
		if err := s.Query(q.stmt, tenant, o.OrderId).MapScanContext(callCtx(t), row); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, fmt.Sprint(row))
	}
	row := map[string]any{}
	if err := s.Query(`SELECT order_id, created_at, status, total, writetime(total) FROM orders_by_customer_time WHERE tenant = ? AND customer_id = ? AND order_month = ?`,
		tenant, o.CustomerId, storedMonth(o.OrderMonth)).MapScanContext(callCtx(t), row); err != nil {
		t.Fatal(err)
	}
	return strings.Join(append(parts, fmt.Sprint(row)), "\n")
}

// TestTwoReconcilersAndAHandlerRace200Pending leaves 200 requests PENDING,
// then lets two reconcilers and a live handler (the clients' retries) race
// to finish them: exactly 200 orders and 200 events result.
func TestTwoReconcilersAndAHandlerRace200Pending(t *testing.T) {
	const n = 200
	customer := "race-" + uuid.NewString()[:8]
	breaking := startOrderd(t, withoutReconciler("ORDERD_FAILPOINTS="+failpoint.AfterClaim+"=error")...)
	reqs := make([]*ordersv1.CreateOrderRequest, n)
	for i := range reqs {
		reqs[i] = &ordersv1.CreateOrderRequest{RequestId: uuid.NewString(), CustomerId: customer, Total: fmt.Sprintf("%d.00", i+1), Currency: "EUR"}
	}
	forEach(t, reqs, 16, func(req *ordersv1.CreateOrderRequest) error {
		if _, _, err := create(t, breaking.client, req); status.Code(err) != codes.Unavailable {
			return fmt.Errorf("with after-claim failing: %v, want Unavailable", err)
		}
		return nil
	})
	if err := breaking.stop(); err != nil {
		t.Fatal(err)
	}
	month := ""
	for _, req := range reqs {
		r := readRows(t, req.RequestId, "", "", "")
		if r.ledger == nil || r.ledger["state"] != "PENDING" {
			t.Fatalf("request %s: %v, want PENDING", req.RequestId, r.ledger)
		}
		month = order.MonthOf(r.ledger["created_at"].(time.Time))
	}

	rec1 := startOrderd(t, fastReconciler...)
	rec2 := startOrderd(t, fastReconciler...)
	// The live handler: every client retries its request now.
	forEach(t, reqs, 16, func(req *ordersv1.CreateOrderRequest) error {
		resp, _, err := create(t, rec1.client, req)
		if err != nil {
			if c := status.Code(err); c == codes.Aborted || c == codes.Unavailable {
				return nil // lost to a reconciler mid-flight; the outcome is checked below
			}
			return err
		}
		if resp.Order.Total != req.Total {
			return fmt.Errorf("retry of %s answered total %s", req.RequestId, resp.Order.Total)
		}
		return nil
	})
	for _, req := range reqs {
		waitRequestState(t, rec2.client, req.RequestId, ordersv1.RequestState_REQUEST_STATE_COMPLETE, 60*time.Second)
	}

	s := freshSession(t)
	ids := map[string]int{} // listing rows per order: one each (a second claim time would be a second row)
	iter := s.Query(`SELECT order_id FROM orders_by_customer_time WHERE tenant = ? AND customer_id = ? AND order_month = ?`, tenant, customer, month).Iter()
	var id gocql.UUID
	for iter.Scan(&id) {
		ids[id.String()]++
	}
	if err := iter.Close(); err != nil {
		t.Fatal(err)
	}
	orders, events := 0, 0
	for _, req := range reqs {
		oid := order.ID(tenant, uuid.MustParse(req.RequestId)).String()
		if ids[oid] != 1 {
			t.Errorf("request %s has %d rows in orders_by_customer_time, want 1", req.RequestId, ids[oid])
		}
		r := readRows(t, req.RequestId, "", oid, "")
		orders += r.byID
		events += r.events
		if r.byID != 1 || r.events != 1 {
			t.Errorf("request %s: %d orders_by_id rows, %d events", req.RequestId, r.byID, r.events)
		}
	}
	if len(ids) != n || orders != n || events != n {
		t.Fatalf("orders_by_customer_time %d, orders_by_id %d, events %d; want %d each", len(ids), orders, events, n)
	}
	t.Logf("200 PENDING requests raced by two reconcilers and the handler: %d orders, %d events", orders, events)
}

// forEach runs f over reqs with the given parallelism and fails the test on
// the first error.
func forEach(t *testing.T, reqs []*ordersv1.CreateOrderRequest, parallel int, f func(*ordersv1.CreateOrderRequest) error) {
	t.Helper()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		sem  = make(chan struct{}, parallel)
	)
	for _, req := range reqs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := f(req); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of %d failed; first: %v", len(errs), len(reqs), errs[0])
	}
}
