package reconciler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/semaphore"

	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/platform/lograte"
	"github.com/atlasmart/orderd/internal/platform/tracing"
	"github.com/atlasmart/orderd/internal/stores/leases"
	"github.com/atlasmart/orderd/ledger"
)

// Ledger is what the reconciler needs of the request ledger and its due
// queue (ledger.Ledger; ledgertest.Memory in tests).
type Ledger interface {
	Get(ctx context.Context, key ledger.Key) (ledger.Record, error)
	Peek(ctx context.Context, key ledger.Key) (ledger.Record, error)
	DueEntries(ctx context.Context, shard int, bucket, after, through time.Time) ([]ledger.DueEntry, error)
	DropBucket(ctx context.Context, shard int, bucket time.Time) error
	Reschedule(ctx context.Context, e ledger.DueEntry, due time.Time) error
	RemoveEntry(ctx context.Context, e ledger.DueEntry) error
	// ClaimEntry is the entry rec's claim wrote: the one completing or
	// withdrawing the claim removes.
	ClaimEntry(rec ledger.Record) ledger.DueEntry
	MarkFailed(ctx context.Context, rec ledger.Record, reason string) (ledger.Record, error)
	RecordAttempt(ctx context.Context, rec ledger.Record, reason string) error
}

// Finisher does a claimed request's work from its ledger row, idempotently,
// and delivers its order's event (workflow.Service.Settle). It says what
// it made of the request:
//   - ledger.Finished (nil error): settled; the reconciler removes the
//     due entry;
//   - ledger.EventOwed: the order is recorded and only its event is owed
//     (the broker did not acknowledge it); the entry stays, counted in the
//     outbox's backlog, and from then on owes the event past the claim;
//   - ledger.Unfinished: its error says what became of the request: kind
//     Conflict (its claim was withdrawn) or Failed (set aside) settle it;
//     one wrapping ledger.ErrUnfinishable means nothing was written and no
//     retry can help; one wrapping ledger.ErrUnknownOperation leaves it for
//     a newer release; anything else leaves it PENDING for another attempt.
type Finisher func(ctx context.Context, rec ledger.Record) (ledger.Settled, error)

// Redeliverer publishes the event that request key made on order orderID
// from the order's rows alone, writing nothing (workflow.Service.Redeliver):
// ledger.Finished once the broker acknowledged it; ledger.EventOwed when
// the broker did not take it; ledger.Unfinished, with the error, when the
// event could not be made from the rows.
type Redeliverer func(ctx context.Context, key ledger.Key, orderID uuid.UUID) (ledger.Settled, error)

// Config tunes the loop. Zero fields take defaults.
type Config struct {
	// Instance identifies this reconciler among others; default random.
	Instance uuid.UUID
	// Interval between passes; default 2 s.
	Interval time.Duration
	// LeaseTTL is how long a shard lease lives without renewal; default
	// 15 s, at least 6 s (a shorter one is taken as 6 s). This instance
	// counts its hold as ended 1.5 s sooner (Cassandra's whole-second TTLs
	// and the replicas' clocks), and renews it every half of that.
	LeaseTTL time.Duration
	// StallAfter is how long a running pass may go without progress (a
	// queue read or an entry settled) before the loop stops renewing its
	// leases and its membership, so that other instances take its shards
	// within a TTL; default 2 min. It must exceed the longest one entry
	// can take (a publish timeout and a few CQL timeouts), or a slow but
	// working pass hands its shards over.
	StallAfter time.Duration
	// MaxAttempts is how many failed attempts make a request "stuck": it is
	// then logged at error level and counted in Stats.Stuck at every further
	// failure, and still retried (with the capped backoff) until it finishes.
	// It is never set aside as FAILED for failing: its projections may
	// already be visible, and a FAILED answer would contradict them. Only a
	// request whose stored command cannot be read (nothing written) is.
	// Default 5; the handler's failed attempts count too.
	MaxAttempts int
	// Clock, if set, says whether this instance's clock is close enough to
	// the cluster's to judge entries due (clockskew.Monitor.Check): every
	// due decision, final sweep and minute drop is made by it, against
	// entries dated by the clocks of the processes that wrote them. While
	// it errs the loop holds no shard (it gives its leases back and leaves
	// the group, so the others take its share) and passes nothing. Nil:
	// always close enough.
	Clock func() error
	// Now is this instance's clock; default time.Now.
	Now func() time.Time
	// Redeliver publishes an event a due entry still owes (DueEntry.Owed):
	// while its claim lives, instead of running the finisher again (an
	// earlier attempt recorded the work and every row of it); once its
	// claim is gone, as the only way left. Nil: the finisher runs while the
	// claim lives; after, such an entry is kept, a backoff maximum on each
	// time, and counted parked.
	Redeliver Redeliverer
	// BackoffBase and BackoffMax bound the exponential backoff between
	// attempts of one request; defaults 5 s and 5 min.
	BackoffBase, BackoffMax time.Duration
	// Margin keeps each cursor this far behind now, so that entries written
	// by a process whose clock lags are still scanned; default 2 min.
	Margin time.Duration
	// InitialLookback is where a shard without a cursor starts (cursors are
	// created by migration 0002, so this is a fallback); default 1 h.
	InitialLookback time.Duration
	// Concurrency bounds how many due entries a pass works at once, over
	// all its shards: finishing one is a few round trips, so a backlog left
	// by a crash heals many times faster than one at a time; default 64
	// (make bench-reconciler, docs/reconciler.md "Healing rate"). Lower it
	// to leave more of the cluster to live traffic.
	Concurrency int
}

