package loadgen

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

// scriptedClient answers CreateOrder from answer (called with the number of
// calls made for that request id so far) and counts calls per request id.
type scriptedClient struct {
	ordersv1.OrderServiceClient // other methods are not called
	answer                      func(req *ordersv1.CreateOrderRequest, nth int) (*ordersv1.CreateOrderResponse, error)

	mu    sync.Mutex
	calls map[string]int
}

func (c *scriptedClient) CreateOrder(_ context.Context, req *ordersv1.CreateOrderRequest, _ ...grpc.CallOption) (*ordersv1.CreateOrderResponse, error) {
	c.mu.Lock()
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[req.RequestId]++
	nth := c.calls[req.RequestId]
	c.mu.Unlock()
	return c.answer(req, nth)
}

func order(req *ordersv1.CreateOrderRequest) *ordersv1.CreateOrderResponse {
	return &ordersv1.CreateOrderResponse{Order: &ordersv1.Order{OrderId: "o-" + req.RequestId, RequestId: req.RequestId,
		CustomerId: req.CustomerId, Total: req.Total, Currency: req.Currency}}
}

// A load without valid credentials is refused for good: each intent is sent
// once and not retried, and the report says so.
func TestRefusedForGoodIsNotRetried(t *testing.T) {
	for _, code := range []codes.Code{codes.Unauthenticated, codes.PermissionDenied, codes.InvalidArgument} {
		t.Run(code.String(), func(t *testing.T) {
			c := &scriptedClient{answer: func(*ordersv1.CreateOrderRequest, int) (*ordersv1.CreateOrderResponse, error) {
				return nil, status.Error(code, "refused")
			}}
			rep := Run(context.Background(), c, Config{Intents: 20, Concurrency: 4, RetryFor: 5 * time.Second})
			if rep.Calls != 20 || rep.Unacked != 20 || rep.Refused != 20 || rep.Codes[code.String()] != 20 {
				t.Fatalf("calls %d, unacked %d, refused %d, codes %v; want 20 of each, no retry", rep.Calls, rep.Unacked, rep.Refused, rep.Codes)
			}
		})
	}
}

// An answer a retry can change (Unavailable, an unknown outcome) is still
// retried with the same request id until it is acknowledged.
func TestRetryableAnswersAreRetried(t *testing.T) {
	c := &scriptedClient{answer: func(req *ordersv1.CreateOrderRequest, nth int) (*ordersv1.CreateOrderResponse, error) {
		if nth == 1 {
			return nil, status.Error(codes.Unavailable, "outcome unknown")
		}
		return order(req), nil
	}}
	rep := Run(context.Background(), c, Config{Intents: 20, Concurrency: 4, RetryFor: 5 * time.Second})
	if rep.Acked != 20 || rep.AckedAfterRetry != 20 || rep.Unacked != 0 || rep.Refused != 0 || rep.Calls != 40 {
		t.Fatalf("acked %d (after retry %d), unacked %d, refused %d, calls %d; want 20, 20, 0, 0, 40",
			rep.Acked, rep.AckedAfterRetry, rep.Unacked, rep.Refused, rep.Calls)
	}
}
