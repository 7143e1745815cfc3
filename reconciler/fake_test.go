package reconciler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/ledger"
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

// queueKey is one due-queue partition: (shard, due_bucket).
type queueKey struct {
	shard  int
	bucket int64 // UnixNano of the bucket start
}

func qk(shard int, bucket time.Time) queueKey {
	return queueKey{shard: shard, bucket: ledger.BucketOf(bucket).UnixNano()}
}

// entryKey is an entry's clustering key inside its partition.
type entryKey struct {
	ledger.Key
	token uuid.UUID
}

// rescheduleCall is one Reschedule call as the loop made it.
type rescheduleCall struct {
	Entry ledger.DueEntry
	Due   time.Time
}

// fakeLedger is an in-memory ledger and due queue with the semantics of
// ledger.CassandraStore that the reconciler relies on.
type fakeLedger struct {
	mu    sync.Mutex
	grace time.Duration // the store's DueAfter
	// yield makes every call give up the processor once, to shake out
	// interleavings in concurrent tests.
	yield bool

	recs  map[ledger.Key]ledger.Record
	queue map[queueKey]map[entryKey]ledger.DueEntry

	// Injected errors.
	getErr        map[ledger.Key]error
	dueErr        map[queueKey]error
	rescheduleErr error
	removeErr     error
	markFailedErr error

	// Call counters.
	calls       map[string]int   // by method name
	dueCalls    map[queueKey]int // DueEntries calls per partition
	rescheduled []rescheduleCall
	completions map[uuid.UUID]int // PENDING → COMPLETE transitions per request
}

var _ Ledger = (*fakeLedger)(nil)

func newFakeLedger(grace time.Duration) *fakeLedger {
	return &fakeLedger{
		grace:       grace,
		recs:        map[ledger.Key]ledger.Record{},
		queue:       map[queueKey]map[entryKey]ledger.DueEntry{},
		getErr:      map[ledger.Key]error{},
		dueErr:      map[queueKey]error{},
		calls:       map[string]int{},
		dueCalls:    map[queueKey]int{},
		completions: map[uuid.UUID]int{},
	}
}

func (f *fakeLedger) enter(method string) {
	if f.yield {
		runtime.Gosched()
	}
	f.mu.Lock()
	f.calls[method]++
}

// Get implements Ledger.
func (f *fakeLedger) Get(_ context.Context, key ledger.Key) (ledger.Record, error) {
	f.enter("Get")
	defer f.mu.Unlock()
	if err := f.getErr[key]; err != nil {
		return ledger.Record{}, err
	}
	rec, ok := f.recs[key]
	if !ok {
		return ledger.Record{}, ledger.ErrNotFound
	}
	return cloneRecord(rec), nil
}

// DueEntries implements Ledger.
func (f *fakeLedger) DueEntries(_ context.Context, shard int, bucket time.Time) ([]ledger.DueEntry, error) {
	f.enter("DueEntries")
	defer f.mu.Unlock()
	k := qk(shard, bucket)
	f.dueCalls[k]++
	if err := f.dueErr[k]; err != nil {
		return nil, err
	}
	out := make([]ledger.DueEntry, 0, len(f.queue[k]))
	for _, e := range f.queue[k] {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b ledger.DueEntry) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.RequestID.String(), b.RequestID.String()))
	})
	return out, nil
}

// Reschedule implements Ledger: insert at the new bucket, then remove the
// old entry; nothing if the bucket is the same.
func (f *fakeLedger) Reschedule(_ context.Context, e ledger.DueEntry, due time.Time) error {
	f.enter("Reschedule")
	defer f.mu.Unlock()
	f.rescheduled = append(f.rescheduled, rescheduleCall{Entry: e, Due: due})
	if f.rescheduleErr != nil {
		return f.rescheduleErr
	}
	next := e
	next.Due, next.NotBefore = ledger.BucketOf(due), due
	f.insertLocked(next) // same minute: only not_before moves, as in the real store
	if !next.Due.Equal(e.Due) {
		f.removeLocked(e)
	}
	return nil
}

// RemoveEntry implements Ledger.
func (f *fakeLedger) RemoveEntry(_ context.Context, e ledger.DueEntry) error {
	f.enter("RemoveEntry")
	defer f.mu.Unlock()
	if f.removeErr != nil {
		return f.removeErr
	}
	f.removeLocked(e)
	return nil
}

