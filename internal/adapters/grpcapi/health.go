package grpcapi

import (
	"context"
	"log/slog"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"google.golang.org/grpc/health"

	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

// HealthProbe keeps the gRPC health service in step with the cluster:
// SERVING while a ping succeeds, NOT_SERVING while it fails.
type HealthProbe struct {
	health   *health.Server
	ping     func(ctx context.Context) error
	interval time.Duration
	log      *slog.Logger
}

// NewHealthProbe returns a probe that pings every interval. It starts nothing.
func NewHealthProbe(h *health.Server, ping func(ctx context.Context) error, interval time.Duration, log *slog.Logger) *HealthProbe {
	return &HealthProbe{health: h, ping: ping, interval: interval, log: log}
}

// Run probes until ctx ends.
func (p *HealthProbe) Run(ctx context.Context) error {
	last := healthpb.HealthCheckResponse_UNKNOWN
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, p.interval)
		err := p.ping(pctx)
		cancel()
		st := healthpb.HealthCheckResponse_SERVING
		if err != nil {
			st = healthpb.HealthCheckResponse_NOT_SERVING
		}
		if st != last && ctx.Err() == nil {
			p.log.Info("health changed", "status", st.String(), "error", err)
			p.health.SetServingStatus("", st)
			p.health.SetServingStatus(ordersv1.OrderService_ServiceDesc.ServiceName, st)
			last = st
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
