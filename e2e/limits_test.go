package e2e

import (
	"fmt"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

// A tenant over its rate is refused RESOURCE_EXHAUSTED with RetryInfo,
// before anything is written: new requests against the attempts budget,
// replays from the cache against their own. Refusals are counted in
// orderd_create_outcomes_total{outcome="limited"}.
func TestRateLimitsRefuseBeforeWriting(t *testing.T) {
	p := startOrderd(t, "ORDERD_RECONCILER=false", "ORDERD_RATE_ATTEMPTS=0.5", "ORDERD_RATE_REPLAYS=2")
	refused := func(err error) bool {
		st := status.Convert(err)
		if st.Code() != codes.ResourceExhausted {
			return false
		}
		for _, d := range st.Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay().AsDuration() > 0 {
				return true
			}
		}
		t.Errorf("RESOURCE_EXHAUSTED without a RetryInfo delay: %v", st.Details())
		return true
	}

	var accepted, limited int
	var first *ordersv1.CreateOrderRequest
	for i := range 12 {
		req := newRequest(fmt.Sprintf("%d.00", 20+i))
		_, _, err := create(t, p.client, req)
		switch {
		case err == nil:
			accepted++
			if first == nil {
				first = req
			}
		case refused(err):
			limited++
			if r := readRows(t, req.RequestId, "", "", ""); r.ledger != nil {
				t.Errorf("a refused request left a ledger row: %v", r.ledger)
			}
		default:
			t.Fatalf("CreateOrder: %v", err)
		}
	}
	if accepted == 0 || limited == 0 {
		t.Fatalf("12 new requests at once, one per 2 s allowed: %d accepted, %d limited; want both", accepted, limited)
	}

	var replayed, replaysLimited int
	for range 12 {
		resp, _, err := create(t, p.client, first)
		switch {
		case err == nil && resp.Replayed:
			replayed++
		case err != nil && refused(err):
			replaysLimited++
		default:
			t.Fatalf("replay: %v, %v", resp, err)
		}
	}
	if replayed == 0 || replaysLimited == 0 {
		t.Fatalf("12 replays at once, 2/s allowed: %d replayed, %d limited; want both", replayed, replaysLimited)
	}
	if got := scrape(t, p, `orderd_create_outcomes_total{outcome="limited"}`); got != float64(limited+replaysLimited) {
		t.Errorf("limited outcomes counted = %v, want %d", got, limited+replaysLimited)
	}
	t.Logf("new: %d accepted, %d limited; replays: %d answered, %d limited", accepted, limited, replayed, replaysLimited)
}
