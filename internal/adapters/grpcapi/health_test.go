package grpcapi

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

// The probe maps its ping to the health service: an error (a quorum that
// cannot be reached, a ping that outlives its interval) is NOT_SERVING for
// the server and for OrderService, success is SERVING, and it follows the
// ping both ways.
func TestHealthProbeFollowsPing(t *testing.T) {
	var failing atomic.Pointer[error]
	setPing := func(err error) { failing.Store(&err) }
	setPing(errors.New("cannot achieve consistency level LOCAL_QUORUM"))
	h := health.NewServer()
	probe := NewHealthProbe(h, func(ctx context.Context) error {
		if err := *failing.Load(); err != nil {
			return err
		}
		return ctx.Err()
	}, 10*time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- probe.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	waitFor := func(want healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			all := true
			for _, svc := range []string{"", ordersv1.OrderService_ServiceDesc.ServiceName} {
				resp, err := h.Check(context.Background(), &healthpb.HealthCheckRequest{Service: svc})
				if err != nil || resp.GetStatus() != want {
					all = false
				}
			}
			if all {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("health not %s within 5s", want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor(healthpb.HealthCheckResponse_NOT_SERVING)
	setPing(nil)
	waitFor(healthpb.HealthCheckResponse_SERVING)
	setPing(context.DeadlineExceeded)
	waitFor(healthpb.HealthCheckResponse_NOT_SERVING)
	setPing(nil)
	waitFor(healthpb.HealthCheckResponse_SERVING)
}
