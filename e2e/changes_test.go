package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/atlasmart/orderd/internal/platform/failpoint"
	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

// The failure cases of a change of an order from version 7 to version 8,
// on the real cluster through the real binary.
// Every case starts from an order of its own built up to version 7.

// orderAtVersion creates an order and amends it up to version v; it returns
// the order as GetOrder shows it then.
func orderAtVersion(t *testing.T, c ordersv1.OrderServiceClient, v int64) *ordersv1.Order {
	t.Helper()
	resp, _, err := create(t, c, newRequest("12.00"))
	if err != nil {
		t.Fatalf("CreateOrder: %v", err)
	}
	o := resp.GetOrder()
	for e := o.GetVersion(); e < v; e++ {
		a, err := c.AmendOrder(callCtx(t), &ordersv1.AmendOrderRequest{RequestId: uuid.NewString(), OrderId: o.GetOrderId(),
			ExpectedVersion: e, ShippingNote: fmt.Sprintf("note of version %d", e+1)})
		if err != nil {
			t.Fatalf("AmendOrder %d → %d: %v", e, e+1, err)
		}
		o = a.GetOrder()
	}
	return getOrder(t, c, o.GetOrderId(), v)
}

// getOrder reads an order and wants it at version want.
func getOrder(t *testing.T, c ordersv1.OrderServiceClient, id string, want int64) *ordersv1.Order {
	t.Helper()
	resp, err := c.GetOrder(callCtx(t), &ordersv1.GetOrderRequest{OrderId: id})
	if err != nil {
		t.Fatalf("GetOrder: %v", err)
	}
	if got := resp.GetOrder().GetVersion(); got != want {
		t.Fatalf("GetOrder: version %d, want %d", got, want)
	}
	return resp.GetOrder()
}

// amend calls AmendOrder and returns the response and the replay header.
func amend(t *testing.T, c ordersv1.OrderServiceClient, req *ordersv1.AmendOrderRequest) (*ordersv1.AmendOrderResponse, string, error) {
	t.Helper()
	var header metadata.MD
	resp, err := c.AmendOrder(callCtx(t), req, grpc.Header(&header))
	return resp, replayedHeader(header), err
}

// versionRow is one row of order_versions.
type versionRow struct {
	version   int64
	requestID string
	changeID  string
	operation string
}

// versionRows reads an order's history rows through a fresh session.
func versionRows(t *testing.T, orderID string) []versionRow {
	t.Helper()
	it := freshSession(t).Query(`SELECT version, request_id, change_id, operation FROM order_versions WHERE tenant = ? AND order_id = ?`,
		tenant, orderID).IterContext(callCtx(t))
	var (
		out []versionRow
		r   versionRow
	)
	for it.Scan(&r.version, &r.requestID, &r.changeID, &r.operation) {
		out = append(out, r)
	}
	if err := it.Close(); err != nil {
		t.Fatalf("read order_versions: %v", err)
	}
	return out
}

// eventRows counts an order's event rows by event id.
func eventRows(t *testing.T, orderID string) map[string]int64 {
	t.Helper()
	it := freshSession(t).Query(`SELECT event_id, version FROM order_events_by_order WHERE tenant = ? AND order_id = ?`,
		tenant, orderID).IterContext(callCtx(t))
	out := map[string]int64{}
	var (
		id string
		v  *int64
	)
	for it.Scan(&id, &v) {
		out[id] = 0
		if v != nil {
			out[id] = *v
		}
		v = nil
	}
	if err := it.Close(); err != nil {
		t.Fatalf("read order_events_by_order: %v", err)
	}
	return out
}

// ledgerRows counts the ledger rows of a request id under op.
func ledgerRows(t *testing.T, op, requestID string) int {
	t.Helper()
	var n int
	if err := freshSession(t).Query(`SELECT count(*) FROM write_requests_by_id WHERE tenant = ? AND operation = ? AND request_id = ?`,
		tenant, op, requestID).ScanContext(callCtx(t), &n); err != nil {
		t.Fatalf("read the ledger: %v", err)
	}
	return n
}

