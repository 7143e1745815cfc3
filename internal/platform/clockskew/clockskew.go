// Package clockskew measures how far this process's clock is from the
// cluster's, and says when it is too far to act on time-based decisions.
//
// Every time orderd writes into the due queue it dates the entry by its own
// clock (the claim time, a reschedule), and every reconciler decides by its
// own clock when an entry is due, when a minute may be swept and passed, and
// when a claim it cannot see may be presumed never to land. Those decisions
// are safe only while the claimant's and the reconciler's clocks are close:
// the reconcile grace must exceed the request timeout plus the driver's
// timeout plus the skew of both (cmd/orderd checks that at start). This
// package is what makes "close" a measured fact rather than an assumption:
// a Monitor samples the cluster's clock (toTimestamp(now()) on the node that
// coordinates the read), and Check refuses once the estimated offset, with
// its uncertainty, exceeds the bound.
package clockskew

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
)

// clusterNowCQL reads the clock of the node that coordinates it, to the
// millisecond.
const clusterNowCQL = `/* clock.cluster-now */ SELECT toTimestamp(now()) FROM system.local`

// ClusterClock reads the cluster's clock.
type ClusterClock func(ctx context.Context) (time.Time, error)

// CassandraClock is the ClusterClock of the node that coordinates each read
// on s.
func CassandraClock(s cassandra.Session) ClusterClock {
	return func(ctx context.Context) (time.Time, error) {
		var now time.Time
		if err := s.Query(clusterNowCQL).ScanContext(ctx, &now); err != nil {
			return time.Time{}, cassandra.ReadError("read the cluster's clock", err)
		}
		return now.UTC(), nil
	}
}

// Estimate is one measurement of this clock against the cluster's.
type Estimate struct {
	// Offset is this clock minus the cluster's: positive when this clock
	// leads.
	Offset time.Duration
	// Uncertainty bounds the error of Offset: half the round trip of the
	// read, plus the millisecond the cluster's answer is truncated to.
	Uncertainty time.Duration
	// At is when it was taken, by this clock.
	At time.Time
}

// Bound is the largest skew the estimate allows: |Offset| + Uncertainty.
func (e Estimate) Bound() time.Duration {
	return max(e.Offset, -e.Offset) + e.Uncertainty
}

// samples is how many reads one measurement takes; the one with the
// shortest round trip is kept (the least uncertain).
const samples = 3

// Measure estimates now's offset from the cluster's clock.
func Measure(ctx context.Context, cluster ClusterClock, now func() time.Time) (Estimate, error) {
	var (
		best Estimate
		got  bool
		last error
	)
	for range samples {
		sent := now()
		theirs, err := cluster(ctx)
		back := now()
		if err != nil {
			last = err
			continue
		}
		rtt := back.Sub(sent)
		e := Estimate{
			Offset:      sent.Add(rtt / 2).Sub(theirs),
			Uncertainty: rtt/2 + time.Millisecond,
			At:          back,
		}
		if !got || e.Uncertainty < best.Uncertainty {
			best, got = e, true
		}
	}
	if !got {
		return Estimate{}, fmt.Errorf("measure clock skew: %w", last)
	}
	return best, nil
}

// Config tunes a Monitor.
type Config struct {
	// Max is the largest skew against the cluster's clock at which this
	// process may date due entries and reconcile (ORDERD_MAX_CLOCK_SKEW).
	Max time.Duration
	// Interval is how often the clock is measured again; default 10 s.
	Interval time.Duration
	// Now is this process's clock; default time.Now.
	Now func() time.Time
	// Monotonic is the time elapsed on a clock that nobody sets or steps
	// (default: Go's monotonic clock, from the Monitor's creation). Check
	// compares how far Now moved since the last measurement with how far
	// this moved, so a step of Now between measurements (an operator's
	// date, an NTP step, a VM resumed from a snapshot) is seen at once,
	// not at the next measurement.
	Monotonic func() time.Duration
	// OnMeasure, if set, is told every estimate (for metrics).
	OnMeasure func(Estimate)
}

