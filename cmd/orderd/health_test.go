package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// The plaintext health port answers a probe, and nothing larger than a
// probe needs: a request over its size bound is refused unread.
func TestHealthPortAnswersProbesOnly(t *testing.T) {
	hs, err := healthListener("127.0.0.1:0", health.NewServer())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	g, gctx := errgroup.WithContext(ctx)
	hs.serve(gctx, g, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(func() { hs.stop(); cancel(); _ = g.Wait() })

	conn, err := grpc.NewClient(hs.lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := healthpb.NewHealthClient(conn)
	resp, err := c.Check(ctx, &healthpb.HealthCheckRequest{Service: livenessService})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("liveness probe: %v, %v; want SERVING", resp, err)
	}
	_, err = c.Check(ctx, &healthpb.HealthCheckRequest{Service: strings.Repeat("x", 8192)})
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("an 8 KiB request: %v, want RESOURCE_EXHAUSTED", err)
	}
}
