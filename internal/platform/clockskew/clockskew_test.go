package clockskew

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/atlasmart/orderd/internal/domain/fault"
)

var t0 = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

// script is a local clock and a cluster clock: each read of the cluster's
// clock takes rtts[i] by the local clock, answered at the midpoint with the
// local time minus lead. The local clock moves on by the reads and by step,
// which sets it (its monotonic clock, mono, moves on by the reads alone).
type script struct {
	local   time.Time
	lead    time.Duration
	rtts    []time.Duration
	fail    []bool
	reads   int
	stepped time.Duration
}

func (s *script) now() time.Time { return s.local }

func (s *script) mono() time.Duration { return s.local.Sub(t0) - s.stepped }

// step sets the local clock d on; the cluster's stays where it is.
func (s *script) step(d time.Duration) {
	s.local, s.lead, s.stepped = s.local.Add(d), s.lead+d, s.stepped+d
}

// wait moves both clocks on by d.
func (s *script) wait(d time.Duration) { s.local = s.local.Add(d) }

func (s *script) cluster(context.Context) (time.Time, error) {
	i := s.reads
	s.reads++
	rtt := s.rtts[i%len(s.rtts)]
	s.local = s.local.Add(rtt / 2)
	theirs := s.local.Add(-s.lead).Truncate(time.Millisecond)
	s.local = s.local.Add(rtt - rtt/2)
	if i < len(s.fail) && s.fail[i] {
		return time.Time{}, errors.New("no host")
	}
	return theirs, nil
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// The estimate keeps the sample with the shortest round trip, and its
// offset is this clock's lead within the uncertainty it states.
func TestMeasureKeepsTheLeastUncertainSample(t *testing.T) {
	for _, lead := range []time.Duration{0, 3 * time.Second, -1500 * time.Millisecond} {
		s := &script{local: t0, lead: lead, rtts: []time.Duration{40 * time.Millisecond, 4 * time.Millisecond, 20 * time.Millisecond}}
		e, err := Measure(context.Background(), s.cluster, s.now)
		if err != nil {
			t.Fatal(err)
		}
		if e.Uncertainty != 3*time.Millisecond {
			t.Errorf("lead %s: uncertainty %s, want the 4 ms sample's 2 ms + 1 ms", lead, e.Uncertainty)
		}
		if d := e.Offset - lead; d > e.Uncertainty || -d > e.Uncertainty {
			t.Errorf("lead %s: offset %s, off by more than its uncertainty %s", lead, e.Offset, e.Uncertainty)
		}
		if s.reads != samples {
			t.Errorf("lead %s: %d reads, want %d", lead, s.reads, samples)
		}
	}
}

// Check refuses before any estimate, passes within the bound, refuses past
// it (the uncertainty counts), and a failed measurement keeps the last
// estimate.
func TestCheck(t *testing.T) {
	s := &script{local: t0, rtts: []time.Duration{2 * time.Millisecond}}
	m := New(Config{Max: time.Second, Now: s.now, Monotonic: s.mono}, s.cluster, discard())
	if err := m.Check(); fault.ReasonOf(err) != fault.ReasonClockSkewed {
		t.Fatalf("Check before any measurement = %v, want CLOCK_SKEWED", err)
	}
	if _, err := m.Measure(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := m.Check(); err != nil {
		t.Fatalf("Check with no skew = %v", err)
	}

	s.lead = 999 * time.Millisecond // within 1 s, but not with the uncertainty
	if _, err := m.Measure(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := m.Check(); fault.ReasonOf(err) != fault.ReasonClockSkewed || fault.KindOf(err) != fault.Unavailable {
		t.Fatalf("Check at a lead of 999 ms ± 2 ms, max 1 s = %v, want CLOCK_SKEWED (Unavailable)", err)
	}

	s.fail = make([]bool, s.reads+samples)
	for i := range s.fail {
		s.fail[i] = true
	}
	s.lead = 0
	if _, err := m.Measure(context.Background()); err == nil {
		t.Fatal("Measure with every read failing = nil")
	}
	if err := m.Check(); fault.ReasonOf(err) != fault.ReasonClockSkewed {
		t.Errorf("Check after a failed measurement = %v, want the last estimate's CLOCK_SKEWED", err)
	}
	s.fail = nil
	if _, err := m.Measure(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := m.Check(); err != nil {
		t.Errorf("Check once the clock is back = %v", err)
	}
}

// A measurement whose round trip was too slow to tell (uncertainty over
// half the bound) is not taken: the last estimate stands, and with none
// yet, claims stay refused rather than trusting a guess.
func TestSlowMeasurementIsNotTaken(t *testing.T) {
	s := &script{local: t0, rtts: []time.Duration{1200 * time.Millisecond}}
	m := New(Config{Max: time.Second, Now: s.now, Monotonic: s.mono}, s.cluster, discard())
	if _, err := m.Measure(context.Background()); err == nil {
		t.Fatal("Measure with 1.2 s round trips and a 1 s bound = nil, want it refused as too uncertain")
	}
	if _, known := m.Last(); known {
		t.Fatal("a too-uncertain estimate was kept")
	}
	if err := m.Check(); fault.ReasonOf(err) != fault.ReasonClockSkewed {
		t.Errorf("Check with no trusted estimate = %v, want CLOCK_SKEWED", err)
	}
	s.rtts = []time.Duration{10 * time.Millisecond}
	if _, err := m.Measure(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.rtts, s.lead = []time.Duration{1200 * time.Millisecond}, 5*time.Second
	if _, err := m.Measure(context.Background()); err == nil {
		t.Fatal("slow Measure = nil")
	}
	if err := m.Check(); err != nil {
		t.Errorf("Check after a slow measurement = %v, want the last trusted estimate's nil", err)
	}
}

// A step of this clock between two measurements is acted on at once: Check
// adds it to the last estimate, however old that is (here every later
// measurement is too slow to be taken, for an hour). A step back to the
// cluster's time, as NTP makes it, is accepted at once too.
func TestCheckSeesAStepBetweenMeasurements(t *testing.T) {
	s := &script{local: t0, rtts: []time.Duration{4 * time.Millisecond}}
	m := New(Config{Max: 2 * time.Second, Now: s.now, Monotonic: s.mono}, s.cluster, discard())
	if _, err := m.Measure(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.wait(5 * time.Second)
	if err := m.Check(); err != nil {
		t.Fatalf("Check 5 s after a good measurement, no step = %v", err)
	}
	for _, d := range []time.Duration{10 * time.Minute, -10 * time.Minute} {
		s.step(d)
		if err := m.Check(); fault.ReasonOf(err) != fault.ReasonClockSkewed {
			t.Errorf("Check right after a step of %s = %v, want CLOCK_SKEWED", d, err)
		}
		s.step(-d)
		if err := m.Check(); err != nil {
			t.Errorf("Check after a step of %s and back = %v, want nil", d, err)
		}
	}
	s.step(10 * time.Minute)
	s.rtts = []time.Duration{3 * time.Second} // too slow to tell: no measurement is taken
	for range 360 {
		s.wait(10 * time.Second)
		_, _ = m.Measure(context.Background())
	}
	if err := m.Check(); fault.ReasonOf(err) != fault.ReasonClockSkewed {
		t.Errorf("Check an hour after a 10 min step, no measurement taken since = %v, want CLOCK_SKEWED", err)
	}
	s.rtts = []time.Duration{4 * time.Millisecond}
	if _, err := m.Measure(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := m.Check(); fault.ReasonOf(err) != fault.ReasonClockSkewed {
		t.Errorf("Check measured 10 min off = %v, want CLOCK_SKEWED", err)
	}
	s.step(-10 * time.Minute) // NTP sets the clock right
	if err := m.Check(); err != nil {
		t.Errorf("Check right after the clock was set right = %v, want nil", err)
	}
}
