package workflow

import (
	"context"
	"sync"
	"time"

	"github.com/atlasmart/orderd/ledger"
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

// settleErr is Settle's error alone, for the tests that judge a
// settlement by its error (its result is tested in delivery_test.go).
func settleErr(s *Service, rec ledger.Record) error {
	_, err := s.Settle(context.Background(), rec)
	return err
}