// forgetRequest deletes a request's ledger row, as its TTL does at the end
// of the retention.
func forgetRequest(t *testing.T, op, requestID string) {
	t.Helper()
	if _, err := freshSession(t).Query(`DELETE FROM write_requests_by_id WHERE tenant = ? AND operation = ? AND request_id = ? IF EXISTS`,
		tenant, op, requestID).SerialConsistency(gocql.LocalSerial).MapScanCASContext(callCtx(t), map[string]any{}); err != nil {
		t.Fatalf("delete the ledger row of %s: %v", requestID, err)
	}
	if n := ledgerRows(t, op, requestID); n != 0 {
		t.Fatalf("the ledger row of %s is still there", requestID)
	}
}

// wantHistory checks versions 2..upTo each have exactly one row, and that
// version 8's is the given request's.
func wantHistory(t *testing.T, orderID string, upTo int64, v8Request string) {
	t.Helper()
	rows := versionRows(t, orderID)
	if int64(len(rows)) != upTo-1 {
		t.Fatalf("order_versions rows = %d, want %d (versions 2..%d): %+v", len(rows), upTo-1, upTo, rows)
	}
	for i, r := range rows {
		if r.version != int64(i)+2 {
			t.Fatalf("order_versions row %d is version %d: a gap or a duplicate", i, r.version)
		}
		if r.version == 8 && v8Request != "" && r.requestID != v8Request {
			t.Errorf("version 8 was made by request %s, want %s", r.requestID, v8Request)
		}
	}
}

// errorInfo is the ErrorInfo of a status (nil if none).
func errorInfo(err error) *errdetails.ErrorInfo {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info
		}
	}
	return nil
}

// wantStale checks err is ABORTED STALE_VERSION naming current.
func wantStale(t *testing.T, err error, current string) {
	t.Helper()
	info := errorInfo(err)
	if status.Code(err) != codes.Aborted || info == nil || info.GetReason() != "STALE_VERSION" ||
		info.GetMetadata()["current_version"] != current {
		t.Fatalf("answer = %v (ErrorInfo %v), want ABORTED STALE_VERSION with current_version %s", err, info, current)
	}
}

