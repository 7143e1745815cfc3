package ledgertest

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/ledger"
)

// The statements of ledger.CassandraStore, by the names they give
// themselves (cassandra.StatementName): what Arm and a FaultSession take.
const (
	StmtClaim      = "ledger.claim"
	StmtGet        = "ledger.get" // Get, Peek, and every settling read
	StmtAttempt    = "ledger.attempt"
	StmtFail       = "ledger.fail"
	StmtComplete   = "ledger.complete"
	StmtRequeue    = "ledger.requeue"
	StmtWithdraw   = "ledger.withdraw"
	StmtClusterNow = "ledger.cluster-now"
	StmtEnqueue    = "queue.enqueue"
	StmtRemove     = "queue.remove"
	StmtDue        = "queue.due"
	StmtDropBucket = "queue.drop-bucket"
)

// Store is everything of ledger.CassandraStore that callers use: the
// ledger.Store, the due queue, and the operator's and reconciler's writes.
type Store interface {
	ledger.Store
	DueEntries(ctx context.Context, shard int, bucket, after, through time.Time) ([]ledger.DueEntry, error)
	DropBucket(ctx context.Context, shard int, bucket time.Time) error
	Reschedule(ctx context.Context, e ledger.DueEntry, due time.Time) error
	RemoveEntry(ctx context.Context, e ledger.DueEntry) error
	ClaimEntry(rec ledger.Record) ledger.DueEntry
	MarkFailed(ctx context.Context, rec ledger.Record, reason string) (ledger.Record, error)
	Requeue(ctx context.Context, key ledger.Key) (ledger.Record, error)
	DueAfter() time.Duration
}

var (
	_ Store = (*Memory)(nil)
	_ Store = (*ledger.CassandraStore)(nil)
)

// Config configures a Memory: the store's own settings (same defaults and
// limits as ledger.NewCassandraStore) and its clock.
type Config struct {
	ledger.Config
	// Now is the clock that dates writes and expires rows and entries (the
	// cluster's clock, for Requeue); default time.Now. Advance moves the
	// Memory's time on from it.
	Now func() time.Time
}

// Statement is one statement Memory ran or failed, as a FaultSession under
// the real store would have seen it.
type Statement struct {
	Name string     // StmtClaim, ...
	Key  ledger.Key // the request it concerns; zero for StmtDue and StmtClusterNow
	// Shard and Bucket are the due-queue partition of a queue statement;
	// After and Through the range of due times a StmtDue read asked for.
	Shard          int
	Bucket         time.Time
	After, Through time.Time
	// Fault is what was served instead of a plain execution; 0 for none.
	Fault cassandra.Fault
	// Applied: the statement ran and, if conditional, its condition held.
	Applied bool
}

// Memory is an in-memory ledger and due queue with the semantics of
// ledger.CassandraStore (see the package doc). Safe for concurrent use; each
// statement is atomic, an operation of several statements is not, as in
// the real store. Make one with NewMemory.
type Memory struct {
	// Faults armed by statement name (StmtClaim, ...), served as a
	// cassandra.FaultSession serves them: Arm, Hits, Pending.
	*cassandra.Faults
	cfg Config

	mu        sync.Mutex
	offset    time.Duration // Advance
	rows      map[ledger.Key]row
	entries   map[entryKey]entryRow
	intercept func(Statement) cassandra.Fault
	calls     map[string]int
	log       []Statement
}

// row is one ledger row. The claim's INSERT gives the row its marker; every
// write sets every cell that holds a value, with one TTL. A row lives while
// its marker or its cells do; a row whose cells expired before its marker
// reads as a row without a state, as Cassandra returns it.
type row struct {
	rec           ledger.Record
	markerExpires time.Time
	cellsExpire   time.Time
}

// entryKey is the primary key of a due-queue entry.
type entryKey struct {
	shard     int
	bucket    int64 // due_bucket, Unix milliseconds
	notBefore int64 // Unix milliseconds
	key       ledger.Key
	token     uuid.UUID
}

// entryRow is a due-queue row; a done one is a removed entry, as the table
// keeps it (listed by no read).
type entryRow struct {
	e       ledger.DueEntry
	done    bool
	expires time.Time
}

