package workflow

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/fault"
	"github.com/atlasmart/orderd/internal/order"
	"github.com/atlasmart/orderd/ledger"
)

// fakeLedger is an in-memory ledger.Store that honours the contract of
// ledger.go. Records are copied in and out, so callers never share memory
// with the store.
type fakeLedger struct {
	mu      sync.Mutex
	records map[ledger.Key]ledger.Record
	calls   map[string]int

	// hook, if set, runs (without the lock held) before every method; a
	// non-nil error is returned by the method without touching the store.
	hook func(method string) error
}

var _ ledger.Store = (*fakeLedger)(nil)

func newFakeLedger() *fakeLedger {
	return &fakeLedger{records: map[ledger.Key]ledger.Record{}, calls: map[string]int{}}
}

func cloneRecord(r ledger.Record) ledger.Record {
	r.Command = slices.Clone(r.Command)
	r.Outcome = slices.Clone(r.Outcome)
	return r
}

func (f *fakeLedger) enter(method string) error {
	f.mu.Lock()
	f.calls[method]++
	hook := f.hook
	f.mu.Unlock()
	if hook != nil {
		return hook(method)
	}
	return nil
}

func (f *fakeLedger) setHook(h func(method string) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hook = h
}

// Claim implements ledger.Store.
func (f *fakeLedger) Claim(ctx context.Context, rec ledger.Record) (bool, ledger.Record, error) {
	if err := f.enter("Claim"); err != nil {
		return false, ledger.Record{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if cur, ok := f.records[rec.Key]; ok {
		return false, cloneRecord(cur), nil
	}
	rec = cloneRecord(rec)
	rec.State = ledger.Pending
	f.records[rec.Key] = rec
	return true, cloneRecord(rec), nil
}

// Get implements ledger.Store.
func (f *fakeLedger) Get(ctx context.Context, key ledger.Key) (ledger.Record, error) {
	if err := f.enter("Get"); err != nil {
		return ledger.Record{}, err
	}
	return f.read(key)
}

// Peek implements ledger.Store.
func (f *fakeLedger) Peek(ctx context.Context, key ledger.Key) (ledger.Record, error) {
	if err := f.enter("Peek"); err != nil {
		return ledger.Record{}, err
	}
	return f.read(key)
}

func (f *fakeLedger) read(key ledger.Key) (ledger.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur, ok := f.records[key]
	if !ok {
		return ledger.Record{}, ledger.ErrNotFound
	}
	return cloneRecord(cur), nil
}

// Complete implements ledger.Store.
func (f *fakeLedger) Complete(ctx context.Context, rec ledger.Record, outcome []byte, at time.Time) (ledger.Record, error) {
	if err := f.enter("Complete"); err != nil {
		return ledger.Record{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	cur, ok := f.records[rec.Key]
	if !ok {
		return ledger.Record{}, ledger.ErrNotFound
	}
	if cur.State != ledger.Pending {
		return cloneRecord(cur), nil
	}
	cur.State = ledger.Complete
	cur.CompletedAt = at
	cur.Outcome = slices.Clone(outcome)
	f.records[rec.Key] = cur
	return cloneRecord(cur), nil
}

// RecordAttempt implements ledger.Store.
func (f *fakeLedger) RecordAttempt(ctx context.Context, rec ledger.Record, lastErr string) error {
	if err := f.enter("RecordAttempt"); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	cur, ok := f.records[rec.Key]
	if !ok || cur.State != ledger.Pending || cur.Attempts != rec.Attempts {
		return nil // lost race: ignored, as the contract says
	}
	cur.Attempts++
	cur.LastError = lastErr
	f.records[rec.Key] = cur
	return nil
}

// put stores rec as is (seeding a test).
func (f *fakeLedger) put(rec ledger.Record) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.records[rec.Key] = cloneRecord(rec)
}

// all returns a copy of every record.
func (f *fakeLedger) all() []ledger.Record {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]ledger.Record, 0, len(f.records))
	for _, r := range f.records {
		out = append(out, cloneRecord(r))
	}
	return out
}

func (f *fakeLedger) callCount(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[method]
}

// fakeProjector records every order written and fails the first failN calls.
type fakeProjector struct {
	mu      sync.Mutex
	failN   int
	calls   int
	writes  []order.Order // successful writes, in order
	byOrder map[uuid.UUID]int
	failed  int
	// err is what a failing call returns; a fault.Unavailable when nil.
	err error
}

var _ Projector = (*fakeProjector)(nil)

func newFakeProjector() *fakeProjector {
	return &fakeProjector{byOrder: map[uuid.UUID]int{}}
}

// Write implements Projector.
func (p *fakeProjector) Write(ctx context.Context, o order.Order) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	if p.failN > 0 {
		p.failN--
		p.failed++
		if p.err != nil {
			return p.err
		}
		return &fault.Error{Kind: fault.Unavailable, Reason: "CLUSTER_UNAVAILABLE",
			Message: "the database is unavailable; retry with the same request_id", RetryAfter: time.Second}
	}
	o.Lines = slices.Clone(o.Lines)
	p.writes = append(p.writes, o)
	p.byOrder[o.ID]++
	return nil
}

func (p *fakeProjector) failNext(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failN = n
}

// written returns a copy of the successful writes.
func (p *fakeProjector) written() []order.Order {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.writes)
}

func (p *fakeProjector) count(id uuid.UUID) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.byOrder[id]
}

func (p *fakeProjector) callCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

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
