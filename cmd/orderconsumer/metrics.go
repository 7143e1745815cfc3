package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the consumer's Prometheus series (namespace orderconsumer).
type metrics struct {
	events       *prometheus.CounterVec
	lag          prometheus.Histogram
	commitErrors prometheus.Counter
	pollsCut     prometheus.Counter
}

// newMetrics registers the consumer's series, and the Go runtime's and the
// process's, on reg.
func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "orderconsumer", Name: "events_total",
			Help: "Records handled, by result: applied (first time), duplicate (event id seen before), " +
				"stale (first time, but an equal or newer order version was stored), undecodable (skipped).",
		}, []string{"result"}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "orderconsumer", Name: "apply_lag_seconds",
			Help:    "Time from an event's occurred_at to its first application (applied results only).",
			Buckets: prometheus.ExponentialBucketsRange(0.005, 3600, 16),
		}),
		commitErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "orderconsumer", Name: "commit_errors_total",
			Help: "Offset commits that failed; their records are delivered again and found in the inbox.",
		}),
		pollsCut: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "orderconsumer", Name: "polls_cut_total",
			Help: "Polls stopped part way for a waiting rebalance; their records not yet applied are fetched again.",
		}),
	}
	reg.MustRegister(m.events, m.lag, m.commitErrors, m.pollsCut,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Every result is exported from the start, so a rate over it never
	// begins with a missing series.
	for _, o := range []outcome{applied, duplicate, stale, undecodable} {
		m.events.WithLabelValues(string(o))
	}
	return m
}

// serveMetrics serves /metrics on addr until ctx ends. An address it cannot
// listen on is an error, which stops the consumer too (run's errgroup):
// a consumer nobody can watch should not run unnoticed.
func serveMetrics(ctx context.Context, addr string, reg *prometheus.Registry, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("serving metrics", "addr", ln.Addr().String())

	select {
	case err := <-served:
		return fmt.Errorf("metrics server: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("metrics server shutdown: %w", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("metrics server: %w", err)
	}
	return nil
}
