package workflow

import (
	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/ledger"
)

// replayCache holds the recorded outcomes of recent COMPLETE requests, so
// that a duplicate is answered without a Paxos round (or any round trip).
//
// It is sound because a recorded outcome never changes: COMPLETE is
// reached once, by one conditional write, and nothing moves a request out
// of it. An entry is added only after this process saw the outcome
// recorded (it completed the request, or read it COMPLETE), so a hit answers
// exactly what a ledger read would. When another instance recorded the
// outcome, a hit here means this instance already read that same record
// once; instances do not share caches, and a miss simply asks the ledger.
//
// The fingerprint is kept with the outcome: a request id reused with
// another command is rejected from the cache as it would be by the ledger.
type replayCache struct {
	c *lru.Cache[ledger.Key, cachedOutcome] // nil: disabled
}

type cachedOutcome struct {
	fingerprint string
	// order is shared by every hit: callers read it and never modify it.
	order order.Order
}

// newReplayCache returns a cache of at most size outcomes; size <= 0
// disables it.
func newReplayCache(size int) replayCache {
	if size <= 0 {
		return replayCache{}
	}
	c, err := lru.New[ledger.Key, cachedOutcome](size)
	if err != nil {
		panic(err) // only for size <= 0, excluded above
	}
	return replayCache{c: c}
}

func (r replayCache) get(key ledger.Key) (cachedOutcome, bool) {
	if r.c == nil {
		return cachedOutcome{}, false
	}
	return r.c.Get(key)
}

func (r replayCache) add(key ledger.Key, fingerprint string, o order.Order) {
	if r.c != nil {
		r.c.Add(key, cachedOutcome{fingerprint: fingerprint, order: o})
	}
}
