package client

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

// Client calls orderd and does the retry protocol for its caller. It is
// safe for concurrent use; make one per process and Close it at the end.
type Client struct {
	conn   *grpc.ClientConn
	svc    ordersv1.OrderServiceClient
	policy Policy
}

// Option configures New.
type Option func(*settings)

type settings struct {
	creds  Credentials
	policy Policy
	dial   []grpc.DialOption
}

// WithCredentials sets how the client authenticates (default: TLS with the
// system roots and no identity, which orderd refuses).
func WithCredentials(c Credentials) Option { return func(s *settings) { s.creds = c } }

// WithPolicy sets how the client retries (default DefaultPolicy).
func WithPolicy(p Policy) Option { return func(s *settings) { s.policy = p } }

// WithDialOptions adds gRPC dial options (interceptors, a stats handler such
// as otelgrpc's for client spans, ...), after the client's own.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(s *settings) { s.dial = append(s.dial, opts...) }
}

// New returns a client of the orderd at target, a gRPC target such as
// "dns:///orderd.example.com:8080" (every address it resolves to is used,
// round robin) or "127.0.0.1:8080". It does not connect until the first
// call.
func New(target string, opts ...Option) (*Client, error) {
	var s settings
	for _, o := range opts {
		o(&s)
	}
	dial, err := s.creds.DialOptions()
	if err != nil {
		return nil, fmt.Errorf("orderd client credentials: %w", err)
	}
	dial = append(dial,
		grpc.WithDefaultServiceConfig(ServiceConfig),
		grpc.WithDisableRetry(), // Client retries; see ServiceConfig
		grpc.WithChainUnaryInterceptor(propagateTrace),
	)
	conn, err := grpc.NewClient(target, append(dial, s.dial...)...)
	if err != nil {
		return nil, fmt.Errorf("orderd client for %s: %w", target, err)
	}
	return &Client{conn: conn, svc: ordersv1.NewOrderServiceClient(conn), policy: s.policy.withDefaults()}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Service is the raw generated client on the same connection, for what
// Client does not wrap; its calls are not retried.
func (c *Client) Service() ordersv1.OrderServiceClient { return c.svc }

// NewRequestID returns a new idempotency key: make one per business intent
// (one order to place, one change to make), store it with the intent, and
// send it on every retry of that intent, from any process.
func NewRequestID() string { return uuid.NewString() }

// CreateOrder places req's order exactly once. req.RequestId names the
// intent; if it is empty, CreateOrder sets it to NewRequestID() in req, so
// that the caller can keep it for a later retry. Every attempt of this call
// sends the same request_id, so orderd answers a retry with the recorded
// outcome (resp.Replayed) and never creates a second order.
//
// Errors are *Error: ErrInvalid, ErrConflict, ErrFailed and ErrDenied are
// final; ErrUnavailable and ErrOutcomeUnknown mean the attempts ran out, and
// a later retry must use the same request_id (Error.RequestID).
func (c *Client) CreateOrder(ctx context.Context, req *ordersv1.CreateOrderRequest) (*ordersv1.CreateOrderResponse, error) {
	if req.GetRequestId() == "" {
		req.RequestId = NewRequestID()
	}
	return call(ctx, c.policy, req.GetRequestId(), c.settler(req.GetRequestId(), "CREATE_ORDER"),
		func(ctx context.Context) (*ordersv1.CreateOrderResponse, error) { return c.svc.CreateOrder(ctx, req) })
}

// CancelOrder cancels an order at req.ExpectedVersion, exactly once, with
// CreateOrder's request_id rules. ErrStale (Error.CurrentVersion) and
// ErrRejected are recorded answers: a new attempt needs a new request_id.
func (c *Client) CancelOrder(ctx context.Context, req *ordersv1.CancelOrderRequest) (*ordersv1.CancelOrderResponse, error) {
	if req.GetRequestId() == "" {
		req.RequestId = NewRequestID()
	}
	return call(ctx, c.policy, req.GetRequestId(), c.settler(req.GetRequestId(), "CANCEL_ORDER"),
		func(ctx context.Context) (*ordersv1.CancelOrderResponse, error) { return c.svc.CancelOrder(ctx, req) })
}

// AmendOrder sets an order's shipping note at req.ExpectedVersion, exactly
// once, as CancelOrder.
func (c *Client) AmendOrder(ctx context.Context, req *ordersv1.AmendOrderRequest) (*ordersv1.AmendOrderResponse, error) {
	if req.GetRequestId() == "" {
		req.RequestId = NewRequestID()
	}
	return call(ctx, c.policy, req.GetRequestId(), c.settler(req.GetRequestId(), "AMEND_ORDER"),
		func(ctx context.Context) (*ordersv1.AmendOrderResponse, error) { return c.svc.AmendOrder(ctx, req) })
}

// settler asks GetRequest about one write request: its state name
// ("PENDING", "COMPLETE", "FAILED"), or "NOT_FOUND".
func (c *Client) settler(requestID, operation string) settler {
	return func(ctx context.Context) (string, error) {
		resp, err := c.svc.GetRequest(ctx, &ordersv1.GetRequestRequest{RequestId: requestID, Operation: operation})
		if status.Code(err) == codes.NotFound {
			return "NOT_FOUND", nil
		}
		if err != nil {
			return "", err
		}
		switch st := resp.GetRequest().GetState(); st {
		case ordersv1.RequestState_REQUEST_STATE_PENDING:
			return "PENDING", nil
		case ordersv1.RequestState_REQUEST_STATE_COMPLETE:
			return "COMPLETE", nil
		case ordersv1.RequestState_REQUEST_STATE_FAILED:
			return "FAILED", nil
		default:
			return "", fmt.Errorf("request state %v", st)
		}
	}
}

// read retries a call that changes nothing.
func read[T any](ctx context.Context, c *Client, attempt func(context.Context) (T, error)) (T, error) {
	return call(ctx, c.policy, "", nil, attempt)
}

// GetOrder reads one order.
func (c *Client) GetOrder(ctx context.Context, orderID string) (*ordersv1.Order, error) {
	resp, err := read(ctx, c, func(ctx context.Context) (*ordersv1.GetOrderResponse, error) {
		return c.svc.GetOrder(ctx, &ordersv1.GetOrderRequest{OrderId: orderID})
	})
	return resp.GetOrder(), err
}

// GetRequest reads the ledger's record of one write request; operation is
// "CREATE_ORDER" (or "") , "CANCEL_ORDER" or "AMEND_ORDER".
func (c *Client) GetRequest(ctx context.Context, requestID, operation string) (*ordersv1.WriteRequest, error) {
	resp, err := read(ctx, c, func(ctx context.Context) (*ordersv1.GetRequestResponse, error) {
		return c.svc.GetRequest(ctx, &ordersv1.GetRequestRequest{RequestId: requestID, Operation: operation})
	})
	return resp.GetRequest(), err
}

// RequeueRequest gives a FAILED create request another round of attempts
// (admin permission).
func (c *Client) RequeueRequest(ctx context.Context, requestID string) (*ordersv1.WriteRequest, error) {
	resp, err := read(ctx, c, func(ctx context.Context) (*ordersv1.RequeueRequestResponse, error) {
		return c.svc.RequeueRequest(ctx, &ordersv1.RequeueRequestRequest{RequestId: requestID})
	})
	return resp.GetRequest(), err
}

// ListCustomerOrders reads one page.
func (c *Client) ListCustomerOrders(ctx context.Context, req *ordersv1.ListCustomerOrdersRequest) (*ordersv1.ListCustomerOrdersResponse, error) {
	return read(ctx, c, func(ctx context.Context) (*ordersv1.ListCustomerOrdersResponse, error) {
		return c.svc.ListCustomerOrders(ctx, req)
	})
}

// CustomerOrders yields every order req's listing holds, newest first,
// page after page (req.PageToken is advanced as it goes). It stops at the
// first error, which it yields.
func (c *Client) CustomerOrders(ctx context.Context, req *ordersv1.ListCustomerOrdersRequest) iter.Seq2[*ordersv1.Order, error] {
	return pages(ctx, func(ctx context.Context, token string) ([]*ordersv1.Order, string, error) {
		req.PageToken = token
		resp, err := c.ListCustomerOrders(ctx, req)
		return resp.GetOrders(), resp.GetNextPageToken(), err
	}, req.GetPageToken())
}

// ListRequests reads one page of unfinished requests (admin permission).
func (c *Client) ListRequests(ctx context.Context, req *ordersv1.ListRequestsRequest) (*ordersv1.ListRequestsResponse, error) {
	return read(ctx, c, func(ctx context.Context) (*ordersv1.ListRequestsResponse, error) {
		return c.svc.ListRequests(ctx, req)
	})
}

// pages turns a paged listing into one sequence.
func pages[T any](ctx context.Context, page func(context.Context, string) ([]T, string, error), token string) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		for {
			items, next, err := page(ctx, token)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, it := range items {
				if !yield(it, nil) {
					return
				}
			}
			if next == "" {
				return
			}
			token = next
		}
	}
}

// IsRetryable says whether err leaves an intent that a later retry with the
// same request_id may still complete: ErrUnavailable or ErrOutcomeUnknown.
func IsRetryable(err error) bool {
	return errors.Is(err, ErrUnavailable) || errors.Is(err, ErrOutcomeUnknown)
}