// MarkFailed implements Ledger: PENDING → FAILED with lastErr; returns the
// record as it now is.
func (f *fakeLedger) MarkFailed(_ context.Context, rec ledger.Record, lastErr string) (ledger.Record, error) {
	f.enter("MarkFailed")
	defer f.mu.Unlock()
	if f.markFailedErr != nil {
		return ledger.Record{}, f.markFailedErr
	}
	cur, ok := f.recs[rec.Key]
	if !ok {
		return ledger.Record{}, ledger.ErrNotFound
	}
	if cur.State == ledger.Pending {
		cur.State, cur.LastError = ledger.Failed, lastErr
		f.recs[rec.Key] = cur
	}
	return cloneRecord(cur), nil
}

func (f *fakeLedger) insertLocked(e ledger.DueEntry) {
	e.Due = ledger.BucketOf(e.Due)
	k := qk(e.Shard, e.Due)
	if f.queue[k] == nil {
		f.queue[k] = map[entryKey]ledger.DueEntry{}
	}
	f.queue[k][entryKey{e.Key, e.ClaimToken}] = e
}

func (f *fakeLedger) removeLocked(e ledger.DueEntry) {
	k := qk(e.Shard, e.Due)
	delete(f.queue[k], entryKey{e.Key, e.ClaimToken})
	if len(f.queue[k]) == 0 {
		delete(f.queue, k)
	}
}

func cloneRecord(r ledger.Record) ledger.Record {
	r.Command = slices.Clone(r.Command)
	r.Outcome = slices.Clone(r.Outcome)
	return r
}

// ---- test helpers on the fake ledger

// keyInShard returns a fresh request key whose due-queue shard is shard.
func keyInShard(shard int) ledger.Key {
	for {
		id := uuid.New()
		if ledger.ShardOf(id) == shard {
			return ledger.Key{Tenant: "t1", Operation: "CreateOrder", RequestID: id}
		}
	}
}

// AddPending claims a request in shard at created, as the real ledger does:
// a PENDING record with attempts = 1 and its entry due at
// BucketOf(created+grace).
func (f *fakeLedger) AddPending(shard int, created time.Time) (ledger.Record, ledger.DueEntry) {
	rec := ledger.Record{
		Key:         keyInShard(shard),
		EntityID:    uuid.New(),
		Fingerprint: "sha256:v1:fake",
		Command:     []byte(`{"v":1}`),
		State:       ledger.Pending,
		CreatedAt:   created.UTC(),
		Attempts:    1,
		ClaimToken:  uuid.New(),
	}
	e := ledger.DueEntry{
		Key:        rec.Key,
		Shard:      shard,
		Due:        ledger.BucketOf(created.Add(f.grace)),
		ClaimToken: rec.ClaimToken,
		CreatedAt:  rec.CreatedAt,
		NotBefore:  created.Add(f.grace).UTC(),
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recs[rec.Key] = rec
	f.insertLocked(e)
	return rec, e
}

// PutRecord stores rec as is (no entry).
func (f *fakeLedger) PutRecord(rec ledger.Record) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recs[rec.Key] = rec
}

// DeleteRecord forgets a record (as the retention TTL would).
func (f *fakeLedger) DeleteRecord(key ledger.Key) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.recs, key)
}

// PutEntry adds a due-queue entry as is.
func (f *fakeLedger) PutEntry(e ledger.DueEntry) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.insertLocked(e)
}

// Record returns the stored record (ok false if absent).
func (f *fakeLedger) Record(key ledger.Key) (ledger.Record, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.recs[key]
	return cloneRecord(r), ok
}

// EntriesOf lists every due-queue entry of a request, in any bucket.
func (f *fakeLedger) EntriesOf(key ledger.Key) []ledger.DueEntry {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []ledger.DueEntry
	for _, part := range f.queue {
		for ek, e := range part {
			if ek.Key == key {
				out = append(out, e)
			}
		}
	}
	slices.SortFunc(out, func(a, b ledger.DueEntry) int { return a.Due.Compare(b.Due) })
	return out
}

// QueueLen is the number of entries in the whole due queue.
func (f *fakeLedger) QueueLen() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, part := range f.queue {
		n += len(part)
	}
	return n
}

// SetGetErr makes Get of key fail with err (nil clears it).
func (f *fakeLedger) SetGetErr(key ledger.Key, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.getErr, key)
		return
	}
	f.getErr[key] = err
}

