package reconcilertest

import (
	"sync"
	"testing"
	"time"
)

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestCoordinatorContractMemory(t *testing.T) {
	RunCoordinator(t, func(t *testing.T) CoordinatorSubject {
		// A start that is not on a second: a TTL counts from the write.
		c := &clock{t: time.Date(2026, 5, 1, 12, 0, 0, 700_000_000, time.UTC)}
		m := NewMemoryCoordinator(c.Now)
		return CoordinatorSubject{Coord: m, Arm: m.Arm, Wait: c.Advance,
			Advertising: func(ops ...string) Coordinator { return m.Advertising(ops...) }}
	})
}