// NewMemory returns an empty Memory with nothing armed. It panics on a
// Config that ledger.NewCassandraStore would refuse.
func NewMemory(cfg Config) *Memory {
	if cfg.Retention == 0 {
		cfg.Retention = 7 * 24 * time.Hour
	}
	if cfg.Retention < ledger.MinRetention || cfg.Retention > ledger.MaxRetention {
		panic(fmt.Sprintf("ledgertest: retention %s: must be between 1m and 10 years", cfg.Retention))
	}
	if cfg.SettleAttempts == 0 {
		cfg.SettleAttempts = 3
	}
	if cfg.DueAfter == 0 {
		cfg.DueAfter = 30 * time.Second
	}
	if cfg.OnSettle == nil {
		cfg.OnSettle = func(string, ledger.SettleOutcome, error) {}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Memory{
		cfg:     cfg,
		rows:    map[ledger.Key]row{},
		entries: map[entryKey]entryRow{},
		Faults:  cassandra.NewFaults(),
		calls:   map[string]int{},
	}
}

// ---------------------------------------------------------------- clock

// Now is the Memory's time: Config.Now plus everything Advance added.
func (m *Memory) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.nowLocked()
}

func (m *Memory) nowLocked() time.Time { return m.cfg.Now().Add(m.offset).UTC() }

// Advance moves the Memory's time on by d (rows and entries whose time is
// up disappear).
func (m *Memory) Advance(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.offset += d
}

// ttlFrom is the TTL a write at now gives a row of a request claimed at
// created: the whole seconds left until its expiry instant, at least 1
// (ledger.CassandraStore.ttlFrom).
func (m *Memory) ttlFrom(created, now time.Time) time.Duration {
	left := created.Add(m.cfg.Retention).Sub(now)
	return time.Duration(max(1, int64(math.Floor(left.Seconds())))) * time.Second
}

// ---------------------------------------------------------------- faults

// SetIntercept makes fn decide, for every statement no armed fault claims,
// which fault it gets (0 for none), knowing what the statement concerns
// (its request, its due-queue partition): a test can fail the reads of one
// request or one bucket alone. fn runs without Memory's lock and may call
// it. nil removes it.
func (m *Memory) SetIntercept(fn func(Statement) cassandra.Fault) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.intercept = fn
}

