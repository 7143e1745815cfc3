package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	"github.com/atlasmart/orderd/internal/platform/cassandra"
)

// quorumProbeCQL reads one partition of the keyspace's schema_migrations
// table, bound to quorumProbeVersion (the first migration, present in every
// migrated keyspace; the read needs its replicas, not the row).
const quorumProbeCQL = `/* health.quorum_probe */ SELECT version FROM schema_migrations WHERE version = ?`

const quorumProbeVersion = 1

// quorumProbe is serve's health ping (grpcapi.HealthProbe): a LOCAL_QUORUM
// read of one row of schema_migrations, through the stores' own session.
//
// What it proves: a coordinator in the local DC reached a LOCAL_QUORUM of
// the replicas of one partition of orderd's keyspace within the probe's
// timeout. schema_migrations is replicated like the data tables (same
// keyspace, same replication factor), so with RF 3 two replicas must answer:
// with two of three nodes down the probe fails, which is exactly when
// LOCAL_QUORUM writes and LOCAL_SERIAL claims fail. (The old ping read
// system.local at ONE and said SERVING then.)
//
// What it does not prove: it covers one token range. On a cluster with more
// nodes than the replication factor another range can have lost its quorum
// while this one has not, and requests for it fail while health says
// SERVING. It reads: a replica that answers reads but cannot write (disk
// full, commit log failure) passes. And it says nothing of latency under
// load or of paxos contention.
func quorumProbe(s cassandra.Session) func(context.Context) error {
	return func(ctx context.Context) error {
		return s.Query(quorumProbeCQL, quorumProbeVersion).Consistency(gocql.LocalQuorum).ExecContext(ctx)
	}
}

// livenessService is the health service name that says only that the process
// runs and answers: a Kubernetes liveness probe must not fail (and restart
// every pod) because Cassandra is unreachable, which readiness ("") reports.
const livenessService = "liveness"

// healthOnlyServer is serve's optional second listener: plaintext gRPC with
// only the health service, sharing the main server's statuses. Kubernetes'
// native gRPC probes speak neither TLS nor credentials, and the main port may
// require both. It reveals no more than the main port's public health.
type healthOnlyServer struct {
	lis net.Listener
	srv *grpc.Server
}

// healthOnlyLimits bound what the plaintext health port accepts: a probe
// is one small call, and the port may face more than the kubelet (the
// image listens on every address), so it gets no more than a probe needs.
var healthOnlyLimits = []grpc.ServerOption{
	grpc.MaxConcurrentStreams(16),
	grpc.MaxRecvMsgSize(4096),
	grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second}),
	grpc.ConnectionTimeout(5 * time.Second),
}

// healthListener listens on addr ("" disables: nil, which serves nothing)
// and marks the liveness service SERVING.
func healthListener(addr string, h *health.Server) (*healthOnlyServer, error) {
	if addr == "" {
		return nil, nil
	}
	lis, err := listen("health", "health-addr", addr)
	if err != nil {
		return nil, err
	}
	srv := grpc.NewServer(healthOnlyLimits...)
	healthpb.RegisterHealthServer(srv, h)
	h.SetServingStatus(livenessService, healthpb.HealthCheckResponse_SERVING)
	return &healthOnlyServer{lis: lis, srv: srv}, nil
}

func (s *healthOnlyServer) serve(ctx context.Context, g *errgroup.Group, log *slog.Logger) {
	if s == nil {
		return
	}
	g.Go(func() error {
		log.Info("serving health", "health_addr", s.lis.Addr().String())
		if err := s.srv.Serve(s.lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("health server: %w", err)
		}
		return nil
	})
}

// stop closes the listener. serve calls it after the main server drained, so
// that probes read NOT_SERVING (not a refused connection) during the drain.
func (s *healthOnlyServer) stop() {
	if s != nil {
		s.srv.Stop()
	}
}
