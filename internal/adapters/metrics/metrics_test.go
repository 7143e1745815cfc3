package metrics

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/atlasmart/orderd/internal/app/workflow"
	"github.com/atlasmart/orderd/ledger"
	"github.com/atlasmart/orderd/reconciler"
)

func newMetrics(t *testing.T) (*Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}

func TestInterceptorCountsByMethodAndCode(t *testing.T) {
	m, _ := newMetrics(t)
	icpt := m.UnaryServerInterceptor()
	create := &grpc.UnaryServerInfo{FullMethod: "/atlasmart.orders.v1.OrderService/CreateOrder"}
	ok := func(context.Context, any) (any, error) { return "ok", nil }
	reused := func(context.Context, any) (any, error) {
		return nil, status.Error(codes.FailedPrecondition, "request_id reused")
	}
	late := func(context.Context, any) (any, error) { return nil, context.DeadlineExceeded }

	for _, h := range []grpc.UnaryHandler{ok, ok, reused, late} {
		_, _ = icpt(context.Background(), nil, create, h)
	}
	for code, want := range map[string]float64{"OK": 2, "FailedPrecondition": 1, "DeadlineExceeded": 1, "Unavailable": 0} {
		if got := testutil.ToFloat64(m.grpcRequests.WithLabelValues(create.FullMethod, code)); got != want {
			t.Errorf("requests{code=%s} = %v, want %v", code, got, want)
		}
	}
	if n := testutil.CollectAndCount(m.grpcDuration, "orderd_grpc_request_duration_seconds"); n != 3 {
		t.Errorf("%d duration series, want 3 (OK, FailedPrecondition, DeadlineExceeded)", n)
	}
	if got := histogramCount(t, m.grpcDuration.WithLabelValues(create.FullMethod, "OK").(prometheus.Histogram)); got != 2 {
		t.Errorf("duration{code=OK} has %d observations, want 2", got)
	}
}

func TestNilMetricsRecordNothing(t *testing.T) {
	var m *Metrics
	m.CreateOutcome(workflow.OutcomeNew)
	m.RetryAge(time.Second)
	m.UnknownOutcome("claim", ledger.Unsettled)
	if err := m.RegisterReconciler(func() reconciler.Stats { return reconciler.Stats{} }); err != nil {
		t.Error(err)
	}
	resp, err := m.UnaryServerInterceptor()(context.Background(), "req", &grpc.UnaryServerInfo{FullMethod: "/x/Y"},
		func(_ context.Context, req any) (any, error) { return req, nil })
	if resp != "req" || err != nil {
		t.Errorf("interceptor on nil metrics = %v, %v", resp, err)
	}
}

func TestOutcomesAndUnknownOutcomes(t *testing.T) {
	m, _ := newMetrics(t)
	var obs workflow.Observer = m
	obs.CreateOutcome(workflow.OutcomeNew)
	obs.CreateOutcome(workflow.OutcomeReplayed)
	obs.CreateOutcome(workflow.OutcomeReplayed)
	obs.RetryAge(90 * time.Second)
	m.UnknownOutcome("claim", ledger.SettledApplied)

	for o, want := range map[workflow.Outcome]float64{workflow.OutcomeNew: 1, workflow.OutcomeReplayed: 2, workflow.OutcomeConflict: 0} {
		if got := testutil.ToFloat64(m.createOutcomes.WithLabelValues(string(o))); got != want {
			t.Errorf("outcomes{outcome=%s} = %v, want %v", o, got, want)
		}
	}
	// Every outcome and settlement exists from the start.
	if n := testutil.CollectAndCount(m.createOutcomes); n != len(workflow.Outcomes()) {
		t.Errorf("%d outcome series, want %d", n, len(workflow.Outcomes()))
	}
	if n := testutil.CollectAndCount(m.unknownOutcomes); n != 3 {
		t.Errorf("%d unknown-outcome series, want 3 (the claim's)", n)
	}
	if got := testutil.ToFloat64(m.unknownOutcomes.WithLabelValues("claim", "applied")); got != 1 {
		t.Errorf("unknown_outcomes{claim,applied} = %v, want 1", got)
	}
	if got := histogramCount(t, m.retryAge); got != 1 {
		t.Errorf("retry age observations = %d, want 1", got)
	}
}

func TestReconcilerStatsAreExported(t *testing.T) {
	m, reg := newMetrics(t)
	stats := reconciler.Stats{Finished: 3, Retried: 2, Stuck: 6, DeadLettered: 1, Dropped: 7, Passes: 40, PassErrors: 4,
		Pending: 5, OldestPending: 90 * time.Second, OwnedShards: 8, MinutesPassed: 11, CursorLag: 150 * time.Second, LostLeases: 9}
	if err := m.RegisterReconciler(func() reconciler.Stats { return stats }); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP orderd_reconciler_dead_lettered_total Requests moved to FAILED because their stored command cannot be read (nothing was written).
# TYPE orderd_reconciler_dead_lettered_total counter
orderd_reconciler_dead_lettered_total 1
# HELP orderd_reconciler_oldest_pending_age_seconds Age of the oldest of the pending requests (0 if none).
# TYPE orderd_reconciler_oldest_pending_age_seconds gauge
orderd_reconciler_oldest_pending_age_seconds 90
# HELP orderd_reconciler_owned_shards Due-queue shards whose lease this instance holds (all instances together should hold all 16).
# TYPE orderd_reconciler_owned_shards gauge
orderd_reconciler_owned_shards 8
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"orderd_reconciler_dead_lettered_total", "orderd_reconciler_oldest_pending_age_seconds", "orderd_reconciler_owned_shards"); err != nil {
		t.Error(err)
	}
	for name, v := range map[string]float64{
		"orderd_reconciler_finished_total": 3, "orderd_reconciler_retried_total": 2, "orderd_reconciler_stuck_attempts_total": 6, "orderd_reconciler_dropped_entries_total": 7,
		"orderd_reconciler_passes_total": 40, "orderd_reconciler_pass_errors_total": 4, "orderd_reconciler_pending_requests": 5,
		"orderd_reconciler_due_buckets_passed_total": 11, "orderd_reconciler_cursor_lag_seconds": 150,
		"orderd_reconciler_lost_leases_total": 9,
	} {
		if got := gathered(t, reg, name); got != v {
			t.Errorf("%s = %v, want %v", name, got, v)
		}
	}
	if err := m.RegisterReconciler(func() reconciler.Stats { return stats }); err == nil {
		t.Error("registering a second reconciler succeeded; want an error")
	}
}

func TestHandlerServesTheRegistry(t *testing.T) {
	m, reg := newMetrics(t)
	m.CreateOutcome(workflow.OutcomeNew)
	rec := httptest.NewRecorder()
	Handler(reg).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{`orderd_create_outcomes_total{outcome="new"} 1`, "go_goroutines", "process_cpu_seconds_total"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func gathered(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		m := mf.GetMetric()[0]
		if c := m.GetCounter(); c != nil {
			return c.GetValue()
		}
		return m.GetGauge().GetValue()
	}
	t.Fatalf("%s not gathered", name)
	return 0
}
