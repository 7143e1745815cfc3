package ledger

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/platform/groupcommit"
	"github.com/atlasmart/orderd/internal/platform/lwt"
)

// MinRetention and MaxRetention bound Config.Retention: the range New
// accepts, which orderd checks before it connects.
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

// SettleOutcome is what the serial read found after an unknown outcome.
type SettleOutcome = lwt.Outcome

const (
	SettledApplied    = lwt.SettledApplied    // the write had applied
	SettledNotApplied = lwt.SettledNotApplied // it had not (or another attempt's had)
	Unsettled         = lwt.Unsettled         // the read failed too: the caller answers OUTCOME_UNKNOWN
)

// Ledger is the Store (and the due queue): the ledger's protocol on a
// Table, which is Cassandra in production (NewCassandraStore).
type Ledger struct {
	t        Table
	cfg      Config
	now      func() time.Time
	entries  *groupCommit // claims' entries: no window
	removals *groupCommit // RemoveEntry: no window
	releases *groupCommit // releases: ReleaseWindow
	peeks    *groupcommit.Committer[peekGroup, *peek]
}

var _ Store = (*Ledger)(nil)

// NewCassandraStore validates cfg and returns the ledger on s.
func NewCassandraStore(s cassandra.Session, cfg Config) (*Ledger, error) {
	return New(NewCQLTable(s), cfg)
}

// New validates cfg and returns the ledger on t.
func New(t Table, cfg Config) (*Ledger, error) { return newLedger(t, cfg, maxBatch, maxReads) }

// Alone names the writes and reads a baseline ledger (NewBaseline) sends
// each as a request of its own, instead of sharing one with the concurrent
// ones of its partition (groupcommit.go).
type Alone struct {
	Entries bool // every claim's due entry and every RemoveEntry
	Reads   bool // every Peek
}

// NewBaseline is New with the grouping that alone turns off: the plans
// before grouped writes and reads, which orderbench and the reconciler's
// benchmark measure the service against. orderd never runs one.
func NewBaseline(t Table, cfg Config, alone Alone) (*Ledger, error) {
	perBatch, perRead := maxBatch, maxReads
	if alone.Entries {
		perBatch = 1
	}
	if alone.Reads {
		perRead = 1
	}
	return newLedger(t, cfg, perBatch, perRead)
}

func newLedger(t Table, cfg Config, perBatch, perRead int) (*Ledger, error) {
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
	c := &Ledger{t: t, cfg: cfg, now: cfg.Now}
	c.entries = newGroupCommit(0, perBatch, c.enqueueEntries)
	c.removals = newGroupCommit(0, perBatch, c.removeEntries)
	c.releases = newGroupCommit(cfg.ReleaseWindow, maxBatch, c.removeEntries)
	c.peeks = newGroupRead(perRead, c.peekMany)
	return c, nil
}

// DueAfter is how long after its claim a request falls due.
func (c *Ledger) DueAfter() time.Duration { return c.cfg.DueAfter }

// ttl is the whole seconds left until rec's expiry instant, rounded down so
// that no write ever extends the row past it (at least 1: a row written in
// its last second expires with it).
func (c *Ledger) ttl(rec Record) int { return c.ttlFrom(rec.CreatedAt) }

// Retention is how long a request is remembered after its claim.
func (c *Ledger) Retention() time.Duration { return c.cfg.Retention }

// TTLFrom is the TTL (whole seconds) a write now gives a row of a request
// claimed at created.
func (c *Ledger) TTLFrom(created time.Time) int { return c.ttlFrom(created) }

// ttlFrom is ttl for a row of a request claimed at created.
func (c *Ledger) ttlFrom(created time.Time) int {
	left := created.Add(c.cfg.Retention).Sub(c.now())
	return max(1, int(math.Floor(left.Seconds())))
}

