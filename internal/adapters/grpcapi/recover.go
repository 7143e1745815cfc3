package grpcapi

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/atlasmart/orderd/internal/domain/fault"
)

// RecoverPanics answers a call whose handler panicked with INTERNAL and
// logs the panic once, with its stack; the process keeps serving. A bug
// hit by one request must not end every other client's call in flight
// (the work of those is safe either way: their due entries outlive the
// process), nor give a crafted request a way to restart the service. The
// panic's value never reaches the client. Put it innermost, so that the
// metrics and tracing interceptors see the INTERNAL it answers.
func RecoverPanics(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if p := recover(); p != nil {
				log.ErrorContext(ctx, "internal error", "method", info.FullMethod, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				resp, err = nil, status.Error(codes.Internal, messageOf[fault.ReasonInternal])
			}
		}()
		return handler(ctx, req)
	}
}
