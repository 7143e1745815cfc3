package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"syscall"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc/filters"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	"github.com/atlasmart/orderd/internal/adapters/metrics"
	"github.com/atlasmart/orderd/internal/platform/lograte"
	"github.com/atlasmart/orderd/internal/platform/tracing"
	"github.com/atlasmart/orderd/ledger"
)

// observability is what a serving process exports: Prometheus metrics on
// their own listener and, for serve, OpenTelemetry traces. Every part is
// nil when off, and everything that takes one treats nil as "record
// nothing".
type observability struct {
	reg     *prometheus.Registry
	metrics *metrics.Metrics
	lis     net.Listener             // the /metrics listener
	tp      *sdktrace.TracerProvider // nil unless tracing is on
	pprof   bool                     // serve /debug/pprof/ beside /metrics
}

// newObservability binds the metrics listener (so a taken port fails the
// start, not the first scrape) and sets up the tracer provider when
// tracing is on. The caller must call shutdown.
func newObservability(ctx context.Context, cfg *config, log *slog.Logger) (*observability, error) {
	o := &observability{pprof: cfg.pprof}
	if cfg.metricsAddr != "" {
		lis, err := listen("metrics", "metrics-addr", cfg.metricsAddr)
		switch {
		case err == nil:
			o.lis = lis
		case !cfg.metricsAddrExplicit && errors.Is(err, syscall.EADDRINUSE):
			// The default address is per host, and several orderd processes
			// may share one (tests, serve beside reconcile): such a process
			// runs without metrics rather than not at all. An address that
			// was asked for must work.
			log.Warn("metrics not exported: the default metrics address is taken; set ORDERD_METRICS_ADDR (empty disables)",
				"metrics_addr", cfg.metricsAddr, "error", err)
		default:
			return nil, err
		}
	}
	if o.lis != nil {
		o.reg = prometheus.NewRegistry()
		m, err := metrics.New(o.reg)
		if err != nil {
			o.lis.Close()
			return nil, err
		}
		o.metrics = m
	}
	tp, err := newTracerProvider(ctx, cfg.tracing)
	if err != nil {
		if o.lis != nil {
			o.lis.Close()
		}
		return nil, err
	}
	o.tp = tp
	if tp != nil {
		log.Info("tracing on", "exporter", cfg.tracing)
	}
	return o, nil
}

// newTracerProvider returns the tracer provider for mode, or nil for off
// (tracing.NewProvider: the OTEL_* variables it reads).
func newTracerProvider(ctx context.Context, mode string) (*sdktrace.TracerProvider, error) {
	return tracing.NewProvider(ctx, mode, "orderd")
}

// tracer is the tracer provider, or nil when tracing is off (never a nil
// pointer in a non-nil interface).
func (o *observability) tracer() trace.TracerProvider {
	if o == nil || o.tp == nil {
		return nil
	}
	return o.tp
}

// cqlObserver is the session's QueryObserver, or nil when nothing is observed.
func (o *observability) cqlObserver() gocql.QueryObserver {
	if o == nil {
		return nil
	}
	if o.tp == nil {
		return metrics.NewCQLObserver(o.metrics, nil)
	}
	return metrics.NewCQLObserver(o.metrics, o.tp.Tracer(metrics.TracerName))
}

// grpcOptions are the gRPC server's interceptors and, with tracing, its
// stats handler: the metrics interceptor outermost (it sees every answer),
// then inner in order.
func (o *observability) grpcOptions(inner ...grpc.UnaryServerInterceptor) []grpc.ServerOption {
	opts := []grpc.ServerOption{grpc.ChainUnaryInterceptor(append([]grpc.UnaryServerInterceptor{o.metrics.UnaryServerInterceptor()}, inner...)...),
		grpc.ChainStreamInterceptor(o.metrics.StreamServerInterceptor())}
	if o.tp != nil {
		opts = append(opts, grpc.StatsHandler(otelgrpc.NewServerHandler(
			otelgrpc.WithTracerProvider(o.tp),
			otelgrpc.WithPropagators(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})),
			otelgrpc.WithFilter(filters.Not(filters.HealthCheck())),
		)))
	}
	return opts
}

// serveMetrics serves /metrics in g until ctx ends, then stops the server.
func (o *observability) serveMetrics(ctx context.Context, g *errgroup.Group, log *slog.Logger) {
	if o.lis == nil {
		return
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics.Handler(o.reg))
	if o.pprof {
		// Profiles on the metrics listener only, and only when asked for:
		// they show code paths and take CPU while they run.
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		log.Info("serving profiles", "path", "/debug/pprof/")
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	g.Go(func() error {
		log.Info("serving metrics", "metrics_addr", o.lis.Addr().String())
		if err := srv.Serve(o.lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("metrics server: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			log.Warn("metrics server did not stop in time; closing it", "error", err)
			_ = srv.Close()
		}
		return nil
	})
}

// shutdown flushes the spans not yet exported and closes a listener that
// was never served.
func (o *observability) shutdown(log *slog.Logger) {
	if o.tp != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := o.tp.Shutdown(ctx); err != nil {
			log.Warn("could not flush traces", "error", err)
		}
	}
	if o.lis != nil {
		_ = o.lis.Close() // already closed if it was served
	}
}

// settleKind is what the unknown-outcome lines are rate-limited by.
type settleKind struct {
	op      string
	outcome ledger.SettleOutcome
}

// settleLogger is the ledger's OnSettle: every write whose outcome was
// unknown is counted in m (nil for none), and logged at WARN at a bounded
// rate per (op, outcome) — under Paxos contention they come by the dozen a
// second, and the line after a held-back run says how many were not
// written ("suppressed").
func settleLogger(log *slog.Logger, serial string, m *metrics.Metrics) func(string, ledger.SettleOutcome, error) {
	lines := lograte.New[settleKind](nil)
	return func(op string, outcome ledger.SettleOutcome, cause error) {
		m.UnknownOutcome(op, outcome)
		lines.Log(context.Background(), log, slog.LevelWarn, settleKind{op, outcome},
			"write outcome was unknown; settled by a serial read (ORDERD_SERIAL_CONSISTENCY)",
			slog.String("op", op), slog.String("settled", string(outcome)), slog.Any("cause", cause), slog.String("serial", serial))
	}
}
