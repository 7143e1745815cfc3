package lograte

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// One kind gets its burst, then LinesPerSecond a second; the line after a
// held-back run reports the run's length; kinds do not share allowances.
func TestSamplerBoundsEachKindAndCountsWhatItHeldBack(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s := New[string](func() time.Time { return now })
	logged := 0
	for range 100 {
		if ok, held := s.admit("a"); ok {
			logged++
			if held != 0 {
				t.Fatalf("a line within the burst reports %d held back", held)
			}
		}
	}
	if logged != Burst {
		t.Fatalf("%d of 100 events logged at once, want the burst %d", logged, Burst)
	}
	if ok, _ := s.admit("b"); !ok {
		t.Error("another kind was held back by the first kind's flood")
	}
	now = now.Add(time.Second / LinesPerSecond) // one line's worth of time
	ok, held := s.admit("a")
	if !ok || held != 100-Burst {
		t.Errorf("after a line's worth of time: logged %v, held %d; want the line, reporting %d", ok, held, 100-Burst)
	}
	if ok, _ := s.admit("a"); ok {
		t.Error("a second line within the same tenth of a second, want it held back")
	}
}

// admit is safe from many goroutines, and every event is either logged or
// counted in a later line's held.
func TestSamplerCountsEveryEventUnderConcurrency(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var clock sync.Mutex
	s := New[int](func() time.Time { clock.Lock(); defer clock.Unlock(); return now })
	var mu sync.Mutex
	var logged, held int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 500 {
				if ok, h := s.admit(1); ok {
					mu.Lock()
					logged, held = logged+1, held+h
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	clock.Lock()
	now = now.Add(time.Hour)
	clock.Unlock()
	_, last := s.admit(1) // the line that reports the rest
	if logged+held+last != 4000 {
		t.Errorf("logged %d + reported held %d + %d = %d, want 4000", logged, held, last, logged+held+last)
	}
}

// Log writes through the sampler and adds "suppressed" to the line after a
// held-back run; at a disabled level it writes nothing and holds nothing
// back, so a later line does not report events that were never to be logged.
func TestLogAddsSuppressedAndIgnoresDisabledLevels(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s := New[string](func() time.Time { return now })
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx := context.Background()
	for range 1000 {
		s.Log(ctx, log, slog.LevelInfo, "k", "quiet") // below the handler's level
	}
	for range Burst + 5 {
		s.Log(ctx, log, slog.LevelWarn, "k", "loud", slog.String("a", "b"))
	}
	now = now.Add(time.Second)
	s.Log(ctx, log, slog.LevelWarn, "k", "loud")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != Burst+1 {
		t.Fatalf("%d lines, want %d", len(lines), Burst+1)
	}
	if strings.Contains(buf.String(), "quiet") || strings.Contains(lines[0], "suppressed") {
		t.Errorf("first line %s: want no disabled-level line and nothing suppressed before it", lines[0])
	}
	var last map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil {
		t.Fatal(err)
	}
	if last["suppressed"] != float64(5) {
		t.Errorf("last line %v: want suppressed 5 (the held-back loud ones only)", last)
	}
}