func TestVersionedChanges(t *testing.T) {
	c := server(t).client

	t.Run("accept once: one change, version 8, one event row", func(t *testing.T) {
		o := orderAtVersion(t, c, 7)
		req := &ordersv1.AmendOrderRequest{RequestId: uuid.NewString(), OrderId: o.GetOrderId(), ExpectedVersion: 7, ShippingNote: "Leave at the back door"}
		resp, replayed, err := amend(t, c, req)
		if err != nil || replayed != "false" || resp.GetVersion() != 8 || resp.GetOrder().GetShippingNote() != req.ShippingNote ||
			resp.GetOrder().GetVersion() != 8 || resp.GetChangeId() == "" {
			t.Fatalf("AmendOrder = %v, replayed %q, %v; want version 8 with the note", resp, replayed, err)
		}
		got := getOrder(t, c, o.GetOrderId(), 8)
		if got.GetShippingNote() != req.ShippingNote || got.GetStatus() != ordersv1.OrderStatus_ORDER_STATUS_CREATED {
			t.Errorf("GetOrder = %v", got)
		}
		wantHistory(t, o.GetOrderId(), 8, req.RequestId)
		if v, ok := eventRows(t, o.GetOrderId())[resp.GetChangeId()]; !ok || v != 8 {
			t.Errorf("event row of change %s: present %v, version %d; want version 8", resp.GetChangeId(), ok, v)
		}
		list, err := c.ListCustomerOrders(callCtx(t), &ordersv1.ListCustomerOrdersRequest{CustomerId: got.GetCustomerId(), Month: got.GetOrderMonth()[:7]})
		if err != nil || len(list.GetOrders()) != 1 || list.GetOrders()[0].GetVersion() != 8 {
			t.Errorf("ListCustomerOrders = %v, %v; want the order at version 8", list, err)
		}
		wr, err := c.GetRequest(callCtx(t), &ordersv1.GetRequestRequest{RequestId: req.RequestId, Operation: "AMEND_ORDER"})
		if err != nil || wr.GetRequest().GetState() != ordersv1.RequestState_REQUEST_STATE_COMPLETE {
			t.Errorf("GetRequest = %v, %v; want COMPLETE", wr, err)
		}
	})

	t.Run("lost response and retry: the same change, replayed, nothing added", func(t *testing.T) {
		o := orderAtVersion(t, c, 7)
		req := &ordersv1.AmendOrderRequest{RequestId: uuid.NewString(), OrderId: o.GetOrderId(), ExpectedVersion: 7, ShippingNote: "ring twice"}
		first, _, err := amend(t, c, req)
		if err != nil {
			t.Fatal(err)
		}
		// A later change by someone else: the retry still replays, not stale.
		if _, err := c.CancelOrder(callCtx(t), &ordersv1.CancelOrderRequest{RequestId: uuid.NewString(), OrderId: o.GetOrderId(), ExpectedVersion: 8}); err != nil {
			t.Fatal(err)
		}
		again, replayed, err := amend(t, c, req)
		if err != nil || replayed != "true" || !again.GetReplayed() || again.GetChangeId() != first.GetChangeId() ||
			again.GetVersion() != 8 || again.GetOrder().GetShippingNote() != "ring twice" {
			t.Fatalf("retry = %v, replayed %q, %v; want the recorded change %s at version 8", again, replayed, err, first.GetChangeId())
		}
		wantHistory(t, o.GetOrderId(), 9, req.RequestId)
		if got := getOrder(t, c, o.GetOrderId(), 9); got.GetStatus() != ordersv1.OrderStatus_ORDER_STATUS_CANCELLED {
			t.Errorf("GetOrder status = %s, want CANCELLED", got.GetStatus())
		}
	})

	t.Run("key reused with another change: conflict, nothing changes", func(t *testing.T) {
		o := orderAtVersion(t, c, 7)
		req := &ordersv1.AmendOrderRequest{RequestId: uuid.NewString(), OrderId: o.GetOrderId(), ExpectedVersion: 7, ShippingNote: "first"}
		if _, _, err := amend(t, c, req); err != nil {
			t.Fatal(err)
		}
		other := &ordersv1.AmendOrderRequest{RequestId: req.RequestId, OrderId: o.GetOrderId(), ExpectedVersion: 7, ShippingNote: "second"}
		_, _, err := amend(t, c, other)
		if status.Code(err) != codes.FailedPrecondition || reason(status.Convert(err)) != "REQUEST_ID_REUSED" {
			t.Fatalf("reuse = %v, want FAILED_PRECONDITION REQUEST_ID_REUSED", err)
		}
		other.ExpectedVersion = 8
		if _, _, err := amend(t, c, other); reason(status.Convert(err)) != "REQUEST_ID_REUSED" {
			t.Fatalf("reuse against version 8 = %v, want REQUEST_ID_REUSED", err)
		}
		if got := getOrder(t, c, o.GetOrderId(), 8); got.GetShippingNote() != "first" {
			t.Errorf("note = %q, want %q", got.GetShippingNote(), "first")
		}
		wantHistory(t, o.GetOrderId(), 8, req.RequestId)
	})

	t.Run("after the ledger forgot the requests: a reused id is refused, for its order or another, a stale change stays stale", func(t *testing.T) {
		o := orderAtVersion(t, c, 7)
		ahead := &ordersv1.AmendOrderRequest{RequestId: uuid.NewString(), OrderId: o.GetOrderId(), ExpectedVersion: 9, ShippingNote: "ahead"}
		_, _, err := amend(t, c, ahead)
		wantStale(t, err, "7")
		first := &ordersv1.AmendOrderRequest{RequestId: uuid.NewString(), OrderId: o.GetOrderId(), ExpectedVersion: 7, ShippingNote: "first"}
		if _, _, err := amend(t, c, first); err != nil {
			t.Fatal(err)
		}
		if _, _, err := amend(t, c, &ordersv1.AmendOrderRequest{RequestId: uuid.NewString(), OrderId: o.GetOrderId(),
			ExpectedVersion: 8, ShippingNote: "ninth"}); err != nil {
			t.Fatal(err)
		}
		// The order is at the version ahead expected; the ledger's rows go
		// as they do when the retention ends.
		forgetRequest(t, "AMEND_ORDER", ahead.RequestId)
		forgetRequest(t, "AMEND_ORDER", first.RequestId)

		_, _, err = amend(t, c, ahead)
		wantStale(t, err, "7")
		reuse := &ordersv1.AmendOrderRequest{RequestId: first.RequestId, OrderId: o.GetOrderId(), ExpectedVersion: 9, ShippingNote: "second"}
		if _, _, err := amend(t, c, reuse); status.Code(err) != codes.FailedPrecondition || reason(status.Convert(err)) != "REQUEST_ID_REUSED" {
			t.Fatalf("reuse after the retention = %v, want FAILED_PRECONDITION REQUEST_ID_REUSED", err)
		}
		// The same request id for another order of the tenant: its change
		// id would be the first change's.
		other := orderAtVersion(t, c, 1)
		elsewhere := &ordersv1.AmendOrderRequest{RequestId: first.RequestId, OrderId: other.GetOrderId(), ExpectedVersion: 1, ShippingNote: "first"}
		if _, _, err := amend(t, c, elsewhere); status.Code(err) != codes.FailedPrecondition || reason(status.Convert(err)) != "REQUEST_ID_REUSED" {
			t.Fatalf("reuse for another order after the retention = %v, want FAILED_PRECONDITION REQUEST_ID_REUSED", err)
		}
		if rows := versionRows(t, other.GetOrderId()); len(rows) != 0 {
			t.Errorf("the other order's history = %+v, want none", rows)
		}
		getOrder(t, c, other.GetOrderId(), 1)
		if got := getOrder(t, c, o.GetOrderId(), 9); got.GetShippingNote() != "ninth" {
			t.Errorf("note = %q, want %q", got.GetShippingNote(), "ninth")
		}
		rows := versionRows(t, o.GetOrderId())
		if len(rows) != 8 {
			t.Errorf("order_versions holds %d changes, want 8 (versions 2..9): %+v", len(rows), rows)
		}
		if n := len(eventRows(t, o.GetOrderId())); n != 9 {
			t.Errorf("%d event rows, want 9 (the creation and 8 changes)", n)
		}
	})

	t.Run("two identical attempts at once: one change, the other replays", func(t *testing.T) {
		o := orderAtVersion(t, c, 7)
		req := &ordersv1.AmendOrderRequest{RequestId: uuid.NewString(), OrderId: o.GetOrderId(), ExpectedVersion: 7, ShippingNote: "same"}
		const n = 8
		resps := make([]*ordersv1.AmendOrderResponse, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { resps[i], _, errs[i] = amend(t, c, req) })
		}
		wg.Wait()
		ids := map[string]int{}
		for i := range n {
			if errs[i] != nil {
				if status.Code(errs[i]) != codes.Aborted || reason(status.Convert(errs[i])) != "REQUEST_IN_PROGRESS" {
					t.Errorf("attempt %d: %v, want the change or REQUEST_IN_PROGRESS", i, errs[i])
				}
				continue
			}
			ids[resps[i].GetChangeId()]++
		}
		if len(ids) != 1 {
			t.Errorf("answers name changes %v, want one", ids)
		}
		wantHistory(t, o.GetOrderId(), 8, req.RequestId)
	})

	t.Run("two keys race against version 7: one change, one stale receipt, one event", func(t *testing.T) {
		o := orderAtVersion(t, c, 7)
		a := &ordersv1.AmendOrderRequest{RequestId: uuid.NewString(), OrderId: o.GetOrderId(), ExpectedVersion: 7, ShippingNote: "a"}
		b := &ordersv1.CancelOrderRequest{RequestId: uuid.NewString(), OrderId: o.GetOrderId(), ExpectedVersion: 7}
		var (
			wg         sync.WaitGroup
			errA, errB error
		)
		wg.Go(func() { _, _, errA = amend(t, c, a) })
		wg.Go(func() { _, errB = c.CancelOrder(callCtx(t), b) })
		wg.Wait()
		if (errA == nil) == (errB == nil) {
			t.Fatalf("amend: %v; cancel: %v; want exactly one accepted", errA, errB)
		}
		winner, loserErr, retryLoser := a.RequestId, errB, func() error { _, err := c.CancelOrder(callCtx(t), b); return err }
		if errA != nil {
			winner, loserErr, retryLoser = b.RequestId, errA, func() error { _, _, err := amend(t, c, a); return err }
		}
		wantStale(t, loserErr, "8")
		wantStale(t, retryLoser(), "8") // the receipt: its retries replay it
		wantHistory(t, o.GetOrderId(), 8, winner)
		events := eventRows(t, o.GetOrderId())
		if len(events) != 8 { // created + versions 2..8
			t.Errorf("event rows = %d, want 8 (one per version)", len(events))
		}
	})

	t.Run("a cancelled order takes no change; its answer is recorded too", func(t *testing.T) {
		o := orderAtVersion(t, c, 7)
		if _, err := c.CancelOrder(callCtx(t), &ordersv1.CancelOrderRequest{RequestId: uuid.NewString(), OrderId: o.GetOrderId(), ExpectedVersion: 7}); err != nil {
			t.Fatal(err)
		}
		late := &ordersv1.AmendOrderRequest{RequestId: uuid.NewString(), OrderId: o.GetOrderId(), ExpectedVersion: 8, ShippingNote: "late"}
		for range 2 {
			_, _, err := amend(t, c, late)
			if status.Code(err) != codes.FailedPrecondition || reason(status.Convert(err)) != "ORDER_CANCELLED" {
				t.Fatalf("amend of a cancelled order = %v, want FAILED_PRECONDITION ORDER_CANCELLED", err)
			}
		}
		wantHistory(t, o.GetOrderId(), 8, "")
	})

	t.Run("invalid, unknown or another tenant's order: refused, no receipt", func(t *testing.T) {
		o := orderAtVersion(t, c, 2)
		bad := &ordersv1.AmendOrderRequest{RequestId: uuid.NewString(), OrderId: o.GetOrderId(), ExpectedVersion: 0, ShippingNote: "x\x00y"}
		_, _, err := amend(t, c, bad)
		var br *errdetails.BadRequest
		for _, d := range status.Convert(err).Details() {
			if v, ok := d.(*errdetails.BadRequest); ok {
				br = v
			}
		}
		if status.Code(err) != codes.InvalidArgument || br == nil || len(br.GetFieldViolations()) != 2 {
			t.Fatalf("invalid amend = %v (%v), want INVALID_ARGUMENT on expected_version and shipping_note", err, br)
		}
		missing := &ordersv1.CancelOrderRequest{RequestId: uuid.NewString(), OrderId: uuid.NewString(), ExpectedVersion: 1}
		if _, err := c.CancelOrder(callCtx(t), missing); status.Code(err) != codes.NotFound {
			t.Fatalf("cancel of no order = %v, want NOT_FOUND", err)
		}
		for op, id := range map[string]string{"AMEND_ORDER": bad.RequestId, "CANCEL_ORDER": missing.RequestId} {
			if n := ledgerRows(t, op, id); n != 0 {
				t.Errorf("%s request %s left %d ledger rows, want none", op, id, n)
			}
		}
		getOrder(t, c, o.GetOrderId(), 2)
	})
}