// Monitor keeps the latest estimate and answers whether the skew is within
// the bound.
type Monitor struct {
	cfg     Config
	cluster ClusterClock
	log     *slog.Logger

	mu    sync.Mutex
	last  Estimate
	known bool
	// wallAt and monoAt are Now (without its monotonic reading) and
	// Monotonic read together when last was kept.
	wallAt  time.Time
	monoAt  time.Duration
	skewed  bool // the last estimate was beyond Max (logged once per change)
	lastErr error
}

// New returns a Monitor of cluster; it measures nothing until Measure or
// Run.
func New(cfg Config, cluster ClusterClock, log *slog.Logger) *Monitor {
	if cfg.Interval <= 0 {
		cfg.Interval = 10 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Monotonic == nil {
		start := time.Now()
		cfg.Monotonic = func() time.Duration { return time.Since(start) }
	}
	return &Monitor{cfg: cfg, cluster: cluster, log: log}
}

// Measure takes one estimate now and keeps it. A failed measurement, or one
// whose uncertainty is over half of Max (a round trip slowed by load says
// nothing of the clocks, and would refuse work on a clock that is fine),
// keeps the previous estimate: a clock does not drift far in a few
// intervals, and a cluster that does not answer stops every write anyway.
func (m *Monitor) Measure(ctx context.Context) (Estimate, error) {
	e, err := Measure(ctx, m.cluster, m.cfg.Now)
	if err == nil && e.Uncertainty > m.cfg.Max/2 {
		err = fmt.Errorf("measure clock skew: the cluster's clock answered too slowly to tell (offset %s ± %s, max %s)", e.Offset, e.Uncertainty, m.cfg.Max)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lastErr = err
	if err != nil {
		return m.last, err
	}
	m.last, m.known = e, true
	m.wallAt, m.monoAt = m.cfg.Now().Round(0), m.cfg.Monotonic()
	if m.cfg.OnMeasure != nil {
		m.cfg.OnMeasure(e)
	}
	if skewed := e.Bound() > m.cfg.Max; skewed != m.skewed {
		m.skewed = skewed
		if skewed {
			m.log.Error("this clock is off from the cluster's by more than the allowed skew: no new claims, no reconciling until it is back",
				"offset", e.Offset.String(), "uncertainty", e.Uncertainty.String(), "max", m.cfg.Max.String())
		} else {
			m.log.Info("this clock is back within the allowed skew of the cluster's",
				"offset", e.Offset.String(), "uncertainty", e.Uncertainty.String(), "max", m.cfg.Max.String())
		}
	}
	return e, nil
}

// retryAfter is how soon a Monitor with no estimate yet measures again.
const retryAfter = time.Second

// Run measures every Interval until ctx ends (every second while it has no
// estimate yet); it returns nil then.
func (m *Monitor) Run(ctx context.Context) error {
	for {
		wait := m.cfg.Interval
		if _, known := m.Last(); !known {
			wait = retryAfter
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		if _, err := m.Measure(ctx); err != nil && ctx.Err() == nil {
			m.log.Warn("could not measure the clock's skew against the cluster's; keeping the last estimate", "error", err)
		}
	}
}

// Last is the latest estimate, false if none was taken yet.
func (m *Monitor) Last() (Estimate, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last, m.known
}

// Check is nil while this clock is within Max of the cluster's, and a
// CLOCK_SKEWED error (kind Unavailable) otherwise, or while no estimate was
// ever taken. The skew is the latest estimate's offset plus how far this
// clock stepped since (Config.Monotonic): a step is acted on from the
// moment it happens, and an estimate, however old, is as good as the
// monotonic clock's rate.
func (m *Monitor) Check() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.known {
		return fault.New(fault.ReasonClockSkewed, fmt.Errorf("the clock's skew against the cluster's is not measured yet: %v", m.lastErr))
	}
	now := m.last
	step := m.cfg.Now().Round(0).Sub(m.wallAt) - (m.cfg.Monotonic() - m.monoAt)
	now.Offset += step
	if b := now.Bound(); b > m.cfg.Max {
		return fault.New(fault.ReasonClockSkewed, fmt.Errorf("this clock is %s off the cluster's (±%s; %s of it a step since it was measured), more than the allowed %s",
			now.Offset, now.Uncertainty, step, m.cfg.Max))
	}
	return nil
}
