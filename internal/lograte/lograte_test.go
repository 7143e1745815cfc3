package lograte

import (
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
		if ok, held := s.Admit("a"); ok {
			logged++
			if held != 0 {
				t.Fatalf("a line within the burst reports %d held back", held)
			}
		}
	}
	if logged != Burst {
		t.Fatalf("%d of 100 events logged at once, want the burst %d", logged, Burst)
	}
	if ok, _ := s.Admit("b"); !ok {
		t.Error("another kind was held back by the first kind's flood")
	}
	now = now.Add(time.Second / LinesPerSecond) // one line's worth of time
	ok, held := s.Admit("a")
	if !ok || held != 100-Burst {
		t.Errorf("after a line's worth of time: logged %v, held %d; want the line, reporting %d", ok, held, 100-Burst)
	}
	if ok, _ := s.Admit("a"); ok {
		t.Error("a second line within the same tenth of a second, want it held back")
	}
}

// Admit is safe from many goroutines, and every event is either logged or
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
				if ok, h := s.Admit(1); ok {
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
	_, last := s.Admit(1) // the line that reports the rest
	if logged+held+last != 4000 {
		t.Errorf("logged %d + reported held %d + %d = %d, want 4000", logged, held, last, logged+held+last)
	}
}