// A forced failure after the claim and before the version check: nothing
// is visible (the order stays at version 7, no history row, no event), and
// a retry with the same request id succeeds.
func TestChangeForcedFailureBeforeCompletionThenRetrySucceeds(t *testing.T) {
	c := server(t).client
	o := orderAtVersion(t, c, 7)
	// Settings as the shared orderd's (its due-queue grace too), so that the
	// retry it answers releases the failed attempt's due entry.
	failing := startOrderd(t, "ORDERD_RECONCILER=false", "ORDERD_FAILPOINTS="+failpoint.BeforeVersion+"=error")
	req := &ordersv1.AmendOrderRequest{RequestId: uuid.NewString(), OrderId: o.GetOrderId(), ExpectedVersion: 7, ShippingNote: "after the failure"}
	if _, _, err := amend(t, failing.client, req); status.Code(err) != codes.Unavailable {
		t.Fatalf("AmendOrder with the failure = %v, want UNAVAILABLE", err)
	}
	getOrder(t, c, o.GetOrderId(), 7)
	wantHistory(t, o.GetOrderId(), 7, "")
	if n := len(eventRows(t, o.GetOrderId())); n != 7 {
		t.Errorf("event rows = %d, want 7 (versions 1..7)", n)
	}
	time.Sleep(1100 * time.Millisecond) // the claim is old enough for a retry to take it over
	resp, _, err := amend(t, c, req)
	if err != nil || resp.GetVersion() != 8 {
		t.Fatalf("retry = %v, %v; want version 8", resp, err)
	}
	wantHistory(t, o.GetOrderId(), 8, req.RequestId)
	// Nothing left for a reconciler of a later test to find.
	waitNoDueEntries(t, req.RequestId, 30*time.Second)
}

