package reconciler

import (
	"hash/maphash"
	"sync"
	"time"

	"github.com/atlasmart/orderd/ledger"
)

// This file keeps what the backlog gauges count: the requests of each held
// shard that a pass found due and left unsettled.
//
// A pass lists only what fell due since the last one, and an entry left
// unsettled is rescheduled up to BackoffMax ahead, so one pass sees a
// slice of the backlog: counted per pass, the gauges fell to zero between
// the passes that happened to meet a parked event, and an alert that waits
// for a gauge to stay up never fired. So every hold remembers each request
// it left unsettled until a later pass settles it (or finds it settled by
// someone else), and the gauges count what the held shards remember.
//
// A request is remembered by its shard's hold: when the hold ends (the
// lease lost, given back or lapsed) its requests are the next holder's to
// count, and a pass still finishing an entry of the ended hold notes into a
// set nobody reads any more. A shard just taken counts its requests as they
// fall due again, within BackoffMax. A request settled elsewhere (its
// client's retry, the delivery worker, `orderd requeue`) stays counted until
// its entry falls due again and the pass drops it: at most BackoffMax.

// maxOpenPerShard bounds what one shard remembers (16 shards: about a
// million requests and 40 MB per instance); past it the gauges stop rising,
// which no alert threshold comes near.
const maxOpenPerShard = 1 << 16

// openKind is why a remembered request is unsettled.
type openKind uint8

const (
	openPending     openKind = iota // not finished (its order may not be recorded)
	openUndelivered                 // its order is recorded, its event is owed
	openParked                      // owed, and past MaxAttempts
)

// openRequest is one remembered request: when it was created, and why it
// is unsettled.
type openRequest struct {
	created int64 // Unix nanoseconds
	kind    openKind
}

// openSet is the unsettled requests of one shard, by a hash of their key
// (a 64-bit hash: a collision among a shard's requests is as likely as
// none in practice, and would only undercount by one).
type openSet struct {
	mu sync.Mutex
	m  map[uint64]openRequest
}

var openSeed = maphash.MakeSeed()

func newOpenSet() *openSet { return &openSet{m: map[uint64]openRequest{}} }

// note remembers key as unsettled for kind.
func (s *openSet) note(key ledger.Key, created time.Time, kind openKind) {
	h := maphash.Comparable(openSeed, key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[h]; !ok && len(s.m) >= maxOpenPerShard {
		return
	}
	s.m[h] = openRequest{created: created.UnixNano(), kind: kind}
}

// forget drops key: settled, or not this release's to count.
func (s *openSet) forget(key ledger.Key) {
	h := maphash.Comparable(openSeed, key)
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, h)
}

// openTotals is what the backlog gauges show.
type openTotals struct {
	pending, undelivered, parked int64
	oldestPending                time.Time // zero if none
	oldestUndelivered            time.Time
}

// add counts s into t.
func (t *openTotals) add(s *openSet) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.m {
		created := time.Unix(0, r.created)
		switch r.kind {
		case openPending:
			t.pending++
			keepEarliest(&t.oldestPending, created)
		case openParked:
			t.parked++
			fallthrough
		case openUndelivered:
			t.undelivered++
			keepEarliest(&t.oldestUndelivered, created)
		}
	}
}
