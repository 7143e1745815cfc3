package metrics

import (
	"fmt"
	"net/http"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/atlasmart/orderd/internal/adapters/grpcapi"
	"github.com/atlasmart/orderd/internal/adapters/outbox"
	"github.com/atlasmart/orderd/internal/app/workflow"
	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/platform/buildinfo"
	"github.com/atlasmart/orderd/internal/platform/clockskew"
	"github.com/atlasmart/orderd/ledger"
	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

// Namespace prefixes every metric name.
const Namespace = "orderd"

// Buckets, in seconds.
var (
	// grpcBuckets span a replayed answer (~1 ms) to a call that waited out
	// its deadline (default 15 s).
	grpcBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 15, 30}
	// cqlBuckets span a local read (~0.5 ms) to the driver timeout (5 s).
	cqlBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2, 5, 10}
	// retryAgeBuckets span 10 ms to the default retention (7 days), with a
	// bound at half of it (3.5 days) for the alert in docs/operations.md.
	// publishBuckets span a broker acknowledgement (~2 ms with the linger)
	// to the publish timeout (10 s).
	publishBuckets  = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	retryAgeBuckets = []float64{
		.01, .05, .1, .5, 1, 5, 15, 60, 5 * 60, 15 * 60, 3600, 6 * 3600, 24 * 3600,
		2 * 24 * 3600, 3.5 * 24 * 3600, 5 * 24 * 3600, 7 * 24 * 3600,
	}
)

// Metrics holds orderd's metric definitions. The zero value is not usable;
// a nil *Metrics records nothing.
type Metrics struct {
	reg               prometheus.Registerer
	grpcServer        *grpcprom.ServerMetrics // the standard grpc_server_* metrics
	grpcRequests      *prometheus.CounterVec
	grpcDuration      *prometheus.HistogramVec
	createOutcomes    *prometheus.CounterVec
	changeOutcomes    *prometheus.CounterVec
	unknownOutcomes   *prometheus.CounterVec
	cqlDuration       *prometheus.HistogramVec
	retryAge          prometheus.Histogram
	replayCacheHits   prometheus.Counter
	deliveries        *prometheus.CounterVec
	backgroundSkipped prometheus.Counter
	publishDuration   prometheus.Histogram
	authRefused       *prometheus.CounterVec
	tenantRequests    *prometheus.CounterVec
	clockOffset       prometheus.Gauge
	clockError        prometheus.Gauge
	clockMax          prometheus.Gauge
}

var (
	_ workflow.Observer    = (*Metrics)(nil)
	_ outbox.Observer      = (*Metrics)(nil)
	_ grpcapi.AuthObserver = (*Metrics)(nil)
)