func (c Config) withDefaults() Config {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Instance == uuid.Nil {
		c.Instance = uuid.New()
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.Interval, 2*time.Second)
	def(&c.LeaseTTL, 15*time.Second)
	c.LeaseTTL = max(c.LeaseTTL, minLeaseTTL)
	def(&c.StallAfter, 2*time.Minute)
	def(&c.BackoffBase, 5*time.Second)
	def(&c.BackoffMax, 5*time.Minute)
	def(&c.Margin, 2*time.Minute)
	def(&c.InitialLookback, time.Hour)
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 5
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 64
	}
	return c
}

// Stats are the loop's counters (since start) and gauges (as of the last pass).
type Stats struct {
	Finished     int64 // requests this instance completed
	Retried      int64 // failed attempts rescheduled with backoff
	Stuck        int64 // failed attempts of requests already past MaxAttempts
	DeadLettered int64 // requests moved to FAILED (stored command unreadable)
	Dropped      int64 // entries of settled or superseded requests removed
	Passes       int64
	PassErrors   int64
	// Pending is the number of PENDING requests of the held shards that a
	// pass found due and left unfinished (remembered until a later pass
	// settles them: open.go), and OldestPending the age of the oldest of
	// them (zero if none).
	Pending       int64
	OldestPending time.Duration
	OwnedShards   int
	// MinutesPassed counts due-queue minutes the cursors passed (and
	// deleted). CursorLag is how far behind the last pass's time the oldest
	// cursor of its shards was after it: normally the margin plus a minute
	// or two; growing, a minute holds an entry that cannot be settled (and
	// is swept whole at every pass until it is).
	MinutesPassed int64
	CursorLag     time.Duration
	// Undelivered is how many of the held shards' PENDING requests a pass
	// found with their order recorded and their event not acknowledged by
	// the broker, and that no later pass found delivered (the outbox
	// backlog past the grace), OldestUndelivered the age of the oldest of
	// them, and Parked how many of them are past MaxAttempts (retried every
	// BackoffMax until the broker takes them).
	Undelivered       int64
	OldestUndelivered time.Duration
	Parked            int64
	// UnknownOperation counts the due entries this release left alone
	// because their request's operation is a newer release's: a fleet of
	// mixed releases, or an older release rolled back to.
	UnknownOperation int64
	// LostLeases counts the shard leases this instance lost while it meant
	// to keep them: a renewal that did not apply (another instance holds
	// the lease, or it lapsed), or none that applied within the lease TTL.
	// A pass stops starting work on such a shard at once. A few as
	// instances come and go are normal; a steady rise means renewals fail
	// or are slower than the TTL.
	LostLeases int64
	// ClockSkipped counts the passes and coordinations skipped because this
	// instance's clock was too far from the cluster's (Config.Clock).
	ClockSkipped int64
}

// Loop is one reconciler instance.
type Loop struct {
	cfg    Config
	ledger Ledger
	finish Finisher
	coord  leases.Coordinator
	log    *slog.Logger
	// lines bounds the per-request lines, per message: healing a crash's
	// backlog or failing it through an outage settles thousands of
	// entries a pass, and the counters, not the log, count each one.
	lines *lograte.Sampler[string]
	now   func() time.Time

	mu sync.Mutex
	// owned is the shards this instance holds, each with its hold (lease.go).
	owned map[int]*hold
	// readTo is, per shard, how far this instance has read the due queue:
	// every entry due at or before it was listed by an earlier pass (or is
	// one written late, which the final sweep of its minute finds). Only
	// valid while the shard is held without a break; forgotten when taken.
	readTo map[int]time.Time

	// unleased is what passes without leases (PassShards) remember of each
	// shard's unsettled requests; a held shard's hold remembers its own.
	unleased map[int]*openSet

	// counters are the loop's counters since start, kept once (Stats
	// reads them).
	counters counters
	// open is what the held shards remember of their unsettled requests
	// (open.go), as counted after the last pass or change of shards.
	open atomic.Pointer[openTotals]
	// skewed: the last clock check failed (logged once per change).
	skewed atomic.Bool

	// passing counts the passes running, and progress is when one of them
	// last moved on (started, read the queue, settled an entry): stalled.
	passing  atomic.Int32
	progress atomic.Pointer[time.Time]
}

