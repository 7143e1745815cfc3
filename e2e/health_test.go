package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

// TestHealthNotServingWithoutQuorum: with two of three nodes stopped, one
// node still answers reads at ONE but no LOCAL_QUORUM write can succeed, and
// health must say NOT_SERVING (the ping at ONE it replaced said SERVING
// here). Once the nodes are back it says SERVING again and orderd creates
// orders.
func TestHealthNotServingWithoutQuorum(t *testing.T) {
	if !cluster.CanControlNodes() {
		failInCIElseSkip(t, "this cluster offers no node control: "+cluster.Describe())
	}
	const (
		notServingWithin = 30 * time.Second  // probe every 2 s, each bounded by 2 s
		servingWithin    = 120 * time.Second // after StartNode returned
	)
	p := startOrderd(t)
	health := healthpb.NewHealthClient(p.conn)
	check := func() (healthpb.HealthCheckResponse_ServingStatus, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: ordersv1.OrderService_ServiceDesc.ServiceName})
		return resp.GetStatus(), err
	}
	if s, err := check(); s != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health with every node up: %v %v, want SERVING", s, err)
	}

	stopped := []int{2, 3}
	// Registered before the first stop, so both nodes come back whatever
	// fails below (StartNode on a running node only waits for it).
	t.Cleanup(func() {
		for _, i := range stopped {
			if err := cluster.StartNode(context.Background(), i); err != nil {
				t.Errorf("restart node %d: %v", i, err)
			}
		}
	})
	stoppedAt := time.Now()
	for _, i := range stopped {
		if err := cluster.StopNode(context.Background(), i); err != nil {
			t.Fatalf("stop node %d: %v", i, err)
		}
	}
	t.Logf("nodes %v stopped in %s", stopped, time.Since(stoppedAt).Round(time.Millisecond))

	took, err := eventually(notServingWithin, func() error {
		if s, err := check(); s != healthpb.HealthCheckResponse_NOT_SERVING {
			return fmt.Errorf("health %v %v", s, err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("two of three nodes down for %s: %v, want NOT_SERVING", notServingWithin, err)
	}
	t.Logf("two nodes down: NOT_SERVING %s after the stops returned", took.Round(time.Millisecond))
	// It stays so while the quorum is missing.
	for range 3 {
		time.Sleep(time.Second)
		if s, err := check(); s != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Fatalf("health flapped to %v %v with two nodes down", s, err)
		}
	}

	startedAt := time.Now()
	for _, i := range stopped {
		if err := cluster.StartNode(context.Background(), i); err != nil {
			t.Fatalf("start node %d: %v", i, err)
		}
	}
	t.Logf("nodes %v started in %s", stopped, time.Since(startedAt).Round(time.Millisecond))
	took, err = eventually(servingWithin, func() error {
		if s, err := check(); s != healthpb.HealthCheckResponse_SERVING {
			return fmt.Errorf("health %v %v", s, err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("nodes back for %s: %v, want SERVING", servingWithin, err)
	}
	t.Logf("nodes back: SERVING %s after StartNode returned", took.Round(time.Millisecond))
	if _, _, err := create(t, p.client, newRequest("3.00")); err != nil {
		t.Errorf("CreateOrder once health says SERVING: %v", err)
	}
}
