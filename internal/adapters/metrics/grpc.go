package metrics

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// UnaryServerInterceptor counts and times every unary call: in the
// standard grpc_server_* metrics (by service, method, type and code) and in
// orderd_grpc_* (by full method, e.g.
// /atlasmart.orders.v1.OrderService/CreateOrder, and code). Put it first in
// the chain so that the time includes the other interceptors. On a nil
// *Metrics it only calls the handler.
func (m *Metrics) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	if m == nil {
		return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			return handler(ctx, req)
		}
	}
	standard, own := m.grpcServer.UnaryServerInterceptor(), m.ownUnaryInterceptor()
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		return standard(ctx, req, info, func(ctx context.Context, req any) (any, error) {
			return own(ctx, req, info, handler)
		})
	}
}

// StreamServerInterceptor counts and times every streaming call in the
// standard grpc_server_* metrics (orderd's own API has none; reflection
// does). On a nil *Metrics it only calls the handler.
func (m *Metrics) StreamServerInterceptor() grpc.StreamServerInterceptor {
	if m == nil {
		return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			return handler(srv, ss)
		}
	}
	return m.grpcServer.StreamServerInterceptor()
}

// InitializeGRPC gives every method srv serves its grpc_server_* series at
// zero, so that a rate or an alert sees the first call. Call it once the
// services are registered.
func (m *Metrics) InitializeGRPC(srv *grpc.Server) {
	if m != nil {
		m.grpcServer.InitializeMetrics(srv)
	}
}

// ownUnaryInterceptor counts orderd_grpc_requests_total and times
// orderd_grpc_request_duration_seconds.
func (m *Metrics) ownUnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		start := time.Now()
		resp, err := handler(ctx, req)
		// As grpc-go does: a bare context error is sent as its code.
		st, ok := status.FromError(err)
		if !ok {
			st = status.FromContextError(err)
		}
		code := st.Code().String()
		m.grpcRequests.WithLabelValues(info.FullMethod, code).Inc()
		m.grpcDuration.WithLabelValues(info.FullMethod, code).Observe(time.Since(start).Seconds())
		return resp, err
	}
}
