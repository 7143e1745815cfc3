package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/atlasmart/orderd/internal/tools/freeport"
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

// TestHealthPortAnswersPlaintextProbes: with ORDERD_HEALTH_ADDR set, a probe
// without TLS or credentials (what Kubernetes' native gRPC probe is) reads
// readiness ("") and liveness from the second listener, which serves nothing
// else, while the main port stays TLS-only; after SIGTERM the listener goes.
func TestHealthPortAnswersPlaintextProbes(t *testing.T) {
	healthAddr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	p := startOrderd(t, "ORDERD_HEALTH_ADDR="+healthAddr)
	conn, err := grpc.NewClient(healthAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	probe := healthpb.NewHealthClient(conn)
	for _, service := range []string{"", "liveness", ordersv1.OrderService_ServiceDesc.ServiceName} {
		resp, err := probe.Check(callCtx(t), &healthpb.HealthCheckRequest{Service: service})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("plaintext health of %q = %v, %v; want SERVING", service, resp.GetStatus(), err)
		}
	}
	_, err = ordersv1.NewOrderServiceClient(conn).GetOrder(callCtx(t), &ordersv1.GetOrderRequest{OrderId: "x"})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("GetOrder on the health port = %v, want Unimplemented (it serves health only)", err)
	}
	plain, err := grpc.NewClient(p.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := healthpb.NewHealthClient(plain).Check(callCtx(t), &healthpb.HealthCheckRequest{}); err == nil {
		t.Error("a plaintext health check on the TLS main port succeeded")
	}

	if err := p.stop(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if resp, err := probe.Check(ctx, &healthpb.HealthCheckRequest{Service: "liveness"}); err == nil {
		t.Errorf("after exit the health port still answers %v", resp.GetStatus())
	}
}