// Claim implements Store.
func (c *Ledger) Claim(ctx context.Context, rec Record, check func(context.Context) error) (bool, Record, error) {
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
// expired remnant (Remnant), gone within the second.
var errRowExpiring = errors.New("ledger row expiring")

func (c *Ledger) claim(ctx context.Context, rec Record) (bool, Record, error) {
	res, err := lwt.Do(ctx, lwt.Write[row]{
		Op: "claim",
		Send: func(ctx context.Context) (bool, row, error) {
			applied, cur, err := c.t.InsertClaim(ctx, rec, c.ttl(rec), c.cfg.ClaimCommitAny)
			switch {
			case err != nil || applied:
				return applied, row{}, err
			case Remnant(cur):
				// Expiring within the second: claim again shortly.
				return false, row{}, fault.New(fault.ReasonClusterUnavailable, fmt.Errorf("request %s: %w", rec.RequestID, errRowExpiring))
			}
			return false, row{cur, true}, nil
		},
		Read:    func(ctx context.Context) (row, error) { return c.settle(ctx, rec.Key) },
		Applied: func(r row) bool { return r.found && r.rec.ClaimToken == rec.ClaimToken },
		Awaits:  func(r row) bool { return !r.found }, // definitely not applied: claim again
		Sends:   c.cfg.SettleAttempts,
		Observe: c.cfg.OnSettle,
	})
	switch {
	case err != nil:
		return false, Record{}, err
	case res.Applied && res.Settled:
		return true, res.State.rec, nil
	case res.Applied:
		return true, rec, nil
	}
	return false, res.State.rec, nil
}

// row is a ledger row as a read found it: found is false when there is none.
type row struct {
	rec   Record
	found bool
}

// settle reads a record at the session's serial consistency, retrying a
// few times: that read finishes or invalidates any Paxos round left in
// flight. A missing row is found false, not an error.
func (c *Ledger) settle(ctx context.Context, key Key) (row, error) {
	var err error
	for i := 0; i < c.cfg.SettleAttempts; i++ {
		var rec Record
		rec, err = c.Get(ctx, key)
		switch {
		case err == nil:
			return row{rec, true}, nil
		case errors.Is(err, ErrNotFound):
			return row{}, nil
		}
		select {
		case <-ctx.Done():
			return row{}, err
		case <-time.After(time.Duration(i+1) * 100 * time.Millisecond):
		}
	}
	return row{}, err
}

// Get implements Store.
func (c *Ledger) Get(ctx context.Context, key Key) (Record, error) {
	return c.t.Read(ctx, key, true)
}

// Peek implements Store. Peeks of one tenant's and operation's requests
// that meet under load (the reconciler's, finishing a shard's due entries
// at once) share one query; each gets its own row or ErrNotFound.
func (c *Ledger) Peek(ctx context.Context, key Key) (Record, error) {
	p := &peek{key: key}
	err := c.peeks.Add(ctx, p)
	if _, converted := fault.As(err); err != nil && !converted {
		// The table's errors come converted; this is the caller's own
		// context, ended while the read was under way.
		err = cassandra.ReadError("read request", err)
	}
	if err != nil {
		return Record{}, err
	}
	return p.rec, p.err
}

// peekMany reads the rows of peeks (of one tenant and operation) at
// LOCAL_QUORUM: one query, by request id or by ids. It returns an error
// only when the query failed; each peek's own outcome is on it.
func (c *Ledger) peekMany(ctx context.Context, peeks []*peek) error {
	if len(peeks) == 1 {
		peeks[0].rec, peeks[0].err = c.t.Read(ctx, peeks[0].key, false)
		return nil
	}
	byID := make(map[uuid.UUID][]*peek, len(peeks))
	ids := make([]uuid.UUID, 0, len(peeks))
	for _, p := range peeks {
		if byID[p.key.RequestID] == nil {
			ids = append(ids, p.key.RequestID)
		}
		byID[p.key.RequestID] = append(byID[p.key.RequestID], p)
		p.err = ErrNotFound // until its row comes
	}
	k := peeks[0].key
	rows, err := c.t.ReadMany(ctx, k.Tenant, k.Operation, ids)
	for _, rec := range rows {
		for _, p := range byID[rec.RequestID] {
			p.rec, p.err = rec, nil
		}
	}
	return err
}

// update is one conditional update of rec's claim, with what tells from a
// row read afterwards whether it applied.
type update struct {
	kind UpdateKind
	rec  Record
	// from is the state the condition wants the row in.
	from State
	// set makes, from rec, the row as the update leaves it.
	set func(*Record)
	// applied: the row shows the update (or an identical one) applied.
	applied func(Record) bool
	// awaits: the row is still as the update's condition wants it, so the
	// update did not apply and sending it again is safe.
	awaits func(Record) bool
}

// run sends u and returns whether it applied and the row as it now is:
// the one a settling read showed, or the row as u makes it when its own
// response said it applied (ErrNotFound if there is none). An unknown outcome is never
// taken as settled (lwt.Do): a serial read decides; a row still awaiting
// the update gets it again (bounded; then Unavailable, definitely not
// applied); a read that fails leaves the error OutcomeUnknown.
func (c *Ledger) run(ctx context.Context, u update) (bool, Record, error) {
	made := u.rec
	u.set(&made)
	key := u.rec.Key
	res, err := lwt.Do(ctx, lwt.Write[row]{
		Op: string(u.kind),
		Send: func(ctx context.Context) (bool, row, error) {
			// Built anew for every send: a resend carries the TTL left at
			// its own time, not at the first send's.
			applied, err := c.t.Update(ctx, Update{Kind: u.kind, Row: made, TTL: c.ttl(u.rec),
				IfState: u.from, IfToken: u.rec.ClaimToken, IfAttempts: u.rec.Attempts})
			if err != nil || applied {
				return applied, row{}, err
			}
			// The IF clause returned only the columns it tested: read the
			// row. LOCAL_QUORUM is enough: the round that found the
			// condition false first committed any round in flight at
			// quorum, and a serial read would only queue behind the
			// finishers racing on this row (contention timeouts).
			cur, err := c.Peek(ctx, key)
			if errors.Is(err, ErrNotFound) {
				return false, row{}, nil
			}
			return false, row{cur, err == nil}, err
		},
		Read:    func(ctx context.Context) (row, error) { return c.settle(ctx, key) },
		Applied: func(r row) bool { return r.found && u.applied(r.rec) },
		Awaits:  func(r row) bool { return r.found && u.awaits(r.rec) },
		Sends:   c.cfg.SettleAttempts,
		Observe: c.cfg.OnSettle,
	})
	switch {
	case err != nil:
		return false, Record{}, err
	case res.Applied && res.Settled:
		return true, res.State.rec, nil
	case res.Applied:
		return true, made, nil
	case !res.State.found:
		return false, Record{}, ErrNotFound
	}
	return false, res.State.rec, nil
}

// pendingClaim: the row is rec's claim, still PENDING.
func pendingClaim(rec Record) func(Record) bool {
	return func(cur Record) bool { return cur.State == Pending && cur.ClaimToken == rec.ClaimToken }
}

// Release implements Store. It may wait up to ReleaseWindow to share one
// write with the other releases of the entry's partition (groupcommit.go).
func (c *Ledger) Release(ctx context.Context, rec Record) error {
	return c.releases.Add(ctx, c.entryFor(rec))
}

// RecordAttempt implements Store.
func (c *Ledger) RecordAttempt(ctx context.Context, rec Record, reason string) error {
	_, _, err := c.run(ctx, update{
		kind: UpdateAttempt, rec: rec, from: Pending,
		set: func(r *Record) { r.State, r.Attempts, r.LastError = Pending, rec.Attempts+1, reason },
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
func (c *Ledger) MarkFailed(ctx context.Context, rec Record, reason string) (Record, error) {
	at := c.now().UTC().Truncate(time.Millisecond)
	_, cur, err := c.run(ctx, update{
		kind: UpdateFail, rec: rec, from: Pending,
		set: func(r *Record) {
			r.State, r.LastError, r.CompletedAt, r.Attempts = Failed, reason, at, rec.Attempts+1
		},
		applied: func(cur Record) bool { return cur.State == Failed && cur.ClaimToken == rec.ClaimToken },
		awaits:  pendingClaim(rec),
	})
	if err != nil {
		return Record{}, err
	}
	return cur, nil
}

// Complete implements Store.
func (c *Ledger) Complete(ctx context.Context, rec Record, outcome []byte) (Record, error) {
	at := c.now().UTC().Truncate(time.Millisecond)
	_, cur, err := c.run(ctx, update{
		kind: UpdateComplete, rec: rec, from: Pending,
		set:     func(r *Record) { r.State, r.Outcome, r.CompletedAt = Complete, outcome, at },
		applied: func(cur Record) bool { return cur.State == Complete && cur.ClaimToken == rec.ClaimToken },
		awaits:  pendingClaim(rec),
	})
	if err != nil {
		return Record{}, err
	}
	return cur, nil
}

// Withdraw implements Store.
func (c *Ledger) Withdraw(ctx context.Context, rec Record) (Record, error) {
	applied, cur, err := c.run(ctx, update{
		kind: UpdateWithdraw, rec: rec, from: Pending,
		set:     func(*Record) {},
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
func (c *Ledger) Requeue(ctx context.Context, key Key) (Record, error) {
	rec, err := c.Get(ctx, key)
	if err != nil {
		return Record{}, err
	}
	if rec.State == Complete {
		return rec, nil
	}
	now, err := c.t.ClusterNow(ctx)
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
func (c *Ledger) requeue(ctx context.Context, rec Record) (Record, error) {
	_, cur, err := c.run(ctx, update{
		kind: UpdateRequeue, rec: rec, from: Failed,
		set:     func(r *Record) { r.State, r.Attempts, r.CompletedAt = Pending, 0, time.Time{} },
		applied: func(cur Record) bool { return cur.State == Pending && cur.ClaimToken == rec.ClaimToken },
		awaits:  func(cur Record) bool { return cur.State == Failed && cur.ClaimToken == rec.ClaimToken },
	})
	if err != nil {
		return Record{}, err
	}
	return cur, nil
}
