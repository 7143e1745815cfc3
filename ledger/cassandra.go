package ledger

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/platform/groupcommit"
)

// Every statement names itself in a leading comment (cassandra.StatementName)
// so that tests can make it fail and traces can tell it apart.
//
// Every write rewrites every cell of the row that can hold a value, with one
// TTL: the time left until the claim's expiry instant (Record.ExpiresAt).
// So all cells of a row always expire together; a row can never be left
// with a state but no fingerprint, or a fingerprint but no state.
// Every conditional update also names the claim it belongs to
// (claim_token), so a finisher holding a record of an earlier claim of the
// same request id (expired since and claimed afresh) cannot change the new one.
const (
	columns = `tenant, operation, request_id, entity_id, payload_hash, command, state,
		created_at, completed_at, outcome, attempts, last_error, claim_token`

	// The claim's cells, rewritten by every update (bound by claimArgs).
	claimCells = `entity_id = ?, payload_hash = ?, command = ?, created_at = ?, claim_token = ?`

	claimCQL = `/* ledger.claim */ INSERT INTO write_requests_by_id
		(tenant, operation, request_id, entity_id, payload_hash, command, state, created_at, attempts, claim_token)
		VALUES (?, ?, ?, ?, ?, ?, 'PENDING', ?, 0, ?) IF NOT EXISTS USING TTL ?`
	selectCQL = `/* ledger.get */ SELECT ` + columns + ` FROM write_requests_by_id
		WHERE tenant = ? AND operation = ? AND request_id = ?`
	// The quorum reads of one tenant's and operation's requests that meet
	// (Peek). Named as the single read: a fault armed on ledger.get, and
	// its metrics, cover both.
	selectManyCQL = `/* ledger.get */ SELECT ` + columns + ` FROM write_requests_by_id
		WHERE tenant = ? AND operation = ? AND request_id IN ?`
	attemptCQL = `/* ledger.attempt */ UPDATE write_requests_by_id USING TTL ?
		SET ` + claimCells + `, state = 'PENDING', attempts = ?, last_error = ?
		WHERE tenant = ? AND operation = ? AND request_id = ? IF state = 'PENDING' AND claim_token = ? AND attempts = ?`
	failCQL = `/* ledger.fail */ UPDATE write_requests_by_id USING TTL ?
		SET ` + claimCells + `, attempts = ?, last_error = ?, state = 'FAILED', completed_at = ?
		WHERE tenant = ? AND operation = ? AND request_id = ? IF state = 'PENDING' AND claim_token = ?`
	completeCQL = `/* ledger.complete */ UPDATE write_requests_by_id USING TTL ?
		SET ` + claimCells + `, attempts = ?, last_error = ?, state = 'COMPLETE', completed_at = ?, outcome = ?
		WHERE tenant = ? AND operation = ? AND request_id = ? IF state = 'PENDING' AND claim_token = ?`
	requeueCQL = `/* ledger.requeue */ UPDATE write_requests_by_id USING TTL ?
		SET ` + claimCells + `, attempts = 0, last_error = ?, state = 'PENDING', completed_at = null
		WHERE tenant = ? AND operation = ? AND request_id = ? IF state = 'FAILED' AND claim_token = ?`
	withdrawCQL = `/* ledger.withdraw */ DELETE FROM write_requests_by_id
		WHERE tenant = ? AND operation = ? AND request_id = ? IF state = 'PENDING' AND claim_token = ?`
	// The cluster's clock, for entries an operator's machine schedules.
	clusterNowCQL = `/* ledger.cluster-now */ SELECT toTimestamp(now()) FROM system.local`
)

// MinRetention and MaxRetention bound Config.Retention: the range
// NewCassandraStore (and the in-memory fake) accept, which orderd checks
// before it connects.
const (
	MinRetention = time.Minute
	MaxRetention = 10 * 365 * 24 * time.Hour
)

