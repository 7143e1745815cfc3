// Package lograte bounds how many log lines one kind of event writes: a
// flood of one event (an overload's refusals, an outage's unknown outcomes)
// then costs a few lines a second instead of one per event, and the next
// line written says how many were held back. Metrics, not logs, are where
// every event is counted.
package lograte

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Default allowance of each kind: a steady rate with a burst.
const (
	LinesPerSecond = 10
	Burst          = 20
)

// Sampler decides, per kind K (keep the set of kinds bounded: a code and a
// reason, an operation and an outcome), which events are logged.
type Sampler[K comparable] struct {
	now   func() time.Time
	mu    sync.Mutex
	kinds map[K]*allowance
}

type allowance struct {
	lines *rate.Limiter
	held  int64 // events not logged since the last line of this kind
}

// New returns a Sampler giving each kind LinesPerSecond lines a second with
// bursts of Burst, on the clock now (time.Now if nil).
func New[K comparable](now func() time.Time) *Sampler[K] {
	if now == nil {
		now = time.Now
	}
	return &Sampler[K]{now: now, kinds: map[K]*allowance{}}
}

// admit reports whether an event of kind k is logged, and if so how many of
// its kind were held back since the last one logged (log it as
// "suppressed" when positive).
func (s *Sampler[K]) admit(k K) (ok bool, held int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.kinds[k]
	if a == nil {
		a = &allowance{lines: rate.NewLimiter(LinesPerSecond, Burst)}
		s.kinds[k] = a
	}
	if !a.lines.AllowN(s.now(), 1) {
		a.held++
		return false, 0
	}
	held, a.held = a.held, 0
	return true, held
}

// Log writes msg at level unless kind k used up its allowance; the first
// line after a held-back run carries "suppressed", how many were not
// written. While level is disabled nothing is written, so nothing counts
// as held back.
func (s *Sampler[K]) Log(ctx context.Context, log *slog.Logger, level slog.Level, k K, msg string, attrs ...slog.Attr) {
	if !log.Enabled(ctx, level) {
		return
	}
	ok, held := s.admit(k)
	if !ok {
		return
	}
	if held > 0 {
		attrs = append(attrs, slog.Int64("suppressed", held))
	}
	log.LogAttrs(ctx, level, msg, attrs...)
}
