// Package limit holds per-tenant rate limits: one tenant's
// flood must not take the cluster from the others. Three budgets per
// tenant: write attempts that reach the database (a new request or change,
// or a duplicate the replay cache cannot answer), replays answered from the
// cache, which cost no database work but still cost the process (a
// pathological retry loop hits this one), and reads (GetOrder, GetRequest,
// a call of a listing).
package limit

import (
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/atlasmart/orderd/internal/domain/fault"
)

// Config sets the per-tenant rates, in calls per second; each bucket
// holds one second's worth (at least 1). Zero: unlimited.
type Config struct {
	Attempts float64
	Replays  float64
	Reads    float64
	// Now is the limits' clock; default time.Now.
	Now func() time.Time
}

// Tenants keeps a limiter per tenant and budget, made on first use.
// Tenants are configured identities, never client input, so the map stays
// as small as their number.
type Tenants struct {
	cfg Config
	now func() time.Time

	mu       sync.Mutex
	attempts map[string]*rate.Limiter
	replays  map[string]*rate.Limiter
	reads    map[string]*rate.Limiter
}

// New returns per-tenant limits.
func New(cfg Config) *Tenants {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Tenants{cfg: cfg, now: cfg.Now, attempts: map[string]*rate.Limiter{}, replays: map[string]*rate.Limiter{},
		reads: map[string]*rate.Limiter{}}
}

// Attempt admits one call of tenant that will reach the database, or
// returns RATE_LIMITED with how long to wait.
func (t *Tenants) Attempt(tenant string) error { return t.admit(t.attempts, t.cfg.Attempts, tenant) }

// Read admits one read of tenant, as Attempt does.
func (t *Tenants) Read(tenant string) error { return t.admit(t.reads, t.cfg.Reads, tenant) }

// Replay admits one duplicate of tenant answered from the replay cache.
func (t *Tenants) Replay(tenant string) error { return t.admit(t.replays, t.cfg.Replays, tenant) }

func (t *Tenants) admit(limiters map[string]*rate.Limiter, perSecond float64, tenant string) error {
	if perSecond <= 0 {
		return nil
	}
	t.mu.Lock()
	l, ok := limiters[tenant]
	if !ok {
		l = rate.NewLimiter(rate.Limit(perSecond), max(1, int(perSecond)))
		limiters[tenant] = l
	}
	t.mu.Unlock()
	now := t.now()
	r := l.ReserveN(now, 1)
	if wait := r.DelayFrom(now); wait > 0 {
		r.CancelAt(now) // refused: the token is not spent
		return fault.New(fault.ReasonRateLimited, nil).WithRetryAfter(wait)
	}
	return nil
}
