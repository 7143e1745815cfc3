package client

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

// scriptedServer answers CreateOrder and CancelOrder from a script, one
// entry per call (the last one repeats), and GetRequest from requestState.
// It records what each call carried.
type scriptedServer struct {
	ordersv1.UnimplementedOrderServiceServer
	mu           sync.Mutex
	script       []func(ctx context.Context) error // nil entry: success
	requestState ordersv1.RequestState             // UNSPECIFIED: NOT_FOUND
	requestIDs   []string
	at           []time.Time
	traceparents []string
	getRequests  int
}

func (s *scriptedServer) next(ctx context.Context, requestID string) error {
	s.mu.Lock()
	i := len(s.requestIDs)
	s.requestIDs = append(s.requestIDs, requestID)
	s.at = append(s.at, time.Now())
	md, _ := metadata.FromIncomingContext(ctx)
	s.traceparents = append(s.traceparents, first(md.Get("traceparent")))
	step := s.script[min(i, len(s.script)-1)]
	s.mu.Unlock()
	if step == nil {
		return nil
	}
	return step(ctx)
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

func (s *scriptedServer) CreateOrder(ctx context.Context, req *ordersv1.CreateOrderRequest) (*ordersv1.CreateOrderResponse, error) {
	if err := s.next(ctx, req.GetRequestId()); err != nil {
		return nil, err
	}
	return &ordersv1.CreateOrderResponse{Order: &ordersv1.Order{OrderId: "order-of-" + req.GetRequestId(), RequestId: req.GetRequestId()}}, nil
}

func (s *scriptedServer) CancelOrder(ctx context.Context, req *ordersv1.CancelOrderRequest) (*ordersv1.CancelOrderResponse, error) {
	if err := s.next(ctx, req.GetRequestId()); err != nil {
		return nil, err
	}
	return &ordersv1.CancelOrderResponse{Version: req.GetExpectedVersion() + 1}, nil
}

func (s *scriptedServer) GetOrder(ctx context.Context, req *ordersv1.GetOrderRequest) (*ordersv1.GetOrderResponse, error) {
	if err := s.next(ctx, ""); err != nil {
		return nil, err
	}
	return &ordersv1.GetOrderResponse{Order: &ordersv1.Order{OrderId: req.GetOrderId()}}, nil
}

func (s *scriptedServer) GetRequest(_ context.Context, req *ordersv1.GetRequestRequest) (*ordersv1.GetRequestResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.getRequests++
	if s.requestState == ordersv1.RequestState_REQUEST_STATE_UNSPECIFIED {
		return nil, status.Error(codes.NotFound, "no such request")
	}
	return &ordersv1.GetRequestResponse{Request: &ordersv1.WriteRequest{RequestId: req.GetRequestId(), State: s.requestState}}, nil
}

// fail is a script step answering code with orderd's details.
func fail(code codes.Code, reason string, retryAfter time.Duration, meta map[string]string, violations ...*errdetails.BadRequest_FieldViolation) func(context.Context) error {
	return func(context.Context) error {
		st := status.New(code, "scripted "+reason)
		details := []protoadapt.MessageV1{&errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain, Metadata: meta}}
		if retryAfter > 0 {
			details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(retryAfter)})
		}
		if len(violations) > 0 {
			details = append(details, &errdetails.BadRequest{FieldViolations: violations})
		}
		st, err := st.WithDetails(details...)
		if err != nil {
			panic(err)
		}
		return st.Err()
	}
}

// hang blocks until the attempt's deadline: an answer that never comes.
func hang(ctx context.Context) error {
	<-ctx.Done()
	return status.FromContextError(ctx.Err()).Err()
}

var fastPolicy = Policy{MaxAttempts: 4, AttemptTimeout: 200 * time.Millisecond, InitialBackoff: time.Millisecond,
	MaxBackoff: 5 * time.Millisecond, SettleTimeout: time.Second}

