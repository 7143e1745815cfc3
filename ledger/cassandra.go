package ledger

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/cassandra"
	"github.com/atlasmart/orderd/internal/failpoint"
	"github.com/atlasmart/orderd/internal/fault"
)

const (
	columns = `tenant, operation, request_id, entity_id, payload_hash, command, state,
		created_at, completed_at, outcome, attempts, last_error, claim_token`

	claimCQL = `INSERT INTO write_requests_by_id
		(tenant, operation, request_id, entity_id, payload_hash, command, state, created_at, attempts, claim_token)
		VALUES (?, ?, ?, ?, ?, ?, 'PENDING', ?, ?, ?) IF NOT EXISTS USING TTL ?`
	selectCQL = `SELECT ` + columns + ` FROM write_requests_by_id
		WHERE tenant = ? AND operation = ? AND request_id = ?`
	completeCQL = `UPDATE write_requests_by_id USING TTL ?
		SET state = 'COMPLETE', completed_at = ?, outcome = ?
		WHERE tenant = ? AND operation = ? AND request_id = ? IF state = 'PENDING'`
	attemptCQL = `UPDATE write_requests_by_id USING TTL ?
		SET attempts = ?, last_error = ?
		WHERE tenant = ? AND operation = ? AND request_id = ? IF state = 'PENDING' AND attempts = ?`
	failCQL = `UPDATE write_requests_by_id USING TTL ?
		SET state = 'FAILED', last_error = ?
		WHERE tenant = ? AND operation = ? AND request_id = ? IF state = 'PENDING'`
	requeueCQL = `UPDATE write_requests_by_id USING TTL ?
		SET state = 'PENDING', attempts = 1
		WHERE tenant = ? AND operation = ? AND request_id = ? IF state = 'FAILED'`
)

// Config tunes the Cassandra store.
type Config struct {
	// Retention is how long a request is remembered after its claim; a retry
	// after that is a new request (the order id stays the same, so the order
	// itself is not duplicated). Default 7 days.
	Retention time.Duration
	// SettleAttempts bounds the LOCAL_SERIAL reads used to settle one unknown
	// outcome; default 3.
	SettleAttempts int
	// DueAfter is how long after its claim a request's due-queue entry falls
	// due, i.e. when a reconciler may presume it abandoned. It must exceed the
	// handler's deadline; default 30 s.
	DueAfter time.Duration
	// OnSettle, if set, is told how every write with an unknown outcome was
	// settled (for logs and metrics); cause is the error that made it unknown.
	OnSettle func(op string, outcome SettleOutcome, cause error)
	// Failpoints may arm FailpointClaimResponseLost; nil in production.
	Failpoints *failpoint.Set
}

// SettleOutcome is what the LOCAL_SERIAL read found after an unknown outcome.
type SettleOutcome string

const (
	SettledApplied    SettleOutcome = "applied"     // the write had applied
	SettledNotApplied SettleOutcome = "not_applied" // it had not (or another attempt's had)
	Unsettled         SettleOutcome = "unsettled"   // the read failed too: the caller answers OUTCOME_UNKNOWN
)

// FailpointClaimResponseLost makes an applied claim look like a timeout, so
// the serial read that settles unknown outcomes can be tested for real.
const FailpointClaimResponseLost = "claim-response-lost"

// CassandraStore is the Store on a Cassandra session whose keyspace holds
// write_requests_by_id.
type CassandraStore struct {
	s   *gocql.Session
	cfg Config
	now func() time.Time
}

var _ Store = (*CassandraStore)(nil)

