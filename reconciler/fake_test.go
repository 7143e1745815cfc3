package reconciler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/ledger"
	"github.com/atlasmart/orderd/ledger/ledgertest"
)

// ---------------------------------------------------------------- clock

// fakeClock is a settable clock shared by a loop and the fakes.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock(t time.Time) *fakeClock { return &fakeClock{t: t.UTC()} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t.UTC()
}

// ---------------------------------------------------------------- ledger

// The ledger the tests use is ledgertest.Memory, which passes the same
// contract as the ledger on Cassandra (ledger/memory_test.go,
// e2e/contract_ledger_test.go). What follows are small helpers on it.
var _ Ledger = (*ledgertest.Memory)(nil)

// newLedger is a Memory whose entries fall due testDueAfter after their
// claim, on the harness's clock.
func newLedger(now func() time.Time) *ledgertest.Memory {
	return ledgertest.NewMemory(ledgertest.Config{Config: ledger.Config{DueAfter: testDueAfter}, Now: now})
}

// claimedInShard is the latest claim time not after t whose due-queue
// shard is shard (at most one cycle of the shards earlier).
func claimedInShard(shard int, t time.Time) time.Time {
	cycle := ledger.PendingShards * ledger.ShardSlot
	at := t.Truncate(cycle).Add(time.Duration(shard) * ledger.ShardSlot)
	if at.After(t) {
		at = at.Add(-cycle)
	}
	return at
}

// addPending claims a request in shard at created, as a handler does: a
// PENDING record (attempts 0) and its entry, due at created+testDueAfter.
func (h *harness) addPending(t *testing.T, shard int, created time.Time) (ledger.Record, ledger.DueEntry) {
	t.Helper()
	rec := ledger.Record{
		Key:         ledger.Key{Tenant: "t1", Operation: "CreateOrder", RequestID: uuid.New()},
		EntityID:    uuid.New(),
		Fingerprint: "sha256:v1:fake",
		Command:     []byte(`{"v":1}`),
		CreatedAt:   claimedInShard(shard, created.UTC().Truncate(time.Millisecond)),
		ClaimToken:  uuid.New(),
	}
	won, rec, err := h.ledger.Claim(context.Background(), rec, nil)
	if err != nil || !won {
		t.Fatalf("claim in shard %d: won %v, %v", shard, won, err)
	}
	return rec, h.ledger.ClaimEntry(rec)
}

// failGets makes every read of key's request fail (Unavailable) until
// SetIntercept(nil).
func failGets(l *ledgertest.Memory, key ledger.Key) {
	l.SetIntercept(func(st ledgertest.Statement) cassandra.Fault {
		if st.Name == ledger.StmtGet && st.Key == key {
			return cassandra.FaultUnavailable
		}
		return 0
	})
}

// failDue makes every read of one due-queue partition fail (Unavailable)
// until SetIntercept(nil).
func failDue(l *ledgertest.Memory, shard int, bucket time.Time) {
	l.SetIntercept(func(st ledgertest.Statement) cassandra.Fault {
		if st.Name == ledger.StmtDue && st.Shard == shard && st.Bucket.Equal(ledger.BucketOf(bucket)) {
			return cassandra.FaultUnavailable
		}
		return 0
	})
}

// dueCalls is how many times the due-queue partition (shard, bucket) was read.
func dueCalls(l *ledgertest.Memory, shard int, bucket time.Time) int {
	n := 0
	for _, st := range l.Statements(ledger.StmtDue) {
		if st.Shard == shard && st.Bucket.Equal(ledger.BucketOf(bucket)) {
			n++
		}
	}
	return n
}

// sent is how many statements named name (ledger.StmtFail, ...) the ledger
// has run so far, failed ones included: what the loop sent.
func sent(l *ledgertest.Memory, name cassandra.Stmt) int { return len(l.Statements(name)) }

// completions is how many times the request's order was recorded.
func completions(h *harness, key ledger.Key) int { return h.fin.Recorded(key) }

// wantFinished checks that the request's order is recorded and its claim
// is still in the ledger (PENDING: finishing leaves the claim as it is),
// and returns the claim.
func wantFinished(t *testing.T, h *harness, key ledger.Key) ledger.Record {
	t.Helper()
	if h.fin.Recorded(key) == 0 {
		t.Fatalf("request %s: no order recorded", key.RequestID)
	}
	return wantState(t, h, key, ledger.Pending)
}