func newTestClient(t *testing.T, srv *scriptedServer, p Policy) *Client {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	gs := grpc.NewServer()
	ordersv1.RegisterOrderServiceServer(gs, srv)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	c, err := New("passthrough:///bufnet", WithCredentials(Credentials{Plaintext: true}), WithPolicy(p),
		WithDialOptions(grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) })))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func create() *ordersv1.CreateOrderRequest {
	return &ordersv1.CreateOrderRequest{CustomerId: "cust-1", Total: "1.00", Currency: "EUR"}
}

// One request_id per intent: made once when the caller gave none, kept in
// the request, and sent unchanged on every attempt.
func TestCreateOrderKeepsOneRequestIDAcrossRetries(t *testing.T) {
	srv := &scriptedServer{script: []func(context.Context) error{
		fail(codes.Unavailable, "CLUSTER_UNAVAILABLE", time.Millisecond, nil),
		fail(codes.Aborted, "REQUEST_IN_PROGRESS", time.Millisecond, nil),
		nil,
	}}
	c := newTestClient(t, srv, fastPolicy)
	req := create()
	resp, err := c.CreateOrder(context.Background(), req)
	if err != nil {
		t.Fatalf("CreateOrder: %v", err)
	}
	if req.GetRequestId() == "" || len(srv.requestIDs) != 3 {
		t.Fatalf("request_id %q, %d attempts; want one set in req and 3 attempts", req.GetRequestId(), len(srv.requestIDs))
	}
	for i, id := range srv.requestIDs {
		if id != req.GetRequestId() {
			t.Errorf("attempt %d sent request_id %q, want %q", i+1, id, req.GetRequestId())
		}
	}
	if resp.GetOrder().GetRequestId() != req.GetRequestId() {
		t.Errorf("response for %q", resp.GetOrder().GetRequestId())
	}
	// A caller's own request_id is used as given.
	own := &ordersv1.CreateOrderRequest{RequestId: "3f1c3c44-0000-4000-8000-000000000001", CustomerId: "c", Total: "1", Currency: "JPY"}
	if _, err := c.CreateOrder(context.Background(), own); err != nil || srv.requestIDs[len(srv.requestIDs)-1] != own.RequestId {
		t.Errorf("own request_id: %v, sent %q", err, srv.requestIDs[len(srv.requestIDs)-1])
	}
}

// Final answers are never retried and come back typed, with their details.
func TestFinalAnswersAreTypedAndNotRetried(t *testing.T) {
	tests := []struct {
		name    string
		step    func(context.Context) error
		want    error
		check   func(*Error) bool
		attempt int
	}{
		{"conflict", fail(codes.FailedPrecondition, "REQUEST_ID_REUSED", 0, nil), ErrConflict, nil, 1},
		{"failed", fail(codes.FailedPrecondition, "REQUEST_FAILED", 0, nil), ErrFailed, nil, 1},
		{"stale", fail(codes.Aborted, "STALE_VERSION", 0, map[string]string{"current_version": "7"}), ErrStale,
			func(e *Error) bool { return e.CurrentVersion == 7 }, 1},
		{"cancelled", fail(codes.FailedPrecondition, "ORDER_CANCELLED", 0, nil), ErrRejected, nil, 1},
		{"invalid", fail(codes.InvalidArgument, "INVALID_ARGUMENT", 0, nil,
			&errdetails.BadRequest_FieldViolation{Field: "total", Description: "must be greater than zero"}), ErrInvalid,
			func(e *Error) bool { return len(e.Violations) == 1 && e.Violations[0].Field == "total" }, 1},
		{"denied", fail(codes.PermissionDenied, "PERMISSION_DENIED", 0, nil), ErrDenied, nil, 1},
		{"internal", fail(codes.Internal, "INTERNAL", 0, nil), ErrUnexpected, nil, 1},
		{"too large", fail(codes.ResourceExhausted, "", 0, nil), ErrUnexpected, nil, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := &scriptedServer{script: []func(context.Context) error{tc.step}}
			c := newTestClient(t, srv, fastPolicy)
			_, err := c.CancelOrder(context.Background(), &ordersv1.CancelOrderRequest{OrderId: "o", ExpectedVersion: 1})
			var e *Error
			if !errors.Is(err, tc.want) || !errors.As(err, &e) {
				t.Fatalf("error %v, want %v as *Error", err, tc.want)
			}
			if len(srv.requestIDs) != tc.attempt || e.Attempts != tc.attempt {
				t.Errorf("%d calls (Attempts %d), want %d", len(srv.requestIDs), e.Attempts, tc.attempt)
			}
			if tc.check != nil && !tc.check(e) {
				t.Errorf("details of %#v", e)
			}
			if IsRetryable(err) {
				t.Error("a final answer reported as retryable")
			}
		})
	}
}

