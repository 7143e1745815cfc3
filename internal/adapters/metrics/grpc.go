package metrics

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// UnaryServerInterceptor counts and times every unary call by full method
// (e.g. /atlasmart.orders.v1.OrderService/CreateOrder) and status code. Put
// it first in the chain so that the time includes the other interceptors.
// On a nil *Metrics it only calls the handler.
func (m *Metrics) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if m == nil {
			return handler(ctx, req)
		}
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