// Statements lists the statements run (or failed) so far, in order; only
// those named name unless name is "".
func (m *Memory) Statements(name string) []Statement {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Statement
	for _, s := range m.log {
		if name == "" || s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// Calls is how many times the method ("Claim", "Get", "Peek", "Release",
// "RecordAttempt", "Withdraw", "MarkFailed", "Requeue", "DueEntries",
// "Reschedule", "RemoveEntry", "DropBucket") was called, failed calls included, calls one
// method makes of another not included.
func (m *Memory) Calls(method string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls[method]
}

func (m *Memory) enter(method string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls[method]++
}

type stmtKind int

const (
	readStmt  stmtKind = iota // a read: any failure is Unavailable
	writeStmt                 // a write: only a refusal is Unavailable
)

// exec runs one statement as the real store's session would, with whatever
// fault is armed for it: do runs under the lock, with the Memory's time,
// and reports whether it applied. The error is what cassandra.ReadError or
// WriteError makes of the fault: any failed read, and a refused write
// (FaultUnavailable), is Unavailable; a write that timed out or lost its
// response, or ran with an ended context, is OutcomeUnknown. A write
// applies only without a fault or with FaultLoseResponse.
func (m *Memory) exec(ctx context.Context, st Statement, kind stmtKind, op string, do func(now time.Time) bool) (bool, error) {
	f, armed := m.Take(st.Name)
	if !armed {
		m.mu.Lock()
		intercept := m.intercept
		m.mu.Unlock()
		if intercept != nil {
			f = intercept(st)
		}
	}
	st.Fault = f
	run := f == 0 || f == cassandra.FaultLoseResponse
	cause := ctx.Err()
	if cause != nil {
		run = false // the driver sends nothing on an ended context
	}
	m.mu.Lock()
	if run {
		st.Applied = do(m.nowLocked())
	}
	m.log = append(m.log, st)
	m.mu.Unlock()
	if f == 0 && cause == nil {
		return st.Applied, nil
	}
	if f != 0 {
		cause = fmt.Errorf("injected fault on %s: %s", st.Name, f)
	}
	reason := fault.ReasonOutcomeUnknown
	if kind == readStmt || f == cassandra.FaultUnavailable {
		reason = fault.ReasonClusterUnavailable
	}
	return false, fault.New(reason, fmt.Errorf("%s: %w", op, cause))
}

func keyStmt(name string, key ledger.Key) Statement { return Statement{Name: name, Key: key} }

func entryStmt(name string, e ledger.DueEntry) Statement {
	return Statement{Name: name, Key: e.Key, Shard: e.Shard, Bucket: e.Due.UTC()}
}

// ---------------------------------------------------------------- rows

func cloneRecord(r ledger.Record) ledger.Record {
	r.Command = slices.Clone(r.Command)
	r.Outcome = slices.Clone(r.Outcome)
	return r
}

// ms is t as a Cassandra timestamp returns it: UTC, to the millisecond.
func ms(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Truncate(time.Millisecond)
}

// setClaimCells rewrites the claim's cells from rec, as every update does.
func setClaimCells(r *ledger.Record, rec ledger.Record) {
	r.EntityID, r.Fingerprint, r.Command = rec.EntityID, rec.Fingerprint, slices.Clone(rec.Command)
	r.CreatedAt, r.ClaimToken = ms(rec.CreatedAt), rec.ClaimToken
}

// currentLocked is the row of key as a read returns it: ok false if there
// is none (or its time is up); an error, as fromMap's, if the row is left
// without a state or fingerprint. For a condition such a row has no state.
func (m *Memory) currentLocked(key ledger.Key, now time.Time) (rec ledger.Record, ok bool, err error) {
	r, ok := m.rows[key]
	if !ok {
		return ledger.Record{}, false, nil
	}
	if !now.Before(r.markerExpires) && !now.Before(r.cellsExpire) {
		delete(m.rows, key)
		return ledger.Record{}, false, nil
	}
	if !now.Before(r.cellsExpire) {
		return ledger.Record{Key: key}, true, fmt.Errorf("ledger row %s without a state or fingerprint", key.RequestID)
	}
	if r.rec.State == "" || r.rec.Fingerprint == "" {
		return ledger.Record{Key: key}, true, fmt.Errorf("ledger row %s without a state or fingerprint", key.RequestID)
	}
	return cloneRecord(r.rec), true, nil
}

// ---------------------------------------------------------------- ledger.Store

// Claim implements ledger.Store: the claim's due entry first (alongside
// check), then the row unless one exists; a claim that lost removes its
// entry (best effort).
func (m *Memory) Claim(ctx context.Context, rec ledger.Record, check func(context.Context) error) (bool, ledger.Record, error) {
	m.enter("Claim")
	rec = cloneRecord(rec)
	rec.State, rec.Attempts = ledger.Pending, 0
	entry := m.entryFor(rec)
	if err := ledger.Alongside(ctx, check, func() error { return m.enqueue(ctx, entry) }); err != nil {
		return false, ledger.Record{}, err
	}
	won, cur, err := m.claim(ctx, rec)
	if err == nil && !won {
		_ = m.removeEntry(ctx, entry)
	}
	return won, cur, err
}

func (m *Memory) claim(ctx context.Context, rec ledger.Record) (bool, ledger.Record, error) {
	for attempt := 1; ; attempt++ {
		ttl := m.ttlFrom(rec.CreatedAt, m.Now())
		var (
			existing ledger.Record
			exErr    error
		)
		applied, err := m.exec(ctx, keyStmt(StmtClaim, rec.Key), writeStmt, "claim request", func(now time.Time) bool {
			cur, ok, cerr := m.currentLocked(rec.Key, now)
			if ok {
				existing, exErr = cur, cerr
				return false
			}
			stored := ledger.Record{
				Key: rec.Key, EntityID: rec.EntityID, Fingerprint: rec.Fingerprint, Command: slices.Clone(rec.Command),
				State: ledger.Pending, CreatedAt: ms(rec.CreatedAt), Attempts: 0, ClaimToken: rec.ClaimToken,
			}
			m.rows[rec.Key] = row{rec: stored, markerExpires: now.Add(ttl), cellsExpire: now.Add(ttl)}
			return true
		})
		if err == nil {
			if applied {
				return true, cloneRecord(rec), nil
			}
			if exErr != nil {
				return false, ledger.Record{}, exErr
			}
			return false, existing, nil
		}
		if fault.KindOf(err) != fault.OutcomeUnknown {
			return false, ledger.Record{}, err
		}
		cur, gerr := m.settle(ctx, rec.Key)
		switch {
		case gerr == nil:
			won := cur.ClaimToken == rec.ClaimToken
			m.cfg.OnSettle("claim", map[bool]ledger.SettleOutcome{true: ledger.SettledApplied, false: ledger.SettledNotApplied}[won], err)
			return won, cur, nil
		case errors.Is(gerr, ledger.ErrNotFound) && attempt < m.cfg.SettleAttempts:
			m.cfg.OnSettle("claim", ledger.SettledNotApplied, err)
			continue
		case errors.Is(gerr, ledger.ErrNotFound):
			m.cfg.OnSettle("claim", ledger.SettledNotApplied, err)
			return false, ledger.Record{}, fault.New(fault.ReasonClusterUnavailable, fmt.Errorf("claim did not apply in %d tries: %w", attempt, err))
		default:
			m.cfg.OnSettle("claim", ledger.Unsettled, err)
			return false, ledger.Record{}, err
		}
	}
}

// settle reads the row up to SettleAttempts times until a read succeeds.
func (m *Memory) settle(ctx context.Context, key ledger.Key) (ledger.Record, error) {
	var err error
	for i := 0; i < m.cfg.SettleAttempts; i++ {
		var rec ledger.Record
		if rec, err = m.get(ctx, key); err == nil || errors.Is(err, ledger.ErrNotFound) {
			return rec, err
		}
		if ctx.Err() != nil {
			return ledger.Record{}, err
		}
	}
	return ledger.Record{}, err
}

// Get implements ledger.Store.
func (m *Memory) Get(ctx context.Context, key ledger.Key) (ledger.Record, error) {
	m.enter("Get")
	return m.get(ctx, key)
}

// Peek implements ledger.Store. It runs the same statement as Get.
func (m *Memory) Peek(ctx context.Context, key ledger.Key) (ledger.Record, error) {
	m.enter("Peek")
	return m.get(ctx, key)
}

func (m *Memory) get(ctx context.Context, key ledger.Key) (ledger.Record, error) {
	var (
		rec   ledger.Record
		found bool
		rerr  error
	)
	_, err := m.exec(ctx, keyStmt(StmtGet, key), readStmt, "read request", func(now time.Time) bool {
		rec, found, rerr = m.currentLocked(key, now)
		return false
	})
	switch {
	case err != nil:
		return ledger.Record{}, err
	case !found:
		return ledger.Record{}, ledger.ErrNotFound
	case rerr != nil:
		return ledger.Record{}, rerr
	}
	return rec, nil
}

// update is one conditional update of a claim (ledger.CassandraStore's).
type update struct {
	op   string
	stmt string
	key  ledger.Key
	// cond is the IF clause on the row as it is.
	cond func(cur ledger.Record) bool
	// write changes the row (under the lock) when cond holds.
	write func(now time.Time)
	// applied and awaits read a settling read as the real store does.
	applied func(ledger.Record) bool
	awaits  func(ledger.Record) bool
}

// run is ledger.CassandraStore.run: send u; on an unknown outcome settle it
// with reads, resend while the row awaits it, never take it as settled
// without a read.
func (m *Memory) run(ctx context.Context, u update) (bool, ledger.Record, error) {
	for attempt := 1; ; attempt++ {
		applied, err := m.exec(ctx, keyStmt(u.stmt, u.key), writeStmt, u.op+" request", func(now time.Time) bool {
			cur, ok, _ := m.currentLocked(u.key, now)
			if !ok || !u.cond(cur) {
				return false
			}
			u.write(now)
			return true
		})
		if err == nil && applied {
			return true, ledger.Record{}, nil
		}
		if err == nil {
			cur, err := m.get(ctx, u.key)
			return false, cur, err
		}
		if fault.KindOf(err) != fault.OutcomeUnknown {
			return false, ledger.Record{}, err
		}
		cur, gerr := m.settle(ctx, u.key)
		switch {
		case gerr != nil && !errors.Is(gerr, ledger.ErrNotFound):
			m.cfg.OnSettle(u.op, ledger.Unsettled, err)
			return false, ledger.Record{}, err
		case gerr == nil && u.applied(cur):
			m.cfg.OnSettle(u.op, ledger.SettledApplied, err)
			return true, cur, nil
		case gerr == nil && u.awaits(cur) && attempt < m.cfg.SettleAttempts:
			m.cfg.OnSettle(u.op, ledger.SettledNotApplied, err)
			continue
		case gerr == nil && u.awaits(cur):
			m.cfg.OnSettle(u.op, ledger.SettledNotApplied, err)
			return false, ledger.Record{}, fault.New(fault.ReasonClusterUnavailable, fmt.Errorf("%s did not apply in %d tries: %w", u.op, attempt, err))
		default:
			m.cfg.OnSettle(u.op, ledger.SettledNotApplied, err)
			return false, cur, gerr
		}
	}
}

// rewrite returns an update's write: every cell of the row set by set, from
// a copy of the row, with one TTL.
func (m *Memory) rewrite(key ledger.Key, ttl time.Duration, set func(r *ledger.Record)) func(now time.Time) {
	return func(now time.Time) {
		r := m.rows[key]
		set(&r.rec)
		r.cellsExpire = now.Add(ttl)
		m.rows[key] = r
	}
}

func pendingClaim(rec ledger.Record) func(ledger.Record) bool {
	return func(cur ledger.Record) bool { return cur.State == ledger.Pending && cur.ClaimToken == rec.ClaimToken }
}

// Release implements ledger.Store.
func (m *Memory) Release(ctx context.Context, rec ledger.Record) error {
	m.enter("Release")
	return m.removeEntry(ctx, m.entryFor(rec))
}

// RecordAttempt implements ledger.Store.
func (m *Memory) RecordAttempt(ctx context.Context, rec ledger.Record, reason string) error {
	m.enter("RecordAttempt")
	rec = cloneRecord(rec)
	_, _, err := m.run(ctx, update{
		op:   "attempt",
		stmt: StmtAttempt,
		key:  rec.Key,
		cond: func(cur ledger.Record) bool { return pendingClaim(rec)(cur) && cur.Attempts == rec.Attempts },
		write: m.rewrite(rec.Key, m.ttlFrom(rec.CreatedAt, m.Now()), func(r *ledger.Record) {
			setClaimCells(r, rec)
			r.State, r.Attempts, r.LastError = ledger.Pending, rec.Attempts+1, reason
		}),
		applied: func(cur ledger.Record) bool { return cur.ClaimToken == rec.ClaimToken && cur.Attempts > rec.Attempts },
		awaits:  func(cur ledger.Record) bool { return pendingClaim(rec)(cur) && cur.Attempts == rec.Attempts },
	})
	if errors.Is(err, ledger.ErrNotFound) {
		return nil
	}
	return err
}

// MarkFailed is ledger.CassandraStore.MarkFailed: rec's claim from PENDING
// to FAILED with reason, attempts+1; the record as it now is. An outcome it
// cannot settle is an error, never a record.
func (m *Memory) MarkFailed(ctx context.Context, rec ledger.Record, reason string) (ledger.Record, error) {
	m.enter("MarkFailed")
	rec = cloneRecord(rec)
	at := ms(m.Now())
	failed := rec
	failed.State, failed.LastError, failed.CompletedAt, failed.Attempts = ledger.Failed, reason, at, rec.Attempts+1
	applied, cur, err := m.run(ctx, update{
		op:   "fail",
		stmt: StmtFail,
		key:  rec.Key,
		cond: pendingClaim(rec),
		write: m.rewrite(rec.Key, m.ttlFrom(rec.CreatedAt, m.Now()), func(r *ledger.Record) {
			setClaimCells(r, rec)
			r.Attempts, r.LastError, r.State, r.CompletedAt = failed.Attempts, reason, ledger.Failed, at
		}),
		applied: func(cur ledger.Record) bool { return cur.State == ledger.Failed && cur.ClaimToken == rec.ClaimToken },
		awaits:  pendingClaim(rec),
	})
	switch {
	case err != nil:
		return ledger.Record{}, err
	case applied && cur.State == ledger.Failed:
		return cur, nil
	case applied:
		return failed, nil
	}
	return cur, nil
}

// Complete implements ledger.Store.
func (m *Memory) Complete(ctx context.Context, rec ledger.Record, outcome []byte) (ledger.Record, error) {
	m.enter("Complete")
	rec = cloneRecord(rec)
	outcome = slices.Clone(outcome)
	at := ms(m.Now())
	done := rec
	done.State, done.Outcome, done.CompletedAt = ledger.Complete, outcome, at
	applied, cur, err := m.run(ctx, update{
		op:   "complete",
		stmt: StmtComplete,
		key:  rec.Key,
		cond: pendingClaim(rec),
		write: m.rewrite(rec.Key, m.ttlFrom(rec.CreatedAt, m.Now()), func(r *ledger.Record) {
			setClaimCells(r, rec)
			r.Attempts, r.LastError = rec.Attempts, rec.LastError
			r.State, r.CompletedAt, r.Outcome = ledger.Complete, at, outcome
		}),
		applied: func(cur ledger.Record) bool { return cur.State == ledger.Complete && cur.ClaimToken == rec.ClaimToken },
		awaits:  pendingClaim(rec),
	})
	switch {
	case err != nil:
		return ledger.Record{}, err
	case applied && cur.State == ledger.Complete:
		return cur, nil
	case applied:
		return done, nil
	}
	return cur, nil
}

// Withdraw implements ledger.Store.
func (m *Memory) Withdraw(ctx context.Context, rec ledger.Record) (ledger.Record, error) {
	m.enter("Withdraw")
	rec = cloneRecord(rec)
	applied, cur, err := m.run(ctx, update{
		op:      "withdraw",
		stmt:    StmtWithdraw,
		key:     rec.Key,
		cond:    pendingClaim(rec),
		write:   func(time.Time) { delete(m.rows, rec.Key) },
		applied: func(ledger.Record) bool { return false },
		awaits:  pendingClaim(rec),
	})
	if err == nil && applied || errors.Is(err, ledger.ErrNotFound) {
		_ = m.removeEntry(ctx, m.entryFor(rec))
		return ledger.Record{}, ledger.ErrNotFound
	}
	return cur, err
}

// Requeue is ledger.CassandraStore.Requeue: a FAILED request becomes
// PENDING with attempts 0 after an entry due now (by the cluster's clock,
// here Memory's) is written; a PENDING one only gets the entry.
func (m *Memory) Requeue(ctx context.Context, key ledger.Key) (ledger.Record, error) {
	m.enter("Requeue")
	rec, err := m.get(ctx, key)
	if err != nil {
		return ledger.Record{}, err
	}
	if rec.State == ledger.Complete {
		return rec, nil
	}
	var now time.Time
	if _, err := m.exec(ctx, Statement{Name: StmtClusterNow}, readStmt, "read the cluster's clock", func(t time.Time) bool {
		now = ms(t)
		return false
	}); err != nil {
		return ledger.Record{}, err
	}
	before, after := ledger.RequeueEntries(m.entryFor(rec), now)
	if err := m.enqueue(ctx, before); err != nil {
		return ledger.Record{}, err
	}
	if rec.State == ledger.Failed {
		if rec, err = m.requeue(ctx, rec); err != nil || rec.State != ledger.Pending {
			return rec, err
		}
	}
	if err := m.enqueue(ctx, after); err != nil {
		return ledger.Record{}, fmt.Errorf("request %s is PENDING again, but its entry could not be written (run requeue again): %w", rec.RequestID, err)
	}
	return rec, nil
}

// requeue is Requeue's LWT: FAILED → PENDING, attempts 0.
func (m *Memory) requeue(ctx context.Context, rec ledger.Record) (ledger.Record, error) {
	applied, cur, err := m.run(ctx, update{
		op:   "requeue",
		stmt: StmtRequeue,
		key:  rec.Key,
		cond: func(cur ledger.Record) bool { return cur.State == ledger.Failed && cur.ClaimToken == rec.ClaimToken },
		write: m.rewrite(rec.Key, m.ttlFrom(rec.CreatedAt, m.Now()), func(r *ledger.Record) {
			setClaimCells(r, rec)
			r.Attempts, r.LastError, r.State, r.CompletedAt = 0, rec.LastError, ledger.Pending, time.Time{}
		}),
		applied: func(cur ledger.Record) bool { return cur.State == ledger.Pending && cur.ClaimToken == rec.ClaimToken },
		awaits:  func(cur ledger.Record) bool { return cur.State == ledger.Failed && cur.ClaimToken == rec.ClaimToken },
	})
	switch {
	case err != nil:
		return ledger.Record{}, err
	case applied && cur.State == ledger.Pending:
		return cur, nil
	case applied:
		rec.State, rec.Attempts, rec.CompletedAt = ledger.Pending, 0, time.Time{}
		return rec, nil
	}
	return cur, nil
}

// ---------------------------------------------------------------- due queue

// DueAfter is how long after its claim a request falls due.
func (m *Memory) DueAfter() time.Duration { return m.cfg.DueAfter }

// ClaimEntry is the entry rec's claim wrote.
func (m *Memory) ClaimEntry(rec ledger.Record) ledger.DueEntry { return m.entryFor(rec) }

func (m *Memory) entryFor(rec ledger.Record) ledger.DueEntry {
	due := rec.CreatedAt.Add(m.cfg.DueAfter)
	return ledger.DueEntry{
		Key:        rec.Key,
		Shard:      ledger.ShardOf(rec.CreatedAt),
		Due:        ledger.BucketOf(due),
		ClaimToken: rec.ClaimToken,
		CreatedAt:  rec.CreatedAt,
		NotBefore:  due,
	}
}

func keyOf(e ledger.DueEntry) entryKey {
	return entryKey{shard: e.Shard, bucket: e.Due.UnixMilli(), notBefore: e.NotBefore.UnixMilli(), key: e.Key, token: e.ClaimToken}
}

// storedEntry is e as the table holds it.
func storedEntry(e ledger.DueEntry) ledger.DueEntry {
	e.Due, e.CreatedAt, e.NotBefore = ms(e.Due), ms(e.CreatedAt), ms(e.NotBefore)
	return e
}

func (m *Memory) enqueue(ctx context.Context, e ledger.DueEntry) error {
	ttl := m.entryTTL(e)
	_, err := m.exec(ctx, entryStmt(StmtEnqueue, e), writeStmt, "enqueue pending request", func(now time.Time) bool {
		k := keyOf(e)
		// The insert writes no done cell: a removed entry stays removed.
		m.entries[k] = entryRow{e: storedEntry(e), done: m.entries[k].done, expires: expiry(now, ttl)}
		return true
	})
	return err
}

// entryTTL is the TTL of e's cells: its claim's, or none (0) for an entry
// that owes an event, as the real store writes them.
func (m *Memory) entryTTL(e ledger.DueEntry) time.Duration {
	if e.Owed != uuid.Nil {
		return 0
	}
	return m.ttlFrom(e.CreatedAt, m.Now())
}

// never is the expiry of cells written without a TTL.
var never = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// expiry is when cells written at now with ttl expire (0: never).
func expiry(now time.Time, ttl time.Duration) time.Time {
	if ttl == 0 {
		return never
	}
	return now.Add(ttl)
}

// RemoveEntry marks a due-queue entry done (creating a done row if there
// is none, as an upsert does).
func (m *Memory) RemoveEntry(ctx context.Context, e ledger.DueEntry) error {
	m.enter("RemoveEntry")
	return m.removeEntry(ctx, e)
}

func (m *Memory) removeEntry(ctx context.Context, e ledger.DueEntry) error {
	ttl := m.entryTTL(e)
	_, err := m.exec(ctx, entryStmt(StmtRemove, e), writeStmt, "remove pending entry", func(now time.Time) bool {
		k := keyOf(e)
		r, ok := m.entries[k]
		if !ok {
			r.e = storedEntry(e)
		}
		r.done, r.expires = true, expiry(now, ttl)
		m.entries[k] = r
		return true
	})
	return err
}

// Reschedule moves an entry to fall due at due: the new entry first, then
// the old one removed.
func (m *Memory) Reschedule(ctx context.Context, e ledger.DueEntry, due time.Time) error {
	m.enter("Reschedule")
	next := e
	next.Due, next.NotBefore = ledger.BucketOf(due), due.UTC().Truncate(time.Millisecond)
	if err := m.enqueue(ctx, next); err != nil || next.SameRow(e) {
		return err
	}
	return m.removeEntry(ctx, e)
}

// DueEntries lists the entries of one shard's minute starting at bucket
// that are not done and fall due in (after, through], by due time (then
// clustering order).
func (m *Memory) DueEntries(ctx context.Context, shard int, bucket, after, through time.Time) ([]ledger.DueEntry, error) {
	m.enter("DueEntries")
	bucket = ledger.BucketOf(bucket)
	lo, hi := after.UnixMilli(), through.UnixMilli() // bound as the driver binds them
	if after.IsZero() {
		lo = bucket.UnixMilli() - 1
	}
	var out []ledger.DueEntry
	_, err := m.exec(ctx, Statement{Name: StmtDue, Shard: shard, Bucket: bucket, After: after, Through: through}, readStmt,
		fmt.Sprintf("read due entries of shard %d at %s", shard, bucket.Format(time.RFC3339)), func(now time.Time) bool {
			for k, er := range m.entries {
				if !now.Before(er.expires) {
					delete(m.entries, k)
					continue
				}
				if k.shard == shard && k.bucket == bucket.UnixMilli() && !er.done && k.notBefore > lo && k.notBefore <= hi {
					e := er.e
					e.Shard, e.Due = shard, bucket
					out = append(out, e)
				}
			}
			return false
		})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b ledger.DueEntry) int { return cmp.Or(a.NotBefore.Compare(b.NotBefore), compareEntries(a, b)) })
	return out, nil
}