// Config tunes the Cassandra store.
type Config struct {
	// Retention is how long a request is remembered after its claim; a retry
	// after that claims afresh (and finds the order its first claim wrote:
	// see workflow.Finish). Default 7 days; MinRetention to MaxRetention.
	Retention time.Duration
	// SettleAttempts bounds the LOCAL_SERIAL reads used to settle one unknown
	// outcome, and the resends of a conditional update that settled as not
	// applied; default 3.
	SettleAttempts int
	// DueAfter is how long after its claim a request's due entry falls due,
	// i.e. when a reconciler may presume it abandoned. It must exceed the
	// handler's deadline; default 30 s. It is the only such setting: the
	// reconciler acts on entries when they fall due.
	DueAfter time.Duration
	// ReleaseWindow is how long a Release may wait for other releases of
	// its due-queue partition to share one write with (groupcommit.go);
	// default 1 s, negative for none (every Release writes at once).
	ReleaseWindow time.Duration
	// EntriesAlone: every claim's due entry, and every RemoveEntry, is a
	// request of its own instead of sharing a write with the concurrent
	// ones of its partition (groupcommit.go). Only orderbench's baseline,
	// the plan before the one-LWT claim, sets it.
	EntriesAlone bool
	// ReadsAlone: every Peek is a query of its own instead of sharing one
	// with the concurrent Peeks of its tenant and operation
	// (groupcommit.go). Only benchmarks' baselines set it.
	ReadsAlone bool
	// ClaimCommitAny: the claim's Paxos commit runs at ANY instead of
	// LOCAL_QUORUM. The claim is answered once its proposal is accepted by a
	// quorum, and the commit is sent without waiting for it: one round trip
	// less (docs/architecture.md, "Claim commit at ANY"). Safe only on a
	// cluster whose every node runs paxos_state_purging: repaired with paxos
	// repair (cassandra.CheckAnyCommit). Until the commit lands, a
	// LOCAL_QUORUM read may not see the claim, so every reader confirms a
	// missing row at the serial level (Read).
	ClaimCommitAny bool
	// OnSettle, if set, is told how every write with an unknown outcome was
	// settled (for logs and metrics); cause is the error that made it unknown.
	OnSettle func(op string, outcome SettleOutcome, cause error)
	// Now is this process's clock; default time.Now (tests skew it).
	Now func() time.Time
}

// SettleOutcome is what the LOCAL_SERIAL read found after an unknown outcome.
type SettleOutcome string

const (
	SettledApplied    SettleOutcome = "applied"     // the write had applied
	SettledNotApplied SettleOutcome = "not_applied" // it had not (or another attempt's had)
	Unsettled         SettleOutcome = "unsettled"   // the read failed too: the caller answers OUTCOME_UNKNOWN
)

// CassandraStore is the Store (and the due queue) on a Cassandra session
// whose keyspace holds write_requests_by_id and pending_requests.
type CassandraStore struct {
	s        cassandra.Session
	cfg      Config
	now      func() time.Time
	entries  *groupCommit // claims' entries: no window
	removals *groupCommit // RemoveEntry: no window
	releases *groupCommit // releases: ReleaseWindow
	peeks    *groupcommit.Committer[peekGroup, *peek]
}

var _ Store = (*CassandraStore)(nil)

