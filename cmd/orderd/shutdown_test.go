package main

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// slowHealth answers Check only after its call's context ends, and a
// moment later still: a handler that outlives its call.
type slowHealth struct {
	healthpb.UnimplementedHealthServer
	entered  chan struct{}
	returned atomic.Bool
}

func (h *slowHealth) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	close(h.entered)
	<-ctx.Done()
	time.Sleep(200 * time.Millisecond)
	h.returned.Store(true)
	return nil, ctx.Err()
}

// When the shutdown grace runs out, Stop returns only once every handler
// has: orderd closes the workflow, the publisher and the session right
// after, and a handler still running would use them.
func TestStopWaitsForHandlers(t *testing.T) {
	srv := grpc.NewServer(transportLimits(&config{maxStreams: 16, maxRecvBytes: 1 << 20, maxConnAge: time.Minute, requestTimeout: time.Second})...)
	h := &slowHealth{entered: make(chan struct{})}
	healthpb.RegisterHealthServer(srv, h)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	go func() {
		_, _ = healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	}()
	select {
	case <-h.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the call never reached its handler")
	}
	srv.Stop()
	if !h.returned.Load() {
		t.Error("Stop returned while a handler was still running")
	}
}