// DropBucket deletes one shard's minute whole.
func (m *Memory) DropBucket(ctx context.Context, shard int, bucket time.Time) error {
	m.enter("DropBucket")
	bucket = ledger.BucketOf(bucket)
	_, err := m.exec(ctx, Statement{Name: StmtDropBucket, Shard: shard, Bucket: bucket}, writeStmt,
		fmt.Sprintf("drop due bucket of shard %d at %s", shard, bucket.Format(time.RFC3339)), func(time.Time) bool {
			for k := range m.entries {
				if k.shard == shard && k.bucket == bucket.UnixMilli() {
					delete(m.entries, k)
				}
			}
			return true
		})
	return err
}

func compareEntries(a, b ledger.DueEntry) int {
	return cmp.Or(
		strings.Compare(a.Tenant, b.Tenant),
		strings.Compare(a.Operation, b.Operation),
		bytes.Compare(a.RequestID[:], b.RequestID[:]),
		bytes.Compare(a.ClaimToken[:], b.ClaimToken[:]),
	)
}

// ---------------------------------------------------------------- seeding and inspection

// Put stores rec as the row of its key, as it is (no statement runs, nothing
// is armed or logged, no entry is written), expiring at
// rec.ExpiresAt(Retention) like any row of a claim at rec.CreatedAt. It
// panics on a record the store could not hold: without a state or
// fingerprint, or past its retention.
func (m *Memory) Put(rec ledger.Record) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.nowLocked()
	if rec.State == "" || rec.Fingerprint == "" {
		panic(fmt.Sprintf("ledgertest: Put of request %s without a state or fingerprint", rec.RequestID))
	}
	if !now.Before(rec.ExpiresAt(m.cfg.Retention)) {
		panic(fmt.Sprintf("ledgertest: Put of request %s claimed at %s, past its retention at %s", rec.RequestID, rec.CreatedAt, now))
	}
	rec = cloneRecord(rec)
	rec.CreatedAt, rec.CompletedAt = ms(rec.CreatedAt), ms(rec.CompletedAt)
	exp := now.Add(m.ttlFrom(rec.CreatedAt, now))
	m.rows[rec.Key] = row{rec: rec, markerExpires: exp, cellsExpire: exp}
}

