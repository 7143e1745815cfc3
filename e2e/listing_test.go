package e2e

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/atlasmart/orderd/internal/platform/failpoint"
	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
	"github.com/atlasmart/orderd/proto/client"
)

// TestListCustomerOrdersNewestFirstOverTheDefaultRange: without months the
// listing covers the last 12 (the current one included), reads each month
// partition newest month first, and pages come newest order first.
func TestListCustomerOrdersNewestFirstOverTheDefaultRange(t *testing.T) {
	p := server(t)
	customer := "cust-newest-" + uuid.NewString()[:8]
	var created []string // oldest first
	for i := range 5 {
		req := newRequest(fmt.Sprintf("%d.00", i+1))
		req.CustomerId = customer
		resp, _, err := create(t, p.client, req)
		if err != nil {
			t.Fatalf("CreateOrder: %v", err)
		}
		created = append(created, resp.GetOrder().GetOrderId())
		time.Sleep(5 * time.Millisecond) // distinct creation milliseconds
	}
	var listed []string
	req := &ordersv1.ListCustomerOrdersRequest{CustomerId: customer, PageSize: 2}
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("more than 10 pages for 5 orders in pages of 2")
		}
		resp, err := p.client.ListCustomerOrders(callCtx(t), req)
		if err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		for _, o := range resp.GetOrders() {
			listed = append(listed, o.GetOrderId())
			if len(o.GetOrderMonth()) != len("2006-01") {
				t.Errorf("order_month %q, want YYYY-MM (the request's format)", o.GetOrderMonth())
			}
		}
		if resp.GetNextPageToken() == "" {
			break
		}
		req.PageToken = resp.GetNextPageToken()
	}
	for i := range created {
		if i >= len(listed) || listed[i] != created[len(created)-1-i] {
			t.Fatalf("listed %v, want newest first %v (created oldest first)", listed, created)
		}
	}
	if len(listed) != len(created) {
		t.Errorf("listed %d orders, want %d", len(listed), len(created))
	}
}