// NewCassandraStore validates cfg and returns a store on s.
func NewCassandraStore(s cassandra.Session, cfg Config) (*CassandraStore, error) {
	if cfg.Retention == 0 {
		cfg.Retention = 7 * 24 * time.Hour
	}
	if cfg.Retention < MinRetention || cfg.Retention > MaxRetention {
		return nil, fmt.Errorf("ledger retention %s: must be between 1m and 10 years", cfg.Retention)
	}
	if cfg.SettleAttempts == 0 {
		cfg.SettleAttempts = 3
	}
	if cfg.DueAfter == 0 {
		cfg.DueAfter = 30 * time.Second
	}
	if cfg.OnSettle == nil {
		cfg.OnSettle = func(string, SettleOutcome, error) {}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	switch {
	case cfg.ReleaseWindow == 0:
		cfg.ReleaseWindow = time.Second
	case cfg.ReleaseWindow < 0:
		cfg.ReleaseWindow = 0
	}
	c := &CassandraStore{s: s, cfg: cfg, now: cfg.Now}
	perBatch := maxBatch
	if cfg.EntriesAlone {
		perBatch = 1
	}
	c.entries = newGroupCommit(0, perBatch, c.enqueueEntries)
	c.removals = newGroupCommit(0, perBatch, c.removeEntries)
	c.releases = newGroupCommit(cfg.ReleaseWindow, maxBatch, c.removeEntries)
	perRead := maxReads
	if cfg.ReadsAlone {
		perRead = 1
	}
	c.peeks = newGroupRead(perRead, c.peekMany)
	return c, nil
}

// DueAfter is how long after its claim a request falls due.
func (c *CassandraStore) DueAfter() time.Duration { return c.cfg.DueAfter }

// ttl is the whole seconds left until rec's expiry instant, rounded down so
// that no write ever extends the row past it (at least 1: a row written in
// its last second expires with it).
func (c *CassandraStore) ttl(rec Record) int { return c.ttlFrom(rec.CreatedAt) }

// ttlFrom is ttl for a row of a request claimed at created.
func (c *CassandraStore) ttlFrom(created time.Time) int {
	left := created.Add(c.cfg.Retention).Sub(c.now())
	return max(1, int(math.Floor(left.Seconds())))
}

func claimArgs(rec Record) []any {
	return []any{rec.EntityID.String(), rec.Fingerprint, rec.Command, rec.CreatedAt, rec.ClaimToken.String()}
}

func keyArgs(k Key) []any { return []any{k.Tenant, k.Operation, k.RequestID.String()} }

// args concatenates bind values.
func args(parts ...[]any) []any {
	var out []any
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// Claim implements Store.
func (c *CassandraStore) Claim(ctx context.Context, rec Record, check func(context.Context) error) (bool, Record, error) {
	rec.State, rec.Attempts = Pending, 0
	entry := c.entryFor(rec)
	// The entry shares a write with the other claims' entries of its
	// partition (groupcommit.go), so its write is not this call's alone: a
	// client that gives up must not fail the others' entries.
	enqueue := func() error { return c.entries.Add(context.WithoutCancel(ctx), entry) }
	if err := Alongside(ctx, check, enqueue); err != nil {
		return false, Record{}, err
	}
	// The shared entry write outlives this call's context (above): a call
	// that ended meanwhile sends no claim, so no claim goes out after its
	// deadline (and so after the reconciler's grace). Its entry, if
	// written, is one without a claim.
	if err := ctx.Err(); err != nil {
		return false, Record{}, fault.New(fault.ReasonClusterUnavailable, fmt.Errorf("claim not sent: %w", err))
	}
	won, cur, err := c.claim(ctx, rec)
	if !won && (err == nil || errors.Is(err, errRowExpiring)) {
		// Definitely not applied: the entry is this call's alone to drop.
		// Best effort: a stray entry is found and dropped by the reconciler.
		_ = c.RemoveEntry(ctx, entry)
	}
	return won, cur, err
}

// errRowExpiring: a claim did not apply because its request id's row is an
// expired remnant (expiredRemnant), gone within the second.
var errRowExpiring = errors.New("ledger row expiring")

// claimCommit is the consistency of the claim's Paxos commit.
func (c *CassandraStore) claimCommit() gocql.Consistency {
	if c.cfg.ClaimCommitAny {
		return gocql.Any
	}
	return gocql.LocalQuorum
}

func (c *CassandraStore) claim(ctx context.Context, rec Record) (bool, Record, error) {
	for attempt := 1; ; attempt++ {
		existing := map[string]any{}
		applied, err := c.s.Query(claimCQL, args(keyArgs(rec.Key),
			[]any{rec.EntityID.String(), rec.Fingerprint, rec.Command, rec.CreatedAt, rec.ClaimToken.String(), c.ttl(rec)})...,
		).Consistency(c.claimCommit()).SerialConsistency(c.s.Serial()).MapScanCASContext(ctx, existing)
		if err == nil {
			if applied {
				return true, rec, nil
			}
			if expiredRemnant(existing) {
				// Expiring within the second: claim again shortly.
				return false, Record{}, fault.New(fault.ReasonClusterUnavailable, fmt.Errorf("request %s: %w", rec.RequestID, errRowExpiring))
			}
			cur, err := fromMap(existing)
			return false, cur, err
		}
		err = cassandra.WriteError("claim request", err)
		if fault.KindOf(err) != fault.OutcomeUnknown {
			return false, Record{}, err
		}
		// The claim may have applied: the serial read settles it.
		cur, gerr := c.settle(ctx, rec.Key)
		switch {
		case gerr == nil:
			won := cur.ClaimToken == rec.ClaimToken
			c.cfg.OnSettle("claim", map[bool]SettleOutcome{true: SettledApplied, false: SettledNotApplied}[won], err)
			return won, cur, nil
		case errors.Is(gerr, ErrNotFound) && attempt < c.cfg.SettleAttempts:
			c.cfg.OnSettle("claim", SettledNotApplied, err)
			continue // definitely not applied: claim again
		case errors.Is(gerr, ErrNotFound):
			c.cfg.OnSettle("claim", SettledNotApplied, err)
			return false, Record{}, fault.New(fault.ReasonClusterUnavailable, fmt.Errorf("claim did not apply in %d tries: %w", attempt, err))
		default:
			c.cfg.OnSettle("claim", Unsettled, err)
			return false, Record{}, err
		}
	}
}

// settle reads a record at the session's serial consistency, retrying a few times: that read
// finishes or invalidates any paxos round left in flight.
func (c *CassandraStore) settle(ctx context.Context, key Key) (Record, error) {
	var err error
	for i := 0; i < c.cfg.SettleAttempts; i++ {
		var rec Record
		if rec, err = c.Get(ctx, key); err == nil || errors.Is(err, ErrNotFound) {
			return rec, err
		}
		select {
		case <-ctx.Done():
			return Record{}, err
		case <-time.After(time.Duration(i+1) * 100 * time.Millisecond):
		}
	}
	return Record{}, err
}

// Get implements Store.
func (c *CassandraStore) Get(ctx context.Context, key Key) (Record, error) {
	return c.read(ctx, key, c.s.Serial())
}

// Peek implements Store. Peeks of one tenant's and operation's requests
// that meet under load (the reconciler's, finishing a shard's due entries
// at once) share one query; each gets its own row or ErrNotFound.
func (c *CassandraStore) Peek(ctx context.Context, key Key) (Record, error) {
	p := &peek{key: key}
	if err := c.peeks.Add(ctx, p); err != nil {
		return Record{}, cassandra.ReadError("read request", err)
	}
	return p.rec, p.err
}

// peekMany reads the rows of peeks (of one tenant and operation) at
// LOCAL_QUORUM: one query, by request id or by ids. It returns an error
// only when the query failed; each peek's own outcome is on it.
func (c *CassandraStore) peekMany(ctx context.Context, peeks []*peek) error {
	if len(peeks) == 1 {
		peeks[0].rec, peeks[0].err = c.read(ctx, peeks[0].key, gocql.LocalQuorum)
		return nil
	}
	byID := make(map[uuid.UUID][]*peek, len(peeks))
	ids := make([]string, 0, len(peeks))
	for _, p := range peeks {
		if byID[p.key.RequestID] == nil {
			ids = append(ids, p.key.RequestID.String())
		}
		byID[p.key.RequestID] = append(byID[p.key.RequestID], p)
		p.err = ErrNotFound // until its row comes
	}
	k := peeks[0].key
	iter := c.s.Query(selectManyCQL, k.Tenant, k.Operation, ids).Consistency(gocql.LocalQuorum).IterContext(ctx)
	for row := map[string]any{}; iter.MapScan(row); row = map[string]any{} {
		if expiredRemnant(row) {
			continue
		}
		rec, err := fromMap(row)
		for _, p := range byID[rec.RequestID] {
			p.rec, p.err = rec, err
		}
	}
	return iter.Close()
}

func (c *CassandraStore) read(ctx context.Context, key Key, cl gocql.Consistency) (Record, error) {
	row := map[string]any{}
	err := c.s.Query(selectCQL, keyArgs(key)...).Consistency(cl).MapScanContext(ctx, row)
	if errors.Is(err, gocql.ErrNotFound) {
		return Record{}, ErrNotFound
	}
	if err != nil {
		return Record{}, cassandra.ReadError("read request", err)
	}
	if expiredRemnant(row) {
		return Record{}, ErrNotFound
	}
	return fromMap(row)
}

// expiredRemnant: a row whose cells have all expired while its row marker
// (written by the claim, whose TTL is rounded apart from the later cells'
// by under a second) lives on. It is a request past its retention.
func expiredRemnant(row map[string]any) bool {
	state, _ := row["state"].(string)
	fp, _ := row["payload_hash"].(string)
	return state == "" && fp == ""
}

// update is one conditional update of a claim, with what tells from a row
// read afterwards whether it applied.
type update struct {
	op   string // for errors and OnSettle: "claim", "attempt", ...
	stmt string
	// args are the bind values, made anew for every send: a resend carries
	// the TTL left at its own time, not at the first send's.
	args func() []any
	key  Key
	// applied: the row shows the update (or an identical one) applied.
	applied func(Record) bool
	// awaits: the row is still as the update's condition wants it, so the
	// update did not apply and sending it again is safe.
	awaits func(Record) bool
}

// run sends u and returns whether it applied and, when it did not, the row
// as it now is (ErrNotFound if there is none). An unknown outcome is never
// taken as settled: a LOCAL_SERIAL read decides; a row still awaiting the
// update gets it again (bounded; then Unavailable, definitely not applied);
// a read that fails leaves the error OutcomeUnknown.
func (c *CassandraStore) run(ctx context.Context, u update) (bool, Record, error) {
	for attempt := 1; ; attempt++ {
		applied, err := c.s.Query(u.stmt, u.args()...).SerialConsistency(c.s.Serial()).MapScanCASContext(ctx, map[string]any{})
		if err == nil && applied {
			return true, Record{}, nil
		}
		if err == nil {
			// The IF clause returned only the columns it tested: read the
			// row. LOCAL_QUORUM is enough: the round that found the
			// condition false first committed any round in flight at
			// quorum, and a serial read would only queue behind the
			// finishers racing on this row (contention timeouts).
			cur, err := c.Peek(ctx, u.key)
			return false, cur, err
		}
		err = cassandra.WriteError(u.op+" request", err)
		if fault.KindOf(err) != fault.OutcomeUnknown {
			return false, Record{}, err
		}
		cur, gerr := c.settle(ctx, u.key)
		switch {
		case gerr != nil && !errors.Is(gerr, ErrNotFound):
			c.cfg.OnSettle(u.op, Unsettled, err)
			return false, Record{}, err
		case gerr == nil && u.applied(cur):
			c.cfg.OnSettle(u.op, SettledApplied, err)
			return true, cur, nil
		case gerr == nil && u.awaits(cur) && attempt < c.cfg.SettleAttempts:
			c.cfg.OnSettle(u.op, SettledNotApplied, err)
			continue
		case gerr == nil && u.awaits(cur):
			c.cfg.OnSettle(u.op, SettledNotApplied, err)
			return false, Record{}, fault.New(fault.ReasonClusterUnavailable, fmt.Errorf("%s did not apply in %d tries: %w", u.op, attempt, err))
		default:
			c.cfg.OnSettle(u.op, SettledNotApplied, err)
			return false, cur, gerr
		}
	}
}

// pendingClaim: the row is rec's claim, still PENDING.
func pendingClaim(rec Record) func(Record) bool {
	return func(cur Record) bool { return cur.State == Pending && cur.ClaimToken == rec.ClaimToken }
}

// Release implements Store. It may wait up to ReleaseWindow to share one
// write with the other releases of the entry's partition (groupcommit.go).
func (c *CassandraStore) Release(ctx context.Context, rec Record) error {
	return c.releases.Add(ctx, c.entryFor(rec))
}

// RecordAttempt implements Store.
func (c *CassandraStore) RecordAttempt(ctx context.Context, rec Record, reason string) error {
	_, _, err := c.run(ctx, update{
		op:   "attempt",
		stmt: attemptCQL,
		args: func() []any {
			return args([]any{c.ttl(rec)}, claimArgs(rec), []any{rec.Attempts + 1, reason},
				keyArgs(rec.Key), []any{rec.ClaimToken.String(), rec.Attempts})
		},
		key: rec.Key,
		applied: func(cur Record) bool {
			return cur.ClaimToken == rec.ClaimToken && cur.Attempts > rec.Attempts
		},
		awaits: func(cur Record) bool { return pendingClaim(rec)(cur) && cur.Attempts == rec.Attempts },
	})
	if errors.Is(err, ErrNotFound) {
		return nil // gone: nothing to note
	}
	return err
}

// MarkFailed moves rec's claim from PENDING to FAILED (the dead letter) with
// the reason that ended its last attempt, and returns the record as it now
// is. The caller must only do so when nothing of the work was written (see
// ErrUnfinishable). An outcome it cannot settle is an error, never a record.
func (c *CassandraStore) MarkFailed(ctx context.Context, rec Record, reason string) (Record, error) {
	at := c.now().UTC().Truncate(time.Millisecond)
	failed := rec
	failed.State, failed.LastError, failed.CompletedAt, failed.Attempts = Failed, reason, at, rec.Attempts+1
	applied, cur, err := c.run(ctx, update{
		op:   "fail",
		stmt: failCQL,
		args: func() []any {
			return args([]any{c.ttl(rec)}, claimArgs(rec), []any{failed.Attempts, reason, at},
				keyArgs(rec.Key), []any{rec.ClaimToken.String()})
		},
		key:     rec.Key,
		applied: func(cur Record) bool { return cur.State == Failed && cur.ClaimToken == rec.ClaimToken },
		awaits:  pendingClaim(rec),
	})
	switch {
	case err != nil:
		return Record{}, err
	case applied && cur.State == Failed:
		return cur, nil
	case applied:
		return failed, nil
	}
	return cur, nil
}

// Complete implements Store.
func (c *CassandraStore) Complete(ctx context.Context, rec Record, outcome []byte) (Record, error) {
	done := rec
	done.State, done.Outcome, done.CompletedAt = Complete, outcome, c.now().UTC().Truncate(time.Millisecond)
	applied, cur, err := c.run(ctx, update{
		op:   "complete",
		stmt: completeCQL,
		args: func() []any {
			return args([]any{c.ttl(rec)}, claimArgs(rec), []any{rec.Attempts, nullable(rec.LastError), done.CompletedAt, outcome},
				keyArgs(rec.Key), []any{rec.ClaimToken.String()})
		},
		key:     rec.Key,
		applied: func(cur Record) bool { return cur.State == Complete && cur.ClaimToken == rec.ClaimToken },
		awaits:  pendingClaim(rec),
	})
	switch {
	case err != nil:
		return Record{}, err
	case applied && cur.State == Complete:
		return cur, nil
	case applied:
		return done, nil
	}
	return cur, nil
}

// Withdraw implements Store.
func (c *CassandraStore) Withdraw(ctx context.Context, rec Record) (Record, error) {
	applied, cur, err := c.run(ctx, update{
		op:   "withdraw",
		stmt: withdrawCQL,
		args: func() []any {
			return args(keyArgs(rec.Key), []any{rec.ClaimToken.String()})
		},
		key:     rec.Key,
		applied: func(Record) bool { return false }, // a row read back is never our delete
		awaits:  pendingClaim(rec),
	})
	if err == nil && applied || errors.Is(err, ErrNotFound) {
		_ = c.RemoveEntry(ctx, c.entryFor(rec))
		return Record{}, ErrNotFound
	}
	return cur, err
}

// Requeue gives a FAILED request another round of attempts: it becomes
// PENDING with attempts = 0 and due entries due RequeueLead after now by
// the cluster's clock. It returns the record as it now is.
//
// It writes two entries (docs/reconciler.md "Finishing, retries and the
// dead letter", model/README.md finding 1):
//   - one before the LWT, as a claim writes its entry before the claim, so
//     a requeue interrupted between its writes leaves at worst an entry the
//     reconciler drops;
//   - one after the LWT, in another row. A reconciler that reads the first
//     entry before the LWT finds the request FAILED and removes that entry,
//     and its removal may land after the LWT: without the second entry the
//     request would be PENDING with nothing to find it. Whoever reads the
//     second entry reads the ledger after the LWT.
//
// A request already PENDING gets both entries too (another requeue may be
// mid-way).
func (c *CassandraStore) Requeue(ctx context.Context, key Key) (Record, error) {
	rec, err := c.Get(ctx, key)
	if err != nil {
		return Record{}, err
	}
	if rec.State == Complete {
		return rec, nil
	}
	now, err := c.clusterNow(ctx)
	if err != nil {
		return Record{}, err
	}
	before, after := RequeueEntries(c.entryFor(rec), now)
	if err := c.enqueue(ctx, before); err != nil {
		return Record{}, err
	}
	if rec.State == Failed {
		if rec, err = c.requeue(ctx, rec); err != nil || rec.State != Pending {
			return rec, err
		}
	}
	if err := c.enqueue(ctx, after); err != nil {
		return Record{}, fmt.Errorf("request %s is PENDING again, but its entry could not be written (run requeue again): %w", rec.RequestID, err)
	}
	return rec, nil
}

// RequeueEntries are the two entries Requeue writes for claim's entry
// claim, at the cluster's time now: due RequeueLead later, and one
// millisecond after that (another row of the same minute or the next).
func RequeueEntries(claim DueEntry, now time.Time) (before, after DueEntry) {
	due := now.Add(RequeueLead).Truncate(time.Millisecond)
	before, after = claim, claim
	before.Due, before.NotBefore = BucketOf(due), due
	after.Due, after.NotBefore = BucketOf(due.Add(time.Millisecond)), due.Add(time.Millisecond)
	return before, after
}

// requeue is Requeue's LWT: FAILED → PENDING, attempts 0.
func (c *CassandraStore) requeue(ctx context.Context, rec Record) (Record, error) {
	applied, cur, err := c.run(ctx, update{
		op:   "requeue",
		stmt: requeueCQL,
		args: func() []any {
			return args([]any{c.ttl(rec)}, claimArgs(rec), []any{nullable(rec.LastError)},
				keyArgs(rec.Key), []any{rec.ClaimToken.String()})
		},
		key:     rec.Key,
		applied: func(cur Record) bool { return cur.State == Pending && cur.ClaimToken == rec.ClaimToken },
		awaits:  func(cur Record) bool { return cur.State == Failed && cur.ClaimToken == rec.ClaimToken },
	})
	switch {
	case err != nil:
		return Record{}, err
	case applied && cur.State == Pending:
		return cur, nil
	case applied:
		rec.State, rec.Attempts, rec.CompletedAt = Pending, 0, time.Time{}
		return rec, nil
	}
	return cur, nil
}

// clusterNow is the time by the clock of the node that coordinates the
// read: entries scheduled from an operator's machine must not depend on
// its clock (a lagging one would date them before the reconciler's cursor).
func (c *CassandraStore) clusterNow(ctx context.Context) (time.Time, error) {
	var now time.Time
	if err := c.s.Query(clusterNowCQL).ScanContext(ctx, &now); err != nil {
		return time.Time{}, cassandra.ReadError("read the cluster's clock", err)
	}
	return now.UTC(), nil
}

// nullable binds "" as null (no cell) rather than an empty string.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func fromMap(m map[string]any) (Record, error) {
	var r Record
	var err error
	str := func(k string) string { s, _ := m[k].(string); return s }
	id := func(k string) uuid.UUID {
		switch v := m[k].(type) {
		case gocql.UUID:
			return uuid.UUID(v)
		case string:
			u, perr := uuid.Parse(v)
			if perr != nil && err == nil {
				err = fmt.Errorf("ledger column %s: %w", k, perr)
			}
			return u
		}
		return uuid.Nil
	}
	tm := func(k string) time.Time { t, _ := m[k].(time.Time); return t.UTC() }
	r.Tenant, r.Operation = str("tenant"), str("operation")
	r.RequestID, r.EntityID, r.ClaimToken = id("request_id"), id("entity_id"), id("claim_token")
	r.Fingerprint, r.State, r.LastError = str("payload_hash"), State(str("state")), str("last_error")
	r.Command, _ = m["command"].([]byte)
	r.Outcome, _ = m["outcome"].([]byte)
	r.CreatedAt, r.CompletedAt = tm("created_at"), tm("completed_at")
	if r.CompletedAt.Unix() <= 0 {
		r.CompletedAt = time.Time{}
	}
	r.Attempts, _ = m["attempts"].(int)
	if err == nil && (r.State == "" || r.Fingerprint == "") {
		err = fmt.Errorf("ledger row %s without a state or fingerprint", r.RequestID)
	}
	return r, err
}