// New returns a Loop; it starts nothing.
func New(cfg Config, ledgerStore Ledger, finish Finisher, coord leases.Coordinator, log *slog.Logger) *Loop {
	cfg = cfg.withDefaults()
	l := &Loop{cfg: cfg, ledger: ledgerStore, finish: finish, coord: coord, log: log.With("reconciler", cfg.Instance),
		lines: lograte.New[string](nil), now: cfg.Now, owned: map[int]*hold{}, readTo: map[int]time.Time{},
		unleased: map[int]*openSet{}}
	l.open.Store(&openTotals{})
	return l
}

// Stats returns a snapshot of the counters.
func (l *Loop) Stats() Stats {
	now := l.now()
	l.mu.Lock()
	owned := len(l.heldLocked(now))
	l.mu.Unlock()
	open := l.open.Load()
	age := func(oldest time.Time) time.Duration {
		if oldest.IsZero() {
			return 0
		}
		return max(now.Sub(oldest), 0)
	}
	st := l.counters.snapshot()
	st.Pending, st.OldestPending, st.OwnedShards = open.pending, age(open.oldestPending), owned
	st.Undelivered, st.OldestUndelivered, st.Parked = open.undelivered, age(open.oldestUndelivered), open.parked
	return st
}

// counters are the loop's counters since start and the last pass's cursor
// lag, in the Stats they are read into; the gauges of the unsettled
// requests and the held shards are left zero here and read when Stats is
// called. What settling an entry counts is added from the entry's
// PassResult as soon as the entry is done (handleAll), so the counters
// move during a long pass, not only at its end; what a pass counts of
// itself, when it ends; lost leases and skipped clocks, as they happen.
type counters struct {
	mu sync.Mutex
	s  Stats
}

func (c *counters) update(f func(*Stats)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f(&c.s)
}

func (c *counters) snapshot() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.s
}

// addEntry adds what settling one entry counted (handle's PassResult).
func (s *Stats) addEntry(r PassResult) {
	s.Finished += int64(r.Finished)
	s.Retried += int64(r.Retried)
	s.Stuck += int64(r.stuck)
	s.DeadLettered += int64(r.DeadLettered)
	s.Dropped += int64(r.Dropped)
	s.UnknownOperation += int64(r.UnknownOperation)
}

// countOpen counts what the shards held now (and those passed without
// leases) remember of their unsettled requests, for Stats.
func (l *Loop) countOpen() {
	now := l.now()
	l.mu.Lock()
	sets := make([]*openSet, 0, len(l.owned)+len(l.unleased))
	for _, h := range l.heldLocked(now) {
		sets = append(sets, h.open)
	}
	for _, s := range l.unleased {
		sets = append(sets, s)
	}
	l.mu.Unlock()
	var t openTotals
	for _, s := range sets {
		t.add(s)
	}
	l.open.Store(&t)
}