// SetDueErr makes DueEntries of (shard, bucket) fail with err (nil clears it).
func (f *fakeLedger) SetDueErr(shard int, bucket time.Time, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.dueErr, qk(shard, bucket))
		return
	}
	f.dueErr[qk(shard, bucket)] = err
}

// Calls is how many times method was called.
func (f *fakeLedger) Calls(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[method]
}

// DueCalls is how many times DueEntries read (shard, bucket).
func (f *fakeLedger) DueCalls(shard int, bucket time.Time) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dueCalls[qk(shard, bucket)]
}

// Rescheduled returns the Reschedule calls made so far.
func (f *fakeLedger) Rescheduled() []rescheduleCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.rescheduled)
}

// Completions is how many times the request went PENDING → COMPLETE.
func (f *fakeLedger) Completions(id uuid.UUID) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.completions[id]
}

// complete is what ledger.Store.Complete does: PENDING → COMPLETE, removing
// the claimer's entry; it returns the record as it now is.
func (f *fakeLedger) complete(rec ledger.Record, outcome []byte, at time.Time) (ledger.Record, error) {
	f.enter("Complete")
	defer f.mu.Unlock()
	cur, ok := f.recs[rec.Key]
	if !ok {
		return ledger.Record{}, ledger.ErrNotFound
	}
	if cur.State != ledger.Pending {
		return cloneRecord(cur), nil
	}
	cur.State, cur.CompletedAt, cur.Outcome = ledger.Complete, at, slices.Clone(outcome)
	f.recs[rec.Key] = cur
	f.completions[rec.RequestID]++
	// Best effort, as the real store: the claimer's entry.
	f.removeLocked(ledger.DueEntry{Key: cur.Key, Shard: ledger.ShardOf(cur.RequestID),
		Due: ledger.BucketOf(cur.CreatedAt.Add(f.grace)), ClaimToken: cur.ClaimToken})
	return cloneRecord(cur), nil
}

// RecordAttempt implements Ledger.
func (f *fakeLedger) RecordAttempt(_ context.Context, rec ledger.Record, lastErr string) error {
	f.recordAttempt(rec, lastErr)
	return nil
}

// recordAttempt is what ledger.Store.RecordAttempt does: on a record still
// PENDING with the attempts the caller read, one more attempt and lastErr.
func (f *fakeLedger) recordAttempt(rec ledger.Record, lastErr string) {
	f.enter("RecordAttempt")
	defer f.mu.Unlock()
	cur, ok := f.recs[rec.Key]
	if !ok || cur.State != ledger.Pending || cur.Attempts != rec.Attempts {
		return // lost race: ignored, as the real store does
	}
	cur.Attempts++
	cur.LastError = lastErr
	f.recs[rec.Key] = cur
}

// ---------------------------------------------------------------- coordinator

type fakeLease struct {
	owner   uuid.UUID
	expires time.Time
}

// fakeCoord is an in-memory Coordinator whose TTLs follow an injectable clock.
type fakeCoord struct {
	mu      sync.Mutex
	now     func() time.Time
	members map[uuid.UUID]time.Time // instance → expiry
	leases  map[int]fakeLease
	cursors map[int]time.Time

	cursorErr, saveErr, heartbeatErr error
	saves                            map[int][]time.Time // SaveCursor calls per shard
}

var _ Coordinator = (*fakeCoord)(nil)

func newFakeCoord(now func() time.Time) *fakeCoord {
	return &fakeCoord{now: now, members: map[uuid.UUID]time.Time{}, leases: map[int]fakeLease{},
		cursors: map[int]time.Time{}, saves: map[int][]time.Time{}}
}

func (c *fakeCoord) liveLocked(shard int) (fakeLease, bool) {
	l, ok := c.leases[shard]
	if !ok {
		return fakeLease{}, false
	}
	if !c.now().Before(l.expires) {
		delete(c.leases, shard) // expired, as a TTL would
		return fakeLease{}, false
	}
	return l, true
}

// Heartbeat implements Coordinator.
func (c *fakeCoord) Heartbeat(_ context.Context, instance uuid.UUID, ttl time.Duration) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.heartbeatErr != nil {
		return 0, c.heartbeatErr
	}
	now := c.now()
	c.members[instance] = now.Add(ttl)
	n := 0
	for id, exp := range c.members {
		if now.Before(exp) {
			n++
		} else {
			delete(c.members, id)
		}
	}
	return n, nil
}

