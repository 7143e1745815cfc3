package leasestest

import (
	"sync"
	"testing"
	"time"

	"github.com/atlasmart/orderd/internal/stores/leases"
)

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

// Now moves on a millisecond with every reading, as a real clock does
// between two statements: a lease write is dated by the clock (its
// acquired_at), and a renewal dated the very millisecond of the
// acquisition could not be told from it by the read that settles it.
func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Millisecond)
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
			Advertising: func(ops ...string) leases.Coordinator { return m.Advertising(ops...) }}
	})
}