// PutEntry stores a due-queue entry as it is, in the minute of its
// NotBefore (every writer puts it there; e.Due is ignored), expiring with its
// request's retention. It panics on an entry past it.
func (m *Memory) PutEntry(e ledger.DueEntry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.nowLocked()
	if !now.Before(e.CreatedAt.Add(m.cfg.Retention)) {
		panic(fmt.Sprintf("ledgertest: PutEntry of request %s claimed at %s, past its retention at %s", e.RequestID, e.CreatedAt, now))
	}
	e.Due = ledger.BucketOf(e.NotBefore)
	m.entries[keyOf(e)] = entryRow{e: storedEntry(e), expires: now.Add(m.ttlFrom(e.CreatedAt, now))}
}

// Delete forgets the row of key, as its TTL would; its entries stay.
func (m *Memory) Delete(key ledger.Key) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.rows, key)
}

// Record returns the row of key as a read would (false if there is none),
// without running a statement.
func (m *Memory) Record(key ledger.Key) (ledger.Record, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok, _ := m.currentLocked(key, m.nowLocked())
	return rec, ok
}

// Records returns every live row, by key.
func (m *Memory) Records() []ledger.Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.nowLocked()
	var out []ledger.Record
	for k := range m.rows {
		if rec, ok, _ := m.currentLocked(k, now); ok {
			out = append(out, rec)
		}
	}
	slices.SortFunc(out, func(a, b ledger.Record) int {
		return cmp.Or(strings.Compare(a.Tenant, b.Tenant), strings.Compare(a.Operation, b.Operation),
			bytes.Compare(a.RequestID[:], b.RequestID[:]))
	})
	return out
}

// Entries lists the live due-queue entries of key, in any bucket, by due
// time.
func (m *Memory) Entries(key ledger.Key) []ledger.DueEntry {
	return m.entriesWhere(func(e ledger.DueEntry) bool { return e.Key == key })
}

// AllEntries lists every live due-queue entry, by due time.
func (m *Memory) AllEntries() []ledger.DueEntry {
	return m.entriesWhere(func(ledger.DueEntry) bool { return true })
}

func (m *Memory) entriesWhere(match func(ledger.DueEntry) bool) []ledger.DueEntry {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.nowLocked()
	var out []ledger.DueEntry
	for k, er := range m.entries {
		if !now.Before(er.expires) {
			delete(m.entries, k)
			continue
		}
		if !er.done && match(er.e) {
			out = append(out, er.e)
		}
	}
	slices.SortFunc(out, func(a, b ledger.DueEntry) int {
		return cmp.Or(a.Due.Compare(b.Due), a.NotBefore.Compare(b.NotBefore), compareEntries(a, b))
	})
	return out
}