// openSetOf is where a pass of shard under h remembers its unsettled
// requests.
func (l *Loop) openSetOf(shard int, h *hold) *openSet {
	if h != nil {
		return h.open
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.unleased[shard]
	if !ok {
		s = newOpenSet()
		l.unleased[shard] = s
	}
	return s
}

// Run passes every Interval until ctx ends, while a goroutine of its own
// keeps the leases (keepLeases: taken, renewed, given back every
// leasePeriod, however long a pass takes); then it releases them. It
// returns nil on cancellation.
func (l *Loop) Run(ctx context.Context) error {
	l.log.Info("reconciler started", "interval", l.cfg.Interval.String(), "max_attempts", l.cfg.MaxAttempts)
	defer l.leave()         // last: no pass or coordinate runs any more
	l.coordinateOrWarn(ctx) // so that the first pass has shards
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { l.keepLeases(ctx) })
	t := time.NewTicker(l.cfg.Interval)
	defer t.Stop()
	for {
		if _, err := l.Pass(ctx); err != nil && ctx.Err() == nil {
			l.log.Warn("reconciler pass failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// PassResult says what one pass did.
type PassResult struct {
	Shards  int
	Buckets int // due-queue minutes read
	Swept   int // of them, minutes read whole in their final sweep
	Passed  int // of them, minutes the cursor passed (then deleted)
	// OldestCursor is the oldest cursor of the pass's shards as saved
	// after it (zero if it read none).
	OldestCursor time.Time
	Entries      int // queued entries listed
	Pending      int // of them, PENDING requests that were due
	Finished     int
	Retried      int
	DeadLettered int
	Dropped      int
	// Undelivered and Parked count the PENDING requests whose order is
	// recorded and whose event the broker did not acknowledge (Parked: past
	// MaxAttempts); OldestUndelivered is the creation time of the oldest.
	Undelivered       int
	Parked            int
	OldestUndelivered time.Time
	// UnknownOperation counts the entries left for a newer release.
	UnknownOperation int
	// Lost counts the shards this pass stopped working because their lease
	// was lost or could have lapsed: it started no entry there after that,
	// and left the rest to the shard's next holder.
	Lost int
	// stuck counts, of Retried, the attempts of requests already past
	// MaxAttempts (Stats.Stuck; the pass does not report it).
	stuck int
}

// noteCursor keeps c if it is older than the oldest cursor noted so far.
func (r *PassResult) noteCursor(c time.Time) {
	keepEarliest(&r.OldestCursor, c)
}

func (r *PassResult) add(o PassResult) {
	r.Shards += o.Shards
	r.Buckets += o.Buckets
	r.Swept += o.Swept
	r.Passed += o.Passed
	r.noteCursor(o.OldestCursor)
	r.Entries += o.Entries
	r.Pending += o.Pending
	r.Finished += o.Finished
	r.Retried += o.Retried
	r.DeadLettered += o.DeadLettered
	r.Dropped += o.Dropped
	r.Undelivered += o.Undelivered
	r.Parked += o.Parked
	r.UnknownOperation += o.UnknownOperation
	r.noteUndelivered(o.OldestUndelivered)
	r.Lost += o.Lost
	r.stuck += o.stuck
}

// noteUndelivered keeps created if it is older than the oldest undelivered
// request noted so far.
func (r *PassResult) noteUndelivered(created time.Time) {
	keepEarliest(&r.OldestUndelivered, created)
}

// keepEarliest sets *t to c if c is set and earlier than *t (or *t unset).
func keepEarliest(t *time.Time, c time.Time) {
	if !c.IsZero() && (t.IsZero() || c.Before(*t)) {
		*t = c
	}
}

// Pass runs once over every shard this instance holds, each under its
// current hold: it starts no work on a shard once that hold has ended.
func (l *Loop) Pass(ctx context.Context) (PassResult, error) {
	if !l.clockOK() {
		return PassResult{}, nil
	}
	now := l.now()
	l.mu.Lock()
	held := l.heldLocked(now)
	l.mu.Unlock()
	return l.passShards(ctx, held)
}

// PassShards runs one pass over the given shards, leases or not (tests and
// benchmarks call it directly).
func (l *Loop) PassShards(ctx context.Context, shards []int) (PassResult, error) {
	unleased := make(map[int]*hold, len(shards))
	for _, s := range shards {
		unleased[s] = nil
	}
	return l.passShards(ctx, unleased)
}

// passShards passes each shard under its hold (nil: no lease).
func (l *Loop) passShards(ctx context.Context, shards map[int]*hold) (PassResult, error) {
	var (
		res  = PassResult{Shards: len(shards)}
		errs []error
		mu   sync.Mutex
		wg   sync.WaitGroup
	)
	l.noteProgress()
	l.passing.Add(1)
	defer l.passing.Add(-1)
	now := l.now().UTC().Truncate(time.Millisecond) // as the queue stores times
	// The shards are passed side by side, each by its own goroutine (one
	// per shard held: at most ledger.PendingShards), and every entry being
	// settled holds one of Concurrency slots shared by all of them. So the
	// load on the cluster is bounded as before, and the last slow entries
	// of one shard's minute no longer hold up every other shard: passed one
	// after another, a backlog spread over 16 shards drained to a handful
	// of entries in flight 16 times per pass (docs/reconciler.md, "Healing
	// rate").
	slots := semaphore.NewWeighted(int64(l.cfg.Concurrency))
	for s, h := range shards {
		wg.Go(func() {
			var mine PassResult
			err := l.passShard(ctx, s, h, now, slots, &mine)
			if errors.Is(err, errLost) {
				mine.Lost++
				err = nil
			}
			mu.Lock()
			defer mu.Unlock()
			res.add(mine)
			if err != nil {
				errs = append(errs, fmt.Errorf("shard %d: %w", s, err))
			}
		})
	}
	wg.Wait()
	l.countOpen()
	lag := time.Duration(0)
	if !res.OldestCursor.IsZero() {
		lag = now.Sub(res.OldestCursor)
	}
	err := errors.Join(errs...)
	l.counters.update(func(s *Stats) {
		s.Passes++
		s.MinutesPassed += int64(res.Passed)
		s.CursorLag = lag
		if err != nil {
			s.PassErrors++
		}
	})
	if res.Pending > 0 || res.Dropped > 0 || res.UnknownOperation > 0 || res.Lost > 0 {
		l.log.Info("reconciler pass", "shards", res.Shards, "buckets", res.Buckets, "pending", res.Pending,
			"finished", res.Finished, "retried", res.Retried, "dead_lettered", res.DeadLettered, "dropped", res.Dropped,
			"unknown_operation", res.UnknownOperation, "lost", res.Lost)
	}
	return res, err
}

// passShard reads the due minutes of one shard from its cursor to now and
// settles what fell due (docs/reconciler.md "The due queue"). A minute is
// read in two ways:
//
//   - incrementally, while it is younger than the margin: only the entries
//     that fell due since this instance's last read of the shard, so each
//     entry is listed about once however often passes run;
//   - whole, once it is older than the margin (its final sweep): this
//     finds entries written late (a writer whose clock lags) behind the
//     incremental reads. If every entry of it is settled, the cursor passes
//     it and the minute is deleted whole.
//
// An entry left unsettled moves the shard's read position back to it, so
// the next pass lists it again.
//
// Once h has ended (the lease lost, or it could have lapsed) the pass
// starts no further read or entry of the shard, deletes no minute and
// saves neither cursor nor read position: it returns errLost. Entries
// already being settled run to their end: every step on a request is safe
// to race with the shard's next holder working the same entry.
func (l *Loop) passShard(ctx context.Context, shard int, h *hold, now time.Time, slots *semaphore.Weighted, res *PassResult) error {
	held := func() bool { return l.holding(shard, h) }
	open := l.openSetOf(shard, h)
	cursor, ok, err := l.coord.Cursor(ctx, shard)
	if err != nil {
		return err
	}
	if !ok {
		cursor = now.Add(-l.cfg.InitialLookback)
	}
	cursor = ledger.BucketOf(cursor)
	saved := cursor // the shard's cursor as stored, whatever this pass does
	defer func() { res.noteCursor(saved) }()
	// The cursor may pass only minutes fully settled and older than the margin.
	limit := ledger.BucketOf(now.Add(-l.cfg.Margin))
	l.mu.Lock()
	read := l.readTo[shard]
	l.mu.Unlock()
	next, advancing := cursor, true
	readTo := now // where the next pass's incremental reads start
	for b := cursor; !b.After(now); b = b.Add(ledger.BucketWidth) {
		final := advancing && b.Before(limit)
		after := read
		if final {
			after = time.Time{}
		} else if !read.Before(b.Add(ledger.BucketWidth - time.Millisecond)) {
			// Every entry of this minute falls due by its last millisecond,
			// which an earlier pass read past: an incremental read of it
			// lists nothing (an entry written there late waits for the
			// minute's final sweep either way). Before, each pass read
			// the two or three minutes between the cursor and now of every
			// shard, most of them for nothing.
			advancing = false
			continue
		}
		if !held() {
			return errLost
		}
		entries, err := l.ledger.DueEntries(ctx, shard, b, after, now)
		if err != nil {
			return err
		}
		l.noteProgress()
		res.Buckets++
		res.Entries += len(entries)
		unsettled := l.handleAll(ctx, entries, now, slots, held, open, res)
		if !held() {
			return errLost
		}
		if !unsettled.IsZero() && unsettled.Add(-time.Millisecond).Before(readTo) {
			readTo = unsettled.Add(-time.Millisecond)
		}
		if !final {
			advancing = false
			continue
		}
		res.Swept++
		if !unsettled.IsZero() {
			advancing = false
			continue
		}
		if err := l.ledger.DropBucket(ctx, shard, b); err != nil {
			return err
		}
		res.Passed++
		next = b.Add(ledger.BucketWidth)
	}
	if !l.saveReadTo(shard, h, readTo) {
		return errLost
	}
	if !next.After(cursor) {
		return nil
	}
	if err := l.coord.SaveCursor(ctx, shard, next); err != nil {
		return err
	}
	saved = next
	return nil
}

// saveReadTo keeps the shard's read position for the next pass, if h is
// still the shard's hold (a nil h, a pass without leases, always is).
func (l *Loop) saveReadTo(shard int, h *hold, readTo time.Time) bool {
	if !l.holding(shard, h) {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.readTo[shard] = readTo
	return true
}

// handleAll settles the entries of one minute, each holding one of the
// pass's slots while it is worked, and returns the due time of the earliest
// one left unsettled (zero if all were). Each entry is a different request
// (or another attempt's entry of one), and every step on a request is safe
// to race, so their order does not matter. Once ctx is done, or held says
// the shard's lease is no longer held (checked as each entry gets its
// slot, just before it is started), the entries not started are left
// unsettled.
func (l *Loop) handleAll(ctx context.Context, entries []ledger.DueEntry, now time.Time, slots *semaphore.Weighted, held func() bool, open *openSet, res *PassResult) (unsettled time.Time) {
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for i, e := range entries {
		err := slots.Acquire(ctx, 1)
		if err == nil && !held() {
			slots.Release(1)
			err = errLost
		}
		if err != nil {
			mu.Lock()
			for _, left := range entries[i:] {
				keepEarliest(&unsettled, left.NotBefore)
			}
			mu.Unlock()
			break
		}
		wg.Go(func() {
			defer slots.Release(1)
			var mine PassResult
			settled, err := l.handle(ctx, e, now, open, &mine)
			l.counters.update(func(s *Stats) { s.addEntry(mine) })
			l.noteProgress()
			if err != nil {
				l.note(slog.LevelWarn, "could not reconcile request", slog.Any("request_id", e.RequestID), slog.Any("error", err))
			}
			mu.Lock()
			defer mu.Unlock()
			res.add(mine)
			if !settled || err != nil {
				keepEarliest(&unsettled, e.NotBefore)
			}
		})
	}
	wg.Wait() // every error is logged and reflected in unsettled
	return unsettled
}

// handle settles one due entry. It reports whether the entry is gone from
// its bucket (finished, dropped, rescheduled, dead-lettered). An entry is
// removed only once its request is definitely settled (COMPLETE, FAILED,
// withdrawn, expired) or superseded; every error keeps it for the next pass.
// What it leaves unsettled is remembered in open for the gauges (open.go).
func (l *Loop) handle(ctx context.Context, e ledger.DueEntry, now time.Time, open *openSet, res *PassResult) (bool, error) {
	rec, err := l.read(ctx, e.Key)
	switch {
	case errors.Is(err, ledger.ErrNotFound) && e.Owed != uuid.Nil:
		return l.redeliver(ctx, e, open, res) // the claim's retention ended before its event was delivered
	case errors.Is(err, ledger.ErrNotFound):
		open.forget(e.Key)
		return true, l.drop(ctx, e, res) // expired, withdrawn, or the claim never applied
	case err != nil:
		return false, err
	case rec.ClaimToken != e.ClaimToken && e.Owed != uuid.Nil:
		// Its claim expired and the request id was claimed again since,
		// whatever became of that claim (a reuse refused REQUEST_ID_REUSED
		// is COMPLETE at once): the event is still owed.
		return l.redeliver(ctx, e, open, res)
	case rec.State.Terminal():
		open.forget(e.Key)
		return true, l.drop(ctx, e, res) // settled
	case rec.ClaimToken != e.ClaimToken:
		return true, l.drop(ctx, e, res) // a losing attempt's entry: the claim's own entry counts the request
	}
	settled, ferr := l.settle(ctx, e, rec)
	if settled == ledger.Unfinished && ferr == nil {
		ferr = fault.New(fault.ReasonInternal, errors.New("the finisher neither finished the request nor said why"))
	}
	if settled == ledger.Unfinished && errors.Is(ferr, ledger.ErrUnknownOperation) {
		open.forget(e.Key) // not this release's backlog: its own counter counts it
		return l.leaveForNewerRelease(ctx, e, rec, ferr, res)
	}
	kind := l.count(rec, settled, res)
	switch {
	case settled == ledger.Finished:
		open.forget(e.Key)
		res.Finished++
		l.note(slog.LevelInfo, "reconciled request", slog.Any("request_id", rec.RequestID), slog.String("tenant", rec.Tenant),
			slog.String("age", now.Sub(rec.CreatedAt).String()))
		return true, l.ledger.RemoveEntry(ctx, e)
	case settled == ledger.EventOwed:
		// The order is recorded: nothing of the request is to be judged,
		// only its event delivered later.
	case fault.KindOf(ferr) == fault.Conflict:
		open.forget(e.Key)
		l.note(slog.LevelInfo, "withdrew a claim whose request id already has another order", slog.Any("request_id", rec.RequestID))
		return true, l.removeIfNotClaims(ctx, e, rec)
	case fault.KindOf(ferr) == fault.Failed:
		open.forget(e.Key)
		return true, l.drop(ctx, e, res)
	case errors.Is(ferr, ledger.ErrUnfinishable):
		open.forget(e.Key)
		return l.deadLetter(ctx, e, rec, ferr, res)
	}
	open.note(e.Key, rec.CreatedAt, kind)
	return l.retryLater(ctx, e, rec, settled, ferr, res)
}

// settle runs one attempt at e's request, whose claim rec is live. An
// entry that owes its order's event (an earlier attempt recorded the work,
// every row of it, orders_by_id last, and the broker did not take the
// event) gets only the event, made from the order's rows: nothing is
// rewritten. If the event cannot be made from them (the rows are not as
// recorded: a restore), the finisher runs, as for any claim.
func (l *Loop) settle(ctx context.Context, e ledger.DueEntry, rec ledger.Record) (ledger.Settled, error) {
	if e.Owed != uuid.Nil && l.cfg.Redeliver != nil {
		// In the trace of the call that claimed the request, as Settle
		// publishes it: the claim still lives and keeps its traceparent.
		settled, err := l.cfg.Redeliver(tracing.WithTraceParent(ctx, rec.TraceParent), e.Key, e.Owed)
		if settled != ledger.Unfinished {
			return settled, err
		}
		l.note(slog.LevelWarn, "owed order event could not be made from the order's rows: finishing the request again",
			slog.Any("request_id", e.RequestID), slog.Any("order_id", e.Owed), slog.Any("error", err))
	}
	return l.finish(ctx, rec)
}

// count counts one attempt to finish rec, which ended settled, in res,
// and says which backlog the request is in while it stays unsettled. An
// order whose event alone is owed is the outbox's backlog, not an
// unfinished request: it has its own gauges and alerts.
func (l *Loop) count(rec ledger.Record, settled ledger.Settled, res *PassResult) openKind {
	if settled != ledger.EventOwed {
		res.Pending++
		return openPending
	}
	res.Undelivered++
	res.noteUndelivered(rec.CreatedAt)
	if rec.Attempts+1 >= l.cfg.MaxAttempts {
		res.Parked++
		return openParked
	}
	return openUndelivered
}

// read reads a due entry's request (ledger.Read): only "not found" is
// confirmed at LOCAL_SERIAL, which settles a claim still in flight (the
// entry is written before its claim, so dropping it on a quorum read that
// missed the claim could strand the request). If the row read is already
// stale, every write Finish makes is idempotent and every ledger write is
// conditional on the state and the claim token, so acting on it is safe.
func (l *Loop) read(ctx context.Context, key ledger.Key) (ledger.Record, error) {
	return ledger.Read(ctx, l.ledger, key)
}

// retryLater notes a failed attempt and reschedules the entry with backoff.
// The attempt counts only once the ledger has it: if the ledger cannot be
// written, the database is the problem and the entry stays as it is.
//
// The backoff runs from the clock read here, when the attempt has ended,
// not from the pass's start: an attempt can take longer than the backoff
// itself (a publish waits up to 10 s for a broker that is down), and an
// entry dated from the pass's start would be due again at once.
func (l *Loop) retryLater(ctx context.Context, e ledger.DueEntry, rec ledger.Record, settled ledger.Settled, ferr error, res *PassResult) (bool, error) {
	if err := l.ledger.RecordAttempt(ctx, rec, string(fault.ReasonOf(ferr))); err != nil {
		return false, fmt.Errorf("record failed attempt (%v): %w", ferr, err)
	}
	attempts := rec.Attempts + 1
	now, err := l.stamp()
	if err != nil {
		return false, fmt.Errorf("reschedule after a failed attempt (%v): %w", ferr, err)
	}
	due := now.Add(l.backoff(attempts))
	owed := settled == ledger.EventOwed
	if owed {
		// The order is recorded and its event owed: from now on the entry
		// outlives the claim, so that the obligation does not end with the
		// retention (redeliver).
		e.Owed = rec.EntityID
	}
	if err := l.ledger.Reschedule(ctx, e, due); err != nil {
		return false, err
	}
	res.Retried++
	retry := []slog.Attr{slog.Any("request_id", rec.RequestID), slog.Int("attempts", attempts), slog.Time("next", due), slog.Any("error", ferr)}
	switch {
	case owed && attempts >= l.cfg.MaxAttempts:
		l.note(slog.LevelWarn, "order event still undelivered after repeated attempts: parked, retried later", retry...)
		return true, nil
	case owed:
		l.note(slog.LevelInfo, "order event not delivered; retrying later", retry...)
		return true, nil
	case attempts >= l.cfg.MaxAttempts:
		res.stuck++
		l.note(slog.LevelError, "request still unfinished after repeated attempts; retrying later", retry...)
		return true, nil
	}
	l.note(slog.LevelInfo, "reconcile attempt failed; retrying later", retry...)
	return true, nil
}

// redeliver settles an entry that still owes its order's event after its
// request's claim is gone: the retention ended while the broker did not
// take the event (or the request id was claimed again since). Nothing of
// the claim is needed: the event is made from the order's rows, which
// never expire, with the id and bytes every earlier attempt published. The
// entry goes only once the broker acknowledged it; until then it is moved
// a backoff maximum on, each time, and counted undelivered and parked.
func (l *Loop) redeliver(ctx context.Context, e ledger.DueEntry, open *openSet, res *PassResult) (bool, error) {
	err := errors.New("this reconciler cannot publish events (no Redeliver configured)")
	if l.cfg.Redeliver != nil {
		_, err = l.cfg.Redeliver(ctx, e.Key, e.Owed)
	}
	if err == nil {
		open.forget(e.Key)
		res.Finished++
		l.note(slog.LevelInfo, "delivered an order event owed past its request's retention", slog.Any("request_id", e.RequestID),
			slog.String("tenant", e.Tenant), slog.Any("order_id", e.Owed))
		return true, l.ledger.RemoveEntry(ctx, e)
	}
	res.Undelivered++
	res.Parked++
	res.noteUndelivered(e.CreatedAt)
	open.note(e.Key, e.CreatedAt, openParked)
	due, rerr := l.postpone(ctx, e)
	if rerr != nil {
		return false, fmt.Errorf("order event owed past its request's retention not delivered (%v): %w", err, rerr)
	}
	res.Retried++
	l.note(slog.LevelWarn, "order event owed past its request's retention still undelivered: retried later",
		slog.Any("request_id", e.RequestID), slog.String("tenant", e.Tenant), slog.Any("order_id", e.Owed),
		slog.Time("next", due), slog.Any("error", err))
	return true, nil
}

// postpone moves e a backoff maximum on from now (a plain move of this
// instance's own queue row) and returns when it falls due again.
func (l *Loop) postpone(ctx context.Context, e ledger.DueEntry) (time.Time, error) {
	now, err := l.stamp()
	if err != nil {
		return time.Time{}, err
	}
	due := now.Add(l.cfg.BackoffMax)
	return due, l.ledger.Reschedule(ctx, e, due)
}

// stamp is the time a rescheduled entry is dated from: this clock, as the
// queue stores times, once Config.Clock says it may be trusted. A pass
// checks the clock when it starts, but an entry is rescheduled when its
// attempt ends: a clock stepped back meanwhile would file the entry in a
// minute the shard's cursor has passed, where no pass reads again. Refused,
// the entry stays where it is, unsettled, for a later pass.
func (l *Loop) stamp() (time.Time, error) {
	if l.cfg.Clock != nil {
		if err := l.cfg.Clock(); err != nil {
			return time.Time{}, err
		}
	}
	return l.now().UTC().Truncate(time.Millisecond), nil
}

// leaveForNewerRelease keeps the entry of a request whose operation this
// release does not know, acting on nothing of the request: no attempt
// noted, no dead letter, no withdrawal. Its entry is moved BackoffMax on
// (a plain move of this instance's own queue row, as every retry makes), so
// the minute can be passed and the request is looked at again, by whichever
// instance leases the shard then: once it runs the newer release, that
// release finishes it.
func (l *Loop) leaveForNewerRelease(ctx context.Context, e ledger.DueEntry, rec ledger.Record, ferr error, res *PassResult) (bool, error) {
	due, err := l.postpone(ctx, e)
	if err != nil {
		return false, err
	}
	res.UnknownOperation++
	l.note(slog.LevelWarn, "request of an operation this release does not know: left for a newer release",
		slog.Any("request_id", rec.RequestID), slog.String("tenant", rec.Tenant), slog.String("operation", rec.Operation),
		slog.Time("next", due), slog.Any("error", ferr))
	return true, nil
}

// deadLetter sets aside a request whose stored command cannot be finished
// (nothing of it was written). The entry goes only once the ledger shows
// the request terminal: an unsettled dead-letter keeps it for the next pass.
func (l *Loop) deadLetter(ctx context.Context, e ledger.DueEntry, rec ledger.Record, ferr error, res *PassResult) (bool, error) {
	now, err := l.ledger.MarkFailed(ctx, rec, string(fault.ReasonOf(ferr)))
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		return true, l.drop(ctx, e, res)
	case err != nil:
		return false, fmt.Errorf("dead-letter: %w", err)
	case !now.State.Terminal() && now.ClaimToken != rec.ClaimToken:
		// The row expired and the request was claimed afresh between the
		// read and the dead letter: the newer claim has its own entry and
		// its own finisher, and nothing of it was judged; this entry is spent.
		return true, l.drop(ctx, e, res)
	case !now.State.Terminal():
		return false, fmt.Errorf("dead-letter: request %s still %s", rec.RequestID, now.State)
	}
	if now.State == ledger.Failed {
		res.DeadLettered++
		l.note(slog.LevelWarn, "request cannot be finished; set aside as FAILED", slog.Any("request_id", rec.RequestID), slog.Any("error", ferr))
	}
	return true, l.ledger.RemoveEntry(ctx, e)
}

// removeIfNotClaims removes e unless it is the entry of rec's claim, which
// completing or withdrawing the claim has removed already.
func (l *Loop) removeIfNotClaims(ctx context.Context, e ledger.DueEntry, rec ledger.Record) error {
	if e.SameRow(l.ledger.ClaimEntry(rec)) {
		return nil
	}
	return l.ledger.RemoveEntry(ctx, e)
}

// note writes one per-request line at a bounded rate per message
// (lograte): the first after a held-back run carries "suppressed".
func (l *Loop) note(level slog.Level, msg string, attrs ...slog.Attr) {
	l.lines.Log(context.Background(), l.log, level, msg, msg, attrs...)
}

func (l *Loop) drop(ctx context.Context, e ledger.DueEntry, res *PassResult) error {
	res.Dropped++
	return l.ledger.RemoveEntry(ctx, e)
}

// backoff is exponential in the attempts so far, capped, with jitter in
// [d/2, d) so that many requests failing together spread out.
func (l *Loop) backoff(attempts int) time.Duration {
	d := l.cfg.BackoffBase << min(max(attempts-1, 0), 20) // the first failure waits BackoffBase
	if d <= 0 || d > l.cfg.BackoffMax {
		d = l.cfg.BackoffMax
	}
	return d/2 + rand.N(d/2+1)
}