// Leave implements Coordinator.
func (c *fakeCoord) Leave(_ context.Context, instance uuid.UUID) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.members, instance)
	return nil
}

// Owners implements Coordinator.
func (c *fakeCoord) Owners(context.Context) (map[int]uuid.UUID, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[int]uuid.UUID{}
	for s := range c.leases {
		if l, ok := c.liveLocked(s); ok {
			out[s] = l.owner
		}
	}
	return out, nil
}

// Acquire implements Coordinator: only if nobody holds a live lease.
func (c *fakeCoord) Acquire(_ context.Context, shard int, instance uuid.UUID, ttl time.Duration) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.liveLocked(shard); ok {
		return false, nil
	}
	c.leases[shard] = fakeLease{owner: instance, expires: c.now().Add(ttl)}
	return true, nil
}

// Renew implements Coordinator: only if instance holds a live lease.
func (c *fakeCoord) Renew(_ context.Context, shard int, instance uuid.UUID, ttl time.Duration) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.liveLocked(shard)
	if !ok || l.owner != instance {
		return false, nil
	}
	c.leases[shard] = fakeLease{owner: instance, expires: c.now().Add(ttl)}
	return true, nil
}

// Release implements Coordinator: only if instance holds it.
func (c *fakeCoord) Release(_ context.Context, shard int, instance uuid.UUID) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l, ok := c.liveLocked(shard); ok && l.owner == instance {
		delete(c.leases, shard)
	}
	return nil
}

// Cursor implements Coordinator.
func (c *fakeCoord) Cursor(_ context.Context, shard int) (time.Time, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cursorErr != nil {
		return time.Time{}, false, c.cursorErr
	}
	t, ok := c.cursors[shard]
	return t, ok, nil
}

// SaveCursor implements Coordinator.
func (c *fakeCoord) SaveCursor(_ context.Context, shard int, bucket time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.saveErr != nil {
		return c.saveErr
	}
	c.cursors[shard] = bucket
	c.saves[shard] = append(c.saves[shard], bucket)
	return nil
}

// ---- test helpers on the fake coordinator

func (c *fakeCoord) SetCursor(shard int, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cursors[shard] = t
}

func (c *fakeCoord) CursorOf(shard int) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.cursors[shard]
	return t, ok
}

func (c *fakeCoord) Saves(shard int) []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.saves[shard])
}

// LeasesOf lists the shards instance holds a live lease on, sorted.
func (c *fakeCoord) LeasesOf(instance uuid.UUID) []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for s := range c.leases {
		if l, ok := c.liveLocked(s); ok && l.owner == instance {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// IsMember reports whether instance is a live member.
func (c *fakeCoord) IsMember(instance uuid.UUID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	exp, ok := c.members[instance]
	return ok && c.now().Before(exp)
}

// ---------------------------------------------------------------- finisher

// fakeFinisher mimics workflow.Service.Finish on the fake ledger: it
// completes the request (idempotently: only a PENDING record changes), or,
// for each request's first failN calls, fails with err and records the
// failed attempt (attempts+1, last_error) as Finish does through
// RecordAttempt.
type fakeFinisher struct {
	l   *fakeLedger
	now func() time.Time

	mu    sync.Mutex
	failN int // failures per request before it succeeds; <0: always fail
	err   error
	calls map[uuid.UUID]int
	// before, if set, runs at the start of every call (outside the lock).
	before func(rec ledger.Record)
}

func newFakeFinisher(l *fakeLedger, now func() time.Time) *fakeFinisher {
	return &fakeFinisher{l: l, now: now, err: errors.New("projection write failed: cluster unavailable"),
		calls: map[uuid.UUID]int{}}
}

// Finish is the Finisher.
func (f *fakeFinisher) Finish(_ context.Context, rec ledger.Record) error {
	if f.before != nil {
		f.before(rec)
	}
	f.mu.Lock()
	f.calls[rec.RequestID]++
	n, failN, ferr := f.calls[rec.RequestID], f.failN, f.err
	f.mu.Unlock()
	if failN < 0 || n <= failN {
		return fmt.Errorf("request %s: %w", rec.RequestID, ferr)
	}
	done, err := f.l.complete(rec, []byte(`{"order":"ok"}`), f.now().UTC())
	if err != nil {
		return err
	}
	if done.State != ledger.Complete {
		return fmt.Errorf("request %s: state %s after completing it", rec.RequestID, done.State)
	}
	return nil
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
