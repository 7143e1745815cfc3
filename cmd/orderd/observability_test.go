package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/atlasmart/orderd/internal/adapters/metrics"
	"github.com/atlasmart/orderd/internal/platform/lograte"
	"github.com/atlasmart/orderd/ledger"
)

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestMetricsServedAndStopped(t *testing.T) {
	cfg := &config{metricsAddr: "127.0.0.1:0", tracing: "off"}
	obs, err := newObservability(context.Background(), cfg, discard())
	if err != nil {
		t.Fatal(err)
	}
	defer obs.shutdown(discard())
	if obs.metrics == nil || obs.tp != nil {
		t.Fatalf("metrics %v, tracer provider %v; want metrics only", obs.metrics, obs.tp)
	}
	ctx, cancel := context.WithCancel(context.Background())
	g, gctx := errgroup.WithContext(ctx)
	obs.serveMetrics(gctx, g, discard())

	resp, err := http.Get("http://" + obs.lis.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `orderd_create_outcomes_total{outcome="new"} 0`) {
		t.Errorf("/metrics lacks the outcome counters:\n%s", body)
	}

	cancel()
	done := make(chan error)
	go func() { done <- g.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("metrics server: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("metrics server did not stop")
	}
}

// A metrics listener that fails after the start (here: closed under the
// server) ends the serving group with an error naming the metrics server,
// so orderd exits rather than serving on without its metrics.
func TestMetricsListenerFailureEndsTheGroup(t *testing.T) {
	obs, err := newObservability(context.Background(), &config{metricsAddr: "127.0.0.1:0", tracing: "off"}, discard())
	if err != nil {
		t.Fatal(err)
	}
	defer obs.shutdown(discard())
	obs.lis.Close()
	g, gctx := errgroup.WithContext(context.Background())
	obs.serveMetrics(gctx, g, discard())

	done := make(chan error)
	go func() { done <- g.Wait() }()
	select {
	case err := <-done:
		if err == nil || !strings.HasPrefix(err.Error(), "metrics server: ") || !errors.Is(err, net.ErrClosed) {
			t.Errorf("group ended with %v; want metrics server: ... %v", err, net.ErrClosed)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the group did not end when the metrics listener failed")
	}
}

func TestMetricsAddressTaken(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()

	// The default address: run without metrics.
	obs, err := newObservability(context.Background(), &config{metricsAddr: taken.Addr().String()}, discard())
	if err != nil {
		t.Fatalf("default address taken: %v; want metrics off and no error", err)
	}
	if obs.lis != nil || obs.metrics != nil {
		t.Error("metrics on although the default address is taken")
	}
	// An address asked for: fail.
	_, err = newObservability(context.Background(), &config{metricsAddr: taken.Addr().String(), metricsAddrExplicit: true}, discard())
	if want := "listen for metrics on " + taken.Addr().String() + " (metrics-addr, ORDERD_METRICS_ADDR): bind: address already in use"; err == nil || err.Error() != want {
		t.Errorf("explicit address taken: error %v, want %q", err, want)
	}
	// Empty: off.
	obs, err = newObservability(context.Background(), &config{metricsAddrExplicit: true}, discard())
	if err != nil || obs.lis != nil || obs.metrics != nil {
		t.Errorf("empty address: %v, listener %v; want metrics off", err, obs.lis)
	}
	if obs.cqlObserver() != nil {
		t.Error("a CQL observer with metrics and tracing off")
	}
}

func TestTracingModes(t *testing.T) {
	for _, mode := range []string{"", "off"} {
		tp, err := newTracerProvider(context.Background(), mode)
		if tp != nil || err != nil {
			t.Errorf("tracing %q: %v, %v; want nothing", mode, tp, err)
		}
	}
	tp, err := newTracerProvider(context.Background(), "stdout")
	if tp == nil || err != nil {
		t.Fatalf("tracing stdout: %v, %v", tp, err)
	}
	obs := &observability{tp: tp}
	if obs.cqlObserver() == nil {
		t.Error("no CQL observer with tracing on")
	}
	if n := len(obs.grpcOptions(deadlineInterceptor(time.Second))); n != 3 {
		t.Errorf("%d gRPC server options with tracing, want 3 (unary and stream interceptors, stats handler)", n)
	}
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
	if err := (&config{tracing: "jaeger", contactPointsCSV: "h"}).validate("reconcile"); err == nil {
		t.Error("tracing=jaeger accepted")
	}
}

// A storm of unknown outcomes (Paxos contention) is counted in full in
// orderd_unknown_outcomes_total but logged at a bounded rate per
// (op, outcome), and another op keeps its own allowance.
func TestUnknownOutcomeStormIsCountedInFullAndLoggedAtABoundedRate(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	onSettle := settleLogger(log, "LOCAL_SERIAL", m)
	cause := errors.New("CAS operation timed out")
	for range 200 {
		onSettle("claim", ledger.SettledApplied, cause)
	}
	onSettle("complete", ledger.SettledApplied, cause)

	lines := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		lines[rec["op"].(string)]++
	}
	// At most the burst, plus a line or two for the time the loop took.
	if n := lines["claim"]; n < lograte.Burst || n > lograte.Burst+2 {
		t.Errorf("%d lines for 200 unknown claim outcomes, want about the burst (%d)", n, lograte.Burst)
	}
	if lines["complete"] != 1 {
		t.Errorf("%d lines for the other op, want 1", lines["complete"])
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var counted float64
	for _, mf := range mfs {
		if mf.GetName() != "orderd_unknown_outcomes_total" {
			continue
		}
		for _, s := range mf.GetMetric() {
			for _, lp := range s.GetLabel() {
				if lp.GetName() == "op" && lp.GetValue() == "claim" {
					counted += s.GetCounter().GetValue()
				}
			}
		}
	}
	if counted != 200 {
		t.Errorf("orderd_unknown_outcomes_total{op=claim} = %v, want 200 (every event counted)", counted)
	}
}