// New defines orderd's metrics and registers them, with the Go runtime and
// process collectors and orderd_build_info, on reg.
func New(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		reg: reg,
		// The grpc_server_* metrics every gRPC dashboard and alert knows
		// (go-grpc-middleware's), beside orderd's own grpc_* ones, which
		// the rules and the dashboard here use.
		grpcServer: grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(grpcprom.WithHistogramBuckets(grpcBuckets))),
		grpcRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "grpc_requests_total",
			Help: "gRPC calls handled, by full method and status code.",
		}, []string{"method", "code"}),
		grpcDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "grpc_request_duration_seconds",
			Help:    "Time to answer a gRPC call, by full method and status code.",
			Buckets: grpcBuckets,
		}, []string{"method", "code"}),
		createOutcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "create_outcomes_total",
			Help: "CreateOrder attempts by how the workflow decided them: new, replayed, takeover, conflict, in_progress, failed_request, unavailable, outcome_unknown, invalid, internal.",
		}, []string{"outcome"}),
		changeOutcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "change_outcomes_total",
			Help: "CancelOrder and AmendOrder attempts by operation (CANCEL_ORDER, AMEND_ORDER) and how the workflow decided them: new, replayed, takeover, stale, rejected, not_found, conflict, in_progress, failed_request, unavailable, outcome_unknown, invalid, limited, internal.",
		}, []string{"operation", "outcome"}),
		unknownOutcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "unknown_outcomes_total",
			Help: "Ledger writes whose outcome was unknown, by operation and how a serial read (LOCAL_SERIAL or SERIAL, ORDERD_SERIAL_CONSISTENCY) settled them (applied, not_applied, unsettled).",
		}, []string{"op", "settled"}),
		cqlDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "cql_duration_seconds",
			Help:    "Time of one CQL statement attempt (each page and each driver retry counts), by statement (<verb>_<table>), whether it is a lightweight transaction, and outcome (ok, error).",
			Buckets: cqlBuckets,
		}, []string{"statement", "lwt", "outcome"}),
		retryAge: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "retry_age_seconds",
			Help:    "Age of the first attempt of a request when a later attempt of the same command arrives (from the ledger's created_at). Retries later than the retention re-execute.",
			Buckets: retryAgeBuckets,
		}),
		replayCacheHits: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "replay_cache_hits_total",
			Help: "Duplicate CreateOrder attempts answered from the in-process cache of recorded outcomes, without a ledger read (they also count as replayed in create_outcomes_total).",
		}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "outbox", Name: "deliveries_total",
			Help: "Order events published to Kafka, by result: acked (the broker acknowledged it; its due entry is then released) or failed (not acknowledged: the reconciler publishes it again).",
		}, []string{"result"}),
		backgroundSkipped: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "outbox", Name: "background_skipped_total",
			Help: "Deliveries (and due-entry releases) after the answer not started because as many as workflow.Config.MaxBackground (10,000) were under way: the reconciler does them once their entries fall due.",
		}),
		publishDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: "outbox", Name: "publish_duration_seconds",
			Help:    "Time from handing an order event to the Kafka producer to the broker's acknowledgement (or the failure).",
			Buckets: publishBuckets,
		}),
		authRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "auth", Name: "refused_total",
			Help: "Calls refused before their handler ran, by full method and reason: UNAUTHENTICATED (no credentials, or none that verify) or PERMISSION_DENIED.",
		}, []string{"method", "reason"}),
		tenantRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "tenant_requests_total",
			Help: "Authenticated calls, by the caller's tenant, full method and status code (tenants come from the operator's key file, JWT issuer or CA, never from a request).",
		}, []string{"tenant", "method", "code"}),
		clockOffset: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "clock_skew_seconds",
			Help: "This process's clock minus the cluster's, as last measured (positive: this clock leads).",
		}),
		clockError: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "clock_skew_uncertainty_seconds",
			Help: "How far off orderd_clock_skew_seconds may be (half the measuring read's round trip).",
		}),
		clockMax: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "clock_skew_max_seconds",
			Help: "ORDERD_MAX_CLOCK_SKEW: beyond it (offset and uncertainty together) this process claims nothing and does not reconcile.",
		}),
	}
	cs := []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildinfo.Collector(),
		m.grpcServer, m.grpcRequests, m.grpcDuration, m.createOutcomes, m.changeOutcomes, m.unknownOutcomes, m.cqlDuration, m.retryAge, m.replayCacheHits,
		m.deliveries, m.backgroundSkipped, m.publishDuration, m.authRefused, m.tenantRequests, m.clockOffset, m.clockError, m.clockMax,
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	// Series that alerts rely on exist from the start, at zero, so that an
	// increase is visible from the first event.
	for _, o := range workflow.Outcomes() {
		m.createOutcomes.WithLabelValues(string(o))
		for _, op := range []string{order.OperationCancel, order.OperationAmend} {
			m.changeOutcomes.WithLabelValues(op, string(o))
		}
	}
	for _, r := range []outbox.Result{outbox.ResultAcked, outbox.ResultFailed} {
		m.deliveries.WithLabelValues(string(r))
	}
	for _, r := range []fault.Reason{fault.ReasonUnauthenticated, fault.ReasonPermissionDenied} {
		m.authRefused.WithLabelValues(ordersv1.OrderService_CreateOrder_FullMethodName, string(r))
	}
	for _, op := range []string{"claim"} {
		for _, s := range []ledger.SettleOutcome{ledger.SettledApplied, ledger.SettledNotApplied, ledger.Unsettled} {
			m.unknownOutcomes.WithLabelValues(op, string(s))
		}
	}
	return m, nil
}

// ClockSkew exports max and returns what to tell every measurement of the
// clock against the cluster's (clockskew.Config.OnMeasure).
func (m *Metrics) ClockSkew(max time.Duration) func(clockskew.Estimate) {
	m.clockMax.Set(max.Seconds())
	return func(e clockskew.Estimate) {
		m.clockOffset.Set(e.Offset.Seconds())
		m.clockError.Set(e.Uncertainty.Seconds())
	}
}

// Refused implements grpcapi.AuthObserver.
func (m *Metrics) Refused(method string, reason fault.Reason) {
	if m != nil {
		m.authRefused.WithLabelValues(method, string(reason)).Inc()
	}
}

// Served implements grpcapi.AuthObserver.
func (m *Metrics) Served(tenant, method, code string) {
	if m != nil {
		m.tenantRequests.WithLabelValues(tenant, method, code).Inc()
	}
}

// Handler serves the metrics gathered by g in the Prometheus exposition format.
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{})
}

// CreateOutcome implements workflow.Observer.
func (m *Metrics) CreateOutcome(o workflow.Outcome) {
	if m == nil {
		return
	}
	m.createOutcomes.WithLabelValues(string(o)).Inc()
}

// ChangeOutcome implements workflow.Observer.
func (m *Metrics) ChangeOutcome(operation string, o workflow.Outcome) {
	if m == nil {
		return
	}
	m.changeOutcomes.WithLabelValues(operation, string(o)).Inc()
}

// RetryAge implements workflow.Observer.
func (m *Metrics) RetryAge(age time.Duration) {
	if m == nil {
		return
	}
	m.retryAge.Observe(age.Seconds())
}

// ReplayCached implements workflow.Observer.
func (m *Metrics) ReplayCached() {
	if m == nil {
		return
	}
	m.replayCacheHits.Inc()
}

// BackgroundSkipped implements workflow.Observer.
func (m *Metrics) BackgroundSkipped() {
	if m == nil {
		return
	}
	m.backgroundSkipped.Inc()
}

// UnknownOutcome counts one write whose outcome was unknown, by how it was
// settled; it has the shape of ledger.Config.OnSettle without the cause.
func (m *Metrics) UnknownOutcome(op string, settled ledger.SettleOutcome) {
	if m == nil {
		return
	}
	m.unknownOutcomes.WithLabelValues(op, string(settled)).Inc()
}

// Published implements outbox.Observer.
func (m *Metrics) Published(r outbox.Result, took time.Duration) {
	if m == nil {
		return
	}
	m.deliveries.WithLabelValues(string(r)).Inc()
	m.publishDuration.Observe(took.Seconds())
}