// The wait before a retry is at least the server's RetryInfo delay.
func TestRetryInfoIsHonoured(t *testing.T) {
	const delay = 150 * time.Millisecond
	srv := &scriptedServer{script: []func(context.Context) error{fail(codes.ResourceExhausted, "RATE_LIMITED", delay, nil), nil}}
	c := newTestClient(t, srv, fastPolicy)
	if _, err := c.CreateOrder(context.Background(), create()); err != nil {
		t.Fatal(err)
	}
	if len(srv.at) != 2 || srv.at[1].Sub(srv.at[0]) < delay {
		t.Errorf("attempts at %v: want 2, at least %v apart", srv.at, delay)
	}
}

// Attempts that time out leave the outcome unknown; before giving up the
// client asks GetRequest, and a COMPLETE request is answered by a replay.
func TestUnknownOutcomeIsSettledBeforeGivingUp(t *testing.T) {
	hangs := make([]func(context.Context) error, fastPolicy.MaxAttempts)
	for i := range hangs {
		hangs[i] = hang
	}
	t.Run("complete: replayed", func(t *testing.T) {
		srv := &scriptedServer{script: append(hangs, nil), requestState: ordersv1.RequestState_REQUEST_STATE_COMPLETE}
		c := newTestClient(t, srv, fastPolicy)
		req := create()
		resp, err := c.CreateOrder(context.Background(), req)
		if err != nil || resp.GetOrder().GetRequestId() != req.GetRequestId() {
			t.Fatalf("CreateOrder: %v, %v", resp, err)
		}
		if srv.getRequests != 1 || len(srv.requestIDs) != fastPolicy.MaxAttempts+1 {
			t.Errorf("%d GetRequest, %d CreateOrder calls; want 1 and %d", srv.getRequests, len(srv.requestIDs), fastPolicy.MaxAttempts+1)
		}
	})
	t.Run("complete: a recorded refusal is the answer", func(t *testing.T) {
		// A change whose attempts all timed out while orderd recorded its
		// refusal (the request is COMPLETE): the replay answers the refusal,
		// which is as final as on a first attempt.
		stale := fail(codes.Aborted, "STALE_VERSION", 0, map[string]string{"current_version": "3"})
		srv := &scriptedServer{script: append(hangs, stale), requestState: ordersv1.RequestState_REQUEST_STATE_COMPLETE}
		c := newTestClient(t, srv, fastPolicy)
		_, err := c.CancelOrder(context.Background(), &ordersv1.CancelOrderRequest{OrderId: "o", ExpectedVersion: 1})
		var e *Error
		if !errors.Is(err, ErrStale) || !errors.As(err, &e) || e.CurrentVersion != 3 || e.Attempts != fastPolicy.MaxAttempts+1 {
			t.Fatalf("error %#v, want ErrStale with current version 3 after %d attempts", err, fastPolicy.MaxAttempts+1)
		}
		if srv.getRequests != 1 {
			t.Errorf("%d GetRequest calls, want 1", srv.getRequests)
		}
	})
	for _, tc := range []struct {
		state ordersv1.RequestState
		want  error
		name  string
	}{
		{ordersv1.RequestState_REQUEST_STATE_PENDING, ErrOutcomeUnknown, "PENDING"},
		{ordersv1.RequestState_REQUEST_STATE_UNSPECIFIED, ErrOutcomeUnknown, "NOT_FOUND"},
		{ordersv1.RequestState_REQUEST_STATE_FAILED, ErrFailed, "FAILED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &scriptedServer{script: hangs[:1], requestState: tc.state}
			c := newTestClient(t, srv, fastPolicy)
			req := create()
			_, err := c.CreateOrder(context.Background(), req)
			var e *Error
			if !errors.Is(err, tc.want) || !errors.As(err, &e) || e.RequestState != tc.name || e.RequestID != req.GetRequestId() {
				t.Fatalf("error %#v, want %v with request state %s and the request_id", err, tc.want, tc.name)
			}
			if srv.getRequests != 1 {
				t.Errorf("%d GetRequest calls, want 1", srv.getRequests)
			}
			if tc.want == ErrOutcomeUnknown && !IsRetryable(err) {
				t.Error("an unknown outcome must be retryable with the same request_id")
			}
		})
	}
}

