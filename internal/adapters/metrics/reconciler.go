package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/atlasmart/orderd/reconciler"
)

// RegisterReconciler exports a reconciler's counters and gauges, read from
// stats at every scrape (so the loop itself knows nothing of Prometheus).
// Call it once per process; on a nil *Metrics it does nothing.
func (m *Metrics) RegisterReconciler(stats func() reconciler.Stats) error {
	if m == nil {
		return nil
	}
	counter := func(name, help string, f func(reconciler.Stats) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "reconciler", Name: name, Help: help},
			func() float64 { return float64(f(stats())) })
	}
	gaugeIn := func(subsystem string) func(name, help string, f func(reconciler.Stats) float64) prometheus.Collector {
		return func(name, help string, f func(reconciler.Stats) float64) prometheus.Collector {
			return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help},
				func() float64 { return f(stats()) })
		}
	}
	// The outbox's backlog is found by the reconciler's passes, but it is
	// the outbox's state: its gauges carry that subsystem.
	gauge, outboxGauge := gaugeIn("reconciler"), gaugeIn("outbox")
	cs := []prometheus.Collector{
		gauge("pending_requests", "PENDING requests of this instance's shards that a pass found due and left unfinished (each is looked at again when its entry falls due; a shard just taken counts its own within a backoff maximum).",
			func(s reconciler.Stats) float64 { return float64(s.Pending) }),
		gauge("oldest_pending_age_seconds", "Age of the oldest of the pending requests (0 if none).",
			func(s reconciler.Stats) float64 { return s.OldestPending.Seconds() }),
		gauge("owned_shards", "Due-queue shards whose lease this instance holds (all instances together should hold all 16).",
			func(s reconciler.Stats) float64 { return float64(s.OwnedShards) }),
		counter("finished_total", "Requests this instance completed.",
			func(s reconciler.Stats) int64 { return s.Finished }),
		counter("retried_total", "Failed attempts rescheduled with backoff.",
			func(s reconciler.Stats) int64 { return s.Retried }),
		counter("stuck_attempts_total", "Failed attempts of requests already past the maximum attempts (still retried: alert on it).",
			func(s reconciler.Stats) int64 { return s.Stuck }),
		counter("dead_lettered_total", "Requests moved to FAILED because their stored command cannot be read (nothing was written).",
			func(s reconciler.Stats) int64 { return s.DeadLettered }),
		counter("dropped_entries_total", "Due-queue entries removed because their request was settled, gone or claimed by another attempt.",
			func(s reconciler.Stats) int64 { return s.Dropped }),
		// Not "minutes_passed_total": promlint reads "minutes" as a unit
		// that should be seconds, and this counts partitions, not time.
		counter("due_buckets_passed_total", "Due-queue buckets (one shard's minute, one partition) this instance's cursors passed and deleted.",
			func(s reconciler.Stats) int64 { return s.MinutesPassed }),
		gauge("cursor_lag_seconds", "How far behind now the oldest due-queue cursor of this instance's shards was after its last pass: normally the margin plus a minute or two; growing, a minute holds an entry that cannot be settled.",
			func(s reconciler.Stats) float64 { return s.CursorLag.Seconds() }),
		outboxGauge("backlog", "Orders of this instance's shards that a reconciler pass found due and whose event the broker has not acknowledged since (orders younger than the reconcile grace are not counted yet).",
			func(s reconciler.Stats) float64 { return float64(s.Undelivered) }),
		outboxGauge("oldest_undelivered_age_seconds", "Age of the oldest order in the backlog (0 if none).",
			func(s reconciler.Stats) float64 { return s.OldestUndelivered.Seconds() }),
		outboxGauge("parked", "Orders in the backlog past the reconciler's maximum attempts: retried every backoff maximum until the broker takes them; `orderd requeue` retries one now.",
			func(s reconciler.Stats) float64 { return float64(s.Parked) }),
		counter("clock_skipped_total", "Passes and coordinations skipped because this instance's clock was too far from the cluster's (ORDERD_MAX_CLOCK_SKEW): it holds no shard meanwhile.",
			func(s reconciler.Stats) int64 { return s.ClockSkipped }),
		counter("unknown_operation_total", "Due entries left alone because their request's operation is a newer release's (a fleet of mixed releases); each is looked at again every backoff maximum.",
			func(s reconciler.Stats) int64 { return s.UnknownOperation }),
		counter("lost_leases_total", "Shard leases this instance lost while it meant to keep them (a renewal that did not apply, or none that applied within the lease TTL); its passes stop starting work on such a shard at once.",
			func(s reconciler.Stats) int64 { return s.LostLeases }),
		counter("passes_total", "Reconciler passes run.",
			func(s reconciler.Stats) int64 { return s.Passes }),
		counter("pass_errors_total", "Reconciler passes that ended with an error.",
			func(s reconciler.Stats) int64 { return s.PassErrors }),
	}
	for _, c := range cs {
		if err := m.reg.Register(c); err != nil {
			return fmt.Errorf("register reconciler metrics: %w", err)
		}
	}
	return nil
}
