package workflow

import (
	"sync"
	"time"
)

// The ledger the tests run on is ledgertest.Memory: it passes the same
// contract suite as the real store (ledger/memory_test.go,
// e2e/contract_ledger_test.go).

// fakeClock is a settable clock safe for concurrent use.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