// TestListRequestsFindsPendingRequests: requests a failing orderd left
// PENDING are listed (admin) with their state and attempts, a COMPLETE one
// is not, a token is bound to the states it was issued for, and once a
// reconciler has finished them they are listed no more.
func TestListRequestsFindsPendingRequests(t *testing.T) {
	shared := server(t)
	breaking := startOrderd(t, withoutReconciler("ORDERD_FAILPOINTS="+failpoint.AfterClaim+"=error")...)
	pending := map[string]bool{}
	for i := range 3 {
		req := newRequest(fmt.Sprintf("%d.50", i+1))
		if _, _, err := create(t, breaking.client, req); status.Code(err) != codes.Unavailable {
			t.Fatalf("with after-claim failing: %v, want Unavailable", err)
		}
		pending[req.GetRequestId()] = true
	}
	if err := breaking.stop(); err != nil {
		t.Fatal(err)
	}
	done := newRequest("9.99")
	if _, _, err := create(t, shared.client, done); err != nil {
		t.Fatal(err)
	}

	list := func(states ...ordersv1.RequestState) map[string]*ordersv1.WriteRequest {
		t.Helper()
		found := map[string]*ordersv1.WriteRequest{}
		// Pages of one: a page ends inside a chunk of the scan and the next
		// resumes there.
		req := &ordersv1.ListRequestsRequest{States: states, PageSize: 1}
		for calls := 0; ; calls++ {
			if calls > 1000 {
				t.Fatal("no last page after 1000 calls")
			}
			resp, err := shared.client.ListRequests(callCtx(t), req)
			if err != nil {
				t.Fatalf("ListRequests: %v", err)
			}
			for _, r := range resp.GetRequests() {
				found[r.GetRequestId()] = r
			}
			if resp.GetNextPageToken() == "" {
				return found
			}
			// The scan reads every tenant's rows, and Cassandra's paging
			// state holds the last row's key: the token must show none.
			raw, err := base64.RawURLEncoding.DecodeString(resp.GetNextPageToken())
			if err != nil || bytes.Contains(raw, []byte("CREATE_ORDER")) || bytes.Contains(raw, []byte(tenant)) {
				t.Fatalf("page token %q (%v) shows a ledger key's tenant or operation", raw, err)
			}
			req.PageToken = resp.GetNextPageToken()
		}
	}
	got := list(ordersv1.RequestState_REQUEST_STATE_PENDING)
	for id := range pending {
		r := got[id]
		if r == nil || r.GetState() != ordersv1.RequestState_REQUEST_STATE_PENDING || r.GetOperation() != "CREATE_ORDER" || r.GetTenant() != tenant || r.GetCreatedAt() == nil {
			t.Errorf("request %s listed as %v, want PENDING CREATE_ORDER of tenant %s with its creation time", id, r, tenant)
		}
	}
	if got[done.GetRequestId()] != nil {
		t.Errorf("COMPLETE request %s listed among PENDING", done.GetRequestId())
	}
	for id := range list(ordersv1.RequestState_REQUEST_STATE_FAILED) {
		if pending[id] {
			t.Errorf("PENDING request %s listed as FAILED", id)
		}
	}

	// A token answers only the states it was issued for.
	first, err := shared.client.ListRequests(callCtx(t), &ordersv1.ListRequestsRequest{PageSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	if first.GetNextPageToken() != "" {
		_, err := shared.client.ListRequests(callCtx(t), &ordersv1.ListRequestsRequest{PageSize: 1, PageToken: first.GetNextPageToken(),
			States: []ordersv1.RequestState{ordersv1.RequestState_REQUEST_STATE_FAILED}})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("a token of another listing: %v, want InvalidArgument", err)
		}
	}

	rec := startOrderd(t, fastReconciler...)
	for id := range pending {
		waitRequestState(t, rec.client, id, ordersv1.RequestState_REQUEST_STATE_COMPLETE, time.Minute)
	}
	got = list()
	for id := range pending {
		if got[id] != nil {
			t.Errorf("request %s still listed after the reconciler finished it: %v", id, got[id])
		}
	}
}

// TestServiceConfigDoesNotRetryARecordedStaleVersion: a plain gRPC client
// with the shipped service config (gRPC's own retries on ABORTED) gets one
// STALE_VERSION, and orderd saw one attempt: the trailer
// grpc-retry-pushback-ms: -1 stopped the retry.
func TestServiceConfigDoesNotRetryARecordedStaleVersion(t *testing.T) {
	p := server(t)
	opts, err := sec.defaultClient().DialOptions()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(p.addr, append(opts, grpc.WithDefaultServiceConfig(client.ServiceConfig))...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := ordersv1.NewOrderServiceClient(conn)
	created, err := c.CreateOrder(callCtx(t), newRequest("3.00"))
	if err != nil {
		t.Fatal(err)
	}
	const replayed = `orderd_change_outcomes_total{operation="CANCEL_ORDER",outcome="replayed"}`
	const stale = `orderd_change_outcomes_total{operation="CANCEL_ORDER",outcome="stale"}`
	replayedBefore, staleBefore := scrape(t, p, replayed), scrape(t, p, stale)
	var trailer metadata.MD
	_, err = c.CancelOrder(callCtx(t), &ordersv1.CancelOrderRequest{RequestId: uuid.NewString(), OrderId: created.GetOrder().GetOrderId(), ExpectedVersion: 2}, grpc.Trailer(&trailer))
	if status.Code(err) != codes.Aborted {
		t.Fatalf("stale cancel: %v, want Aborted STALE_VERSION", err)
	}
	if got := trailer.Get("grpc-retry-pushback-ms"); len(got) != 1 || got[0] != "-1" {
		t.Errorf("grpc-retry-pushback-ms %v, want [-1]", got)
	}
	if d := scrape(t, p, stale) - staleBefore; d != 1 {
		t.Errorf("stale outcomes +%v, want +1", d)
	}
	if d := scrape(t, p, replayed) - replayedBefore; d != 0 {
		t.Errorf("replayed outcomes +%v, want +0: gRPC retried a recorded STALE_VERSION", d)
	}
}