// The worker's crash cases for a change: the process dies before it
// sent the change's event, or after the broker acknowledged it. A fresh
// orderd's reconciler publishes it (same event id), and the reference
// consumer applies it once: its view holds the order at version 8.
func TestChangeEventDeliveredOnceAcrossWorkerRestarts(t *testing.T) {
	c := server(t).client
	for _, point := range []string{failpoint.BeforePublish, failpoint.AfterPublish} {
		t.Run(point, func(t *testing.T) {
			o := orderAtVersion(t, c, 7)
			topic := fmt.Sprintf("e2e.%d.change-worker", time.Now().UnixNano())
			crashing := startOrderd(t, withoutReconciler("ORDERD_FAILPOINTS="+point+"=exit", "ORDERD_KAFKA_TOPIC="+topic)...)
			req := &ordersv1.CancelOrderRequest{RequestId: uuid.NewString(), OrderId: o.GetOrderId(), ExpectedVersion: 7}
			resp, err := crashing.client.CancelOrder(callCtx(t), req)
			if code := crashing.waitExit(t, 20*time.Second); code != failpoint.ExitCode {
				t.Fatalf("orderd exit code %d, want %d; CancelOrder said %v", code, failpoint.ExitCode, err)
			}
			if n := dueEntries(t, req.RequestId); n != 1 {
				t.Fatalf("due entries after the crash = %d, want 1 (the delivery obligation)", n)
			}
			changeID := resp.GetChangeId()
			if changeID == "" { // the answer was lost with the process: the history names the change
				for _, r := range versionRows(t, o.GetOrderId()) {
					if r.version == 8 {
						changeID = r.changeID
					}
				}
			}
			startOrderd(t, append(slices.Clone(fastReconciler), "ORDERD_KAFKA_TOPIC="+topic)...)
			waitNoDueEntries(t, req.RequestId, 30*time.Second)
			counts := publishedEvents(t, topic, []string{changeID}, 30*time.Second)
			if counts[changeID] < 1 {
				t.Fatalf("change event published %d times", counts[changeID])
			}
			// The healer's reconciler may publish other tests' leftover
			// events to this topic too: look at this change's alone.
			_, consumed := runConsumer(t, topic)
			var (
				version int64
				st      string
			)
			if _, err := eventually(time.Minute, func() error {
				if err := consumed.Query(`SELECT version, status FROM orders WHERE order_id = ?`, o.GetOrderId()).
					ScanContext(context.Background(), &version, &st); err != nil {
					return err
				}
				if version != 8 || st != ordersv1.OrderStatus_ORDER_STATUS_CANCELLED.String() {
					return fmt.Errorf("consumer's view = version %d %s, want 8 CANCELLED", version, st)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			inbox, err := consumerInbox(consumed)
			if err != nil {
				t.Fatal(err)
			}
			if inbox[uuid.MustParse(changeID)] != 1 {
				t.Errorf("consumer inbox holds the change %d times, want once (of %d deliveries)", inbox[uuid.MustParse(changeID)], counts[changeID])
			}
			wantHistory(t, o.GetOrderId(), 8, req.RequestId)
		})
	}
}

// A crash right after the version check accepted a change, before any
// projection: the read tables still show version 7 (the change is decided
// but not visible), and the reconciler of a fresh orderd finishes it: the
// order shows version 8, the change's event row exists, its due entry goes,
// and GetRequest says COMPLETE.
func TestReconcilerFinishesAChangeACrashLeftHalfDone(t *testing.T) {
	c := server(t).client
	o := orderAtVersion(t, c, 7)
	crashing := startOrderd(t, withoutReconciler("ORDERD_FAILPOINTS="+failpoint.AfterVersion+"=exit")...)
	req := &ordersv1.AmendOrderRequest{RequestId: uuid.NewString(), OrderId: o.GetOrderId(), ExpectedVersion: 7, ShippingNote: "after the crash"}
	if _, _, err := amend(t, crashing.client, req); err == nil {
		t.Fatal("AmendOrder answered OK from a process that exits before answering")
	}
	if code := crashing.waitExit(t, 20*time.Second); code != failpoint.ExitCode {
		t.Fatalf("orderd exit code %d, want %d", code, failpoint.ExitCode)
	}
	wantHistory(t, o.GetOrderId(), 8, req.RequestId) // decided
	getOrder(t, c, o.GetOrderId(), 7)                // not visible
	healer := startOrderd(t, fastReconciler...)
	if _, err := eventually(30*time.Second, func() error {
		resp, err := healer.client.GetOrder(callCtx(t), &ordersv1.GetOrderRequest{OrderId: o.GetOrderId()})
		if err != nil || resp.GetOrder().GetVersion() != 8 || resp.GetOrder().GetShippingNote() != req.ShippingNote {
			return fmt.Errorf("GetOrder = %v, %v", resp.GetOrder(), err)
		}
		return nil
	}); err != nil {
		t.Fatalf("the reconciler did not finish the change: %v", err)
	}
	waitNoDueEntries(t, req.RequestId, 30*time.Second)
	wr, err := healer.client.GetRequest(callCtx(t), &ordersv1.GetRequestRequest{RequestId: req.RequestId, Operation: "AMEND_ORDER"})
	if err != nil || wr.GetRequest().GetState() != ordersv1.RequestState_REQUEST_STATE_COMPLETE {
		t.Errorf("GetRequest = %v, %v; want COMPLETE", wr, err)
	}
	if n := len(eventRows(t, o.GetOrderId())); n != 8 {
		t.Errorf("event rows = %d, want 8", n)
	}
	// The client's retry now replays the change the reconciler finished.
	resp, replayed, err := amend(t, c, req)
	if err != nil || replayed != "true" || resp.GetVersion() != 8 {
		t.Errorf("retry = %v, replayed %q, %v; want the change, replayed", resp, replayed, err)
	}
}

// A restore of the keyspace from snapshots taken moments apart can leave
// an order's history (order_versions) behind its row (orders_by_id). Here
// the change that made version 3 is taken out of the history by hand, as
// an older snapshot of order_versions restores it. Decided on that
// history, a cancel from version 3 (what GetOrder shows) was refused
// STALE at 2 for good, and a stale cancel from 2 accepted as a second
// version 3. The next change rebuilds the lost one first, from its event
// row and its request's claim, exactly as it was.
func TestAHistoryARestoreLeftBehindIsRebuiltBeforeTheNextChange(t *testing.T) {
	c := server(t).client
	o := orderAtVersion(t, c, 3)
	before := versionRows(t, o.GetOrderId())
	rollBackHistory(t, o.GetOrderId(), 2, before[1].changeID)
	if rows := versionRows(t, o.GetOrderId()); len(rows) != 1 {
		t.Fatalf("history after the roll back = %+v, want version 2 only", rows)
	}

	_, err := c.CancelOrder(callCtx(t), &ordersv1.CancelOrderRequest{RequestId: uuid.NewString(), OrderId: o.GetOrderId(), ExpectedVersion: 2})
	wantStale(t, err, "3")
	resp, err := c.CancelOrder(callCtx(t), &ordersv1.CancelOrderRequest{RequestId: uuid.NewString(), OrderId: o.GetOrderId(), ExpectedVersion: 3})
	if err != nil || resp.GetVersion() != 4 {
		t.Fatalf("CancelOrder from version 3 = %v, %v; want version 4", resp, err)
	}
	after := versionRows(t, o.GetOrderId())
	if len(after) != 3 || after[0] != before[0] || after[1] != before[1] || after[2].version != 4 {
		t.Errorf("history = %+v, want %+v as before the restore, then version 4", after, before)
	}
	getOrder(t, c, o.GetOrderId(), 4)
}

// rollBackHistory leaves an order's history as a snapshot taken at version
// upTo restores it: the rows after it, and the outcome recorded for lost
// (the change that made upTo+1), gone; the statics at upTo.
func rollBackHistory(t *testing.T, orderID string, upTo int64, lost string) {
	t.Helper()
	s := freshSession(t)
	for _, q := range []struct {
		stmt string
		args []any
	}{
		{`DELETE FROM order_versions WHERE tenant = ? AND order_id = ? AND version > ?`, []any{tenant, orderID, upTo}},
		{`DELETE change_outcomes[?] FROM order_versions WHERE tenant = ? AND order_id = ?`, []any{lost, tenant, orderID}},
		{`UPDATE order_versions SET current_version = ?, status = 'CREATED' WHERE tenant = ? AND order_id = ?`, []any{upTo, tenant, orderID}},
	} {
		if err := s.Query(q.stmt, q.args...).Consistency(gocql.All).ExecContext(callCtx(t)); err != nil {
			t.Fatalf("roll back the history: %s: %v", q.stmt, err)
		}
	}
}
