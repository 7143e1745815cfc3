package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

// healthStatus asks p's gRPC health service about the order service.
func healthStatus(p *orderdProcess) (healthpb.HealthCheckResponse_ServingStatus, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(p.conn).Check(ctx, &healthpb.HealthCheckRequest{Service: ordersv1.OrderService_ServiceDesc.ServiceName})
	return resp.GetStatus(), err
}

// waitHealth polls p's health until it says want, and returns how long
// that took.
func waitHealth(t *testing.T, p *orderdProcess, want healthpb.HealthCheckResponse_ServingStatus, within time.Duration) time.Duration {
	t.Helper()
	took, err := eventually(within, func() error {
		if s, err := healthStatus(p); s != want {
			return fmt.Errorf("health %v %v", s, err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("health not %v within %s: %v", want, within, err)
	}
	return took
}