// Answers that say nothing was done are retried until the attempts run
// out; a read is never settled.
func TestUnavailableRunsOutOfAttempts(t *testing.T) {
	srv := &scriptedServer{script: []func(context.Context) error{fail(codes.Unavailable, "CLUSTER_UNAVAILABLE", time.Millisecond, nil)}}
	c := newTestClient(t, srv, fastPolicy)
	_, err := c.CreateOrder(context.Background(), create())
	if !errors.Is(err, ErrUnavailable) || len(srv.requestIDs) != fastPolicy.MaxAttempts || srv.getRequests != 0 {
		t.Errorf("error %v after %d calls and %d GetRequest; want ErrUnavailable after %d, none", err, len(srv.requestIDs), srv.getRequests, fastPolicy.MaxAttempts)
	}
	srv = &scriptedServer{script: []func(context.Context) error{hang}}
	c = newTestClient(t, srv, fastPolicy)
	if _, err := c.GetOrder(context.Background(), "o"); !errors.Is(err, ErrUnavailable) || srv.getRequests != 0 {
		t.Errorf("read: %v, %d GetRequest; want ErrUnavailable and no settling", err, srv.getRequests)
	}
}

// The caller's deadline bounds everything, settling included.
func TestCallerDeadlineBoundsRetries(t *testing.T) {
	srv := &scriptedServer{script: []func(context.Context) error{hang}, requestState: ordersv1.RequestState_REQUEST_STATE_PENDING}
	c := newTestClient(t, srv, Policy{MaxAttempts: 100, AttemptTimeout: 50 * time.Millisecond, SettleTimeout: 100 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.CreateOrder(ctx, create())
	if !errors.Is(err, ErrOutcomeUnknown) {
		t.Errorf("error %v, want ErrOutcomeUnknown", err)
	}
	if took := time.Since(start); took > 600*time.Millisecond+200*time.Millisecond {
		t.Errorf("took %v, past the caller's deadline", took)
	}
	if srv.getRequests != 1 {
		t.Errorf("%d GetRequest calls, want 1 (the reserve is kept for settling)", srv.getRequests)
	}
}

// The caller's trace context travels with every call.
func TestTraceContextPropagates(t *testing.T) {
	otel.SetTextMapPropagator(propagation.TraceContext{})
	defer otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	srv := &scriptedServer{script: []func(context.Context) error{nil}}
	c := newTestClient(t, srv, fastPolicy)
	if _, err := c.CreateOrder(ctx, create()); err != nil {
		t.Fatal(err)
	}
	if want := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"; srv.traceparents[0] != want {
		t.Errorf("traceparent %q, want %q", srv.traceparents[0], want)
	}
}