// nextDue is when the request's (single) entry falls due: where the last
// Reschedule put it.
func nextDue(t *testing.T, l *ledgertest.Memory, key ledger.Key) time.Time {
	t.Helper()
	es := l.Entries(key)
	if len(es) != 1 {
		t.Fatalf("request %s has %d due entries (%+v), want 1", key.RequestID, len(es), es)
	}
	return es[0].NotBefore
}

// ---------------------------------------------------------------- coordinator

// The coordinator the tests use is leasestest.MemoryCoordinator:
// leases.Leases on an in-memory table that passes the same contract as the
// CQL one.

// ---------------------------------------------------------------- finisher

// fakeFinisher mimics workflow.Service.Settle: it records the request's
// order (once: a later call finds it recorded), or, for each request's
// first failN calls, fails with err (the loop notes the failed attempt):
// unfinished, or, after SetUndelivered, as a delivery that failed once
// the order was recorded (only its event owed). Like Settle it leaves the due entry to the loop.
type fakeFinisher struct {
	l   *ledgertest.Memory
	now func() time.Time

	mu     sync.Mutex
	failN  int // failures per request before it succeeds; <0: always fail
	err    error
	owed   bool // a failure says the order is recorded and its event owed (ledger.EventOwed)
	calls  map[uuid.UUID]int
	orders map[ledger.Key]int // times the order was recorded (at most 1)
	// before, if set, runs at the start of every call (outside the lock).
	before func(rec ledger.Record)
	// another: the request id already has another order, so every call
	// withdraws the claim and answers REQUEST_ID_REUSED, as Finish does.
	another bool
}

func newFakeFinisher(l *ledgertest.Memory, now func() time.Time) *fakeFinisher {
	return &fakeFinisher{l: l, now: now, err: fault.New(fault.ReasonClusterUnavailable, errors.New("projection write failed")),
		calls: map[uuid.UUID]int{}, orders: map[ledger.Key]int{}}
}

// Finish is the Finisher.
func (f *fakeFinisher) Finish(ctx context.Context, rec ledger.Record) (ledger.Settled, error) {
	if f.before != nil {
		f.before(rec)
	}
	f.mu.Lock()
	f.calls[rec.RequestID]++
	n, failN, ferr, owed, another := f.calls[rec.RequestID], f.failN, f.err, f.owed, f.another
	if another && !(failN < 0 || n <= failN) {
		f.mu.Unlock()
		if _, err := f.l.Withdraw(ctx, rec); !errors.Is(err, ledger.ErrNotFound) {
			return ledger.Unfinished, fmt.Errorf("withdraw: %v", err)
		}
		return ledger.Unfinished, fault.New(fault.ReasonRequestIDReused, nil)
	}
	if failN < 0 || n <= failN {
		f.mu.Unlock()
		if owed {
			return ledger.EventOwed, fmt.Errorf("request %s: %w", rec.RequestID, ferr)
		}
		return ledger.Unfinished, fmt.Errorf("request %s: %w", rec.RequestID, ferr)
	}
	if f.orders[rec.Key] == 0 {
		f.orders[rec.Key]++
	}
	f.mu.Unlock()
	return ledger.Finished, nil
}

// Recorded is how many times the request's order was recorded (0 or 1).
func (f *fakeFinisher) Recorded(key ledger.Key) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.orders[key]
}

// SetAnother makes the finisher find another order under every request id
// from now on (after any failures SetFail asked for).
func (f *fakeFinisher) SetAnother() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.another = true
}

// SetErr makes failing calls return err, the request unfinished.
func (f *fakeFinisher) SetErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err, f.owed = err, false
}

// SetUndelivered makes failing calls fail to deliver the order's event
// with err (ledger.EventOwed), as Settle does when the broker does not
// acknowledge it.
func (f *fakeFinisher) SetUndelivered(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err, f.owed = err, true
}

// SetFail makes every request's first n calls fail (n < 0: all of them).
func (f *fakeFinisher) SetFail(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failN = n
}

// Calls is how many times the request was passed to the finisher.
func (f *fakeFinisher) Calls(id uuid.UUID) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[id]
}

// TotalCalls is how many calls were made for all requests.
func (f *fakeFinisher) TotalCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		n += c
	}
	return n
}