// NewCassandraStore validates cfg and returns a store on s.
func NewCassandraStore(s *gocql.Session, cfg Config) (*CassandraStore, error) {
	if cfg.Retention == 0 {
		cfg.Retention = 7 * 24 * time.Hour
	}
	if cfg.Retention < time.Minute || cfg.Retention > 10*365*24*time.Hour {
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
	return &CassandraStore{s: s, cfg: cfg, now: time.Now}, nil
}

// ttl is the retention left for a record created at created, in seconds:
// every write carries it so no cell outlives the row.
func (c *CassandraStore) ttl(created time.Time) int {
	left := created.Add(c.cfg.Retention).Sub(c.now())
	return max(1, int(math.Ceil(left.Seconds())))
}

// Claim implements Store.
//
// Before the LWT it writes the attempt's due-queue entry, so that a crash
// right after the claim still leaves the request findable; an attempt that
// loses the claim deletes its entry again.
func (c *CassandraStore) Claim(ctx context.Context, rec Record) (bool, Record, error) {
	entry := c.entryFor(rec)
	if err := c.enqueue(ctx, entry); err != nil {
		return false, Record{}, err
	}
	won, cur, err := c.claim(ctx, rec)
	if err == nil && !won {
		// Best effort: a stray entry is found and dropped by the reconciler.
		_ = c.RemoveEntry(ctx, entry)
	}
	return won, cur, err
}

func (c *CassandraStore) claim(ctx context.Context, rec Record) (bool, Record, error) {
	for attempt := 1; ; attempt++ {
		existing := map[string]any{}
		applied, err := c.s.Query(claimCQL,
			rec.Tenant, rec.Operation, rec.RequestID.String(), rec.EntityID.String(), rec.Fingerprint, rec.Command,
			rec.CreatedAt, rec.Attempts, rec.ClaimToken.String(), c.ttl(rec.CreatedAt),
		).MapScanCASContext(ctx, existing)
		if err == nil && applied {
			// Tests make the response of an applied claim go missing here.
			if ferr := c.cfg.Failpoints.Eval(FailpointClaimResponseLost); ferr != nil {
				err = &fault.Error{Kind: fault.OutcomeUnknown, Reason: "OUTCOME_UNKNOWN", Message: "claim response lost", Cause: ferr}
			}
		}
		if err == nil {
			if applied {
				rec.State = Pending
				return true, rec, nil
			}
			cur, err := fromMap(existing)
			return false, cur, err
		}
		if _, known := fault.As(err); !known {
			err = cassandra.WriteError("claim request", err)
		}
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
		default:
			c.cfg.OnSettle("claim", Unsettled, err)
			return false, Record{}, err
		}
	}
}

// settle reads a record at LOCAL_SERIAL, retrying a few times: that read
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
	return c.read(ctx, key, gocql.LocalSerial)
}

// Peek implements Store.
func (c *CassandraStore) Peek(ctx context.Context, key Key) (Record, error) {
	return c.read(ctx, key, gocql.LocalQuorum)
}

func (c *CassandraStore) read(ctx context.Context, key Key, cl gocql.Consistency) (Record, error) {
	row := map[string]any{}
	err := c.s.Query(selectCQL, key.Tenant, key.Operation, key.RequestID.String()).Consistency(cl).MapScanContext(ctx, row)
	if errors.Is(err, gocql.ErrNotFound) {
		return Record{}, ErrNotFound
	}
	if err != nil {
		return Record{}, cassandra.ReadError("read request", err)
	}
	return fromMap(row)
}

// Complete implements Store. An unknown outcome is settled by a
// LOCAL_SERIAL read; if that shows the request still PENDING, the update
// definitely did not apply and is sent again (it is conditional, so
// repeating it is safe), a bounded number of times.
func (c *CassandraStore) Complete(ctx context.Context, rec Record, outcome []byte, at time.Time) (Record, error) {
	for attempt := 1; ; attempt++ {
		cur := map[string]any{}
		applied, err := c.s.Query(completeCQL, c.ttl(rec.CreatedAt), at, outcome,
			rec.Tenant, rec.Operation, rec.RequestID.String()).MapScanCASContext(ctx, cur)
		if err == nil && applied {
			rec.State, rec.CompletedAt, rec.Outcome = Complete, at, outcome
			// Best effort: the claimer's entry is settled; a leftover is
			// dropped by the reconciler when it falls due.
			_ = c.RemoveEntry(ctx, c.entryFor(rec))
			return rec, nil
		}
		if err == nil {
			// Not PENDING any more (completed by a racing attempt, or gone):
			// the IF clause returned only the state, so read the whole row.
			return c.Get(ctx, rec.Key)
		}
		err = cassandra.WriteError("complete request", err)
		if fault.KindOf(err) != fault.OutcomeUnknown {
			return Record{}, err
		}
		now, gerr := c.settle(ctx, rec.Key)
		switch {
		case gerr != nil:
			c.cfg.OnSettle("complete", Unsettled, err)
			return Record{}, err
		case now.State == Complete:
			c.cfg.OnSettle("complete", SettledApplied, err)
			return now, nil
		case now.State == Pending && attempt < c.cfg.SettleAttempts:
			c.cfg.OnSettle("complete", SettledNotApplied, err)
			continue
		case now.State == Pending:
			c.cfg.OnSettle("complete", SettledNotApplied, err)
			return Record{}, &fault.Error{Kind: fault.Unavailable, Reason: "CLUSTER_UNAVAILABLE", RetryAfter: time.Second,
				Message: "the database is unavailable; retry with the same request_id", Cause: err}
		default:
			return now, nil
		}
	}
}

// MarkFailed moves a PENDING request to FAILED (the dead letter) with the
// error that ended its last attempt, and returns the record as it now is.
func (c *CassandraStore) MarkFailed(ctx context.Context, rec Record, lastErr string) (Record, error) {
	applied, err := c.s.Query(failCQL, c.ttl(rec.CreatedAt), lastErr,
		rec.Tenant, rec.Operation, rec.RequestID.String()).MapScanCASContext(ctx, map[string]any{})
	if err != nil {
		err = cassandra.WriteError("mark request failed", err)
		if now, gerr := c.settle(ctx, rec.Key); gerr == nil {
			return now, nil
		}
		return Record{}, err
	}
	if applied {
		rec.State, rec.LastError = Failed, lastErr
		return rec, nil
	}
	return c.Get(ctx, rec.Key)
}

// Requeue gives a FAILED request another round of attempts: it becomes
// PENDING with attempts = 1 and a due-queue entry due now. A request that is
// already PENDING only gets the entry (so a requeue interrupted between its
// two writes can simply be run again). It returns the record as it now is.
func (c *CassandraStore) Requeue(ctx context.Context, key Key) (Record, error) {
	rec, err := c.Get(ctx, key)
	if err != nil {
		return Record{}, err
	}
	if rec.State == Failed {
		// Applied or not (another requeue won), the row read back says what
		// the request is now.
		if _, err := c.s.Query(requeueCQL, c.ttl(rec.CreatedAt),
			key.Tenant, key.Operation, key.RequestID.String()).MapScanCASContext(ctx, map[string]any{}); err != nil {
			return Record{}, cassandra.WriteError("requeue request", err)
		}
		if rec, err = c.Get(ctx, key); err != nil {
			return Record{}, err
		}
	}
	if rec.State != Pending {
		return rec, nil
	}
	e := c.entryFor(rec)
	e.Due, e.NotBefore = BucketOf(c.now()), c.now()
	return rec, c.enqueue(ctx, e)
}

// RecordAttempt implements Store.
func (c *CassandraStore) RecordAttempt(ctx context.Context, rec Record, lastErr string) error {
	_, err := c.s.Query(attemptCQL, c.ttl(rec.CreatedAt), rec.Attempts+1, lastErr,
		rec.Tenant, rec.Operation, rec.RequestID.String(), rec.Attempts).MapScanCASContext(ctx, map[string]any{})
	return cassandra.WriteError("record attempt", err)
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
	if err == nil && r.State == "" {
		err = errors.New("ledger row without a state")
	}
	return r, err
}
