package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
)

// The statements, by the names they give themselves in a leading comment
// (cassandra.StatementName): what a FaultSession and the in-memory table
// serve faults by, and what traces and metrics call them.
const (
	StmtClaim      cassandra.Stmt = "ledger.claim"
	StmtGet        cassandra.Stmt = "ledger.get" // Get, Peek (one row or many), and every settling read
	StmtAttempt    cassandra.Stmt = "ledger.attempt"
	StmtFail       cassandra.Stmt = "ledger.fail"
	StmtComplete   cassandra.Stmt = "ledger.complete"
	StmtRequeue    cassandra.Stmt = "ledger.requeue"
	StmtWithdraw   cassandra.Stmt = "ledger.withdraw"
	StmtClusterNow cassandra.Stmt = "ledger.cluster-now"
	StmtScan       cassandra.Stmt = "ledger.scan"
	StmtEnqueue    cassandra.Stmt = "queue.enqueue"
	StmtRemove     cassandra.Stmt = "queue.remove"
	StmtDue        cassandra.Stmt = "queue.due"
	StmtDropBucket cassandra.Stmt = "queue.drop-bucket"
)

// Statements names every statement the ledger runs.
var Statements = []cassandra.Stmt{StmtClaim, StmtGet, StmtAttempt, StmtFail, StmtComplete, StmtRequeue, StmtWithdraw, StmtClusterNow, StmtScan, StmtEnqueue, StmtRemove, StmtDue, StmtDropBucket}

// UpdateStatement is the statement of an update of kind.
func UpdateStatement(kind UpdateKind) cassandra.Stmt { return cassandra.Stmt("ledger." + string(kind)) }

// Every write rewrites every cell of the row that can hold a value, with one
// TTL: the time left until the claim's expiry instant (Record.ExpiresAt).
// So all cells of a row always expire together; a row can never be left
// with a state but no fingerprint, or a fingerprint but no state.
// Every conditional update also names the claim it belongs to
// (claim_token), so a finisher holding a record of an earlier claim of the
// same request id (expired since and claimed afresh) cannot change the new one.
const (
	columns = `tenant, operation, request_id, entity_id, payload_hash, command, state,
		created_at, completed_at, outcome, attempts, last_error, claim_token, trace_parent`

	// The claim's cells, rewritten by every update (bound by claimArgs).
	claimCells = `entity_id = ?, payload_hash = ?, command = ?, created_at = ?, claim_token = ?, trace_parent = ?`

	claimCQL = `/* ` + string(StmtClaim) + ` */ INSERT INTO write_requests_by_id
		(tenant, operation, request_id, entity_id, payload_hash, command, state, created_at, attempts, claim_token, trace_parent)
		VALUES (?, ?, ?, ?, ?, ?, 'PENDING', ?, 0, ?, ?) IF NOT EXISTS USING TTL ?`
	selectCQL = `/* ` + string(StmtGet) + ` */ SELECT ` + columns + ` FROM write_requests_by_id
		WHERE tenant = ? AND operation = ? AND request_id = ?`
	// The quorum reads of one tenant's and operation's requests that meet
	// (Peek). Named as the single read: a fault armed on ledger.get, and
	// its metrics, cover both.
	selectManyCQL = `/* ` + string(StmtGet) + ` */ SELECT ` + columns + ` FROM write_requests_by_id
		WHERE tenant = ? AND operation = ? AND request_id IN ?`
	attemptCQL = `/* ` + string(StmtAttempt) + ` */ UPDATE write_requests_by_id USING TTL ?
		SET ` + claimCells + `, state = 'PENDING', attempts = ?, last_error = ?
		WHERE tenant = ? AND operation = ? AND request_id = ? IF state = 'PENDING' AND claim_token = ? AND attempts = ?`
	failCQL = `/* ` + string(StmtFail) + ` */ UPDATE write_requests_by_id USING TTL ?
		SET ` + claimCells + `, attempts = ?, last_error = ?, state = 'FAILED', completed_at = ?
		WHERE tenant = ? AND operation = ? AND request_id = ? IF state = 'PENDING' AND claim_token = ?`
	completeCQL = `/* ` + string(StmtComplete) + ` */ UPDATE write_requests_by_id USING TTL ?
		SET ` + claimCells + `, attempts = ?, last_error = ?, state = 'COMPLETE', completed_at = ?, outcome = ?
		WHERE tenant = ? AND operation = ? AND request_id = ? IF state = 'PENDING' AND claim_token = ?`
	requeueCQL = `/* ` + string(StmtRequeue) + ` */ UPDATE write_requests_by_id USING TTL ?
		SET ` + claimCells + `, attempts = 0, last_error = ?, state = 'PENDING', completed_at = null
		WHERE tenant = ? AND operation = ? AND request_id = ? IF state = 'FAILED' AND claim_token = ?`
	withdrawCQL = `/* ` + string(StmtWithdraw) + ` */ DELETE FROM write_requests_by_id
		WHERE tenant = ? AND operation = ? AND request_id = ? IF state = 'PENDING' AND claim_token = ?`
	// The cluster's clock, for entries an operator's machine schedules.
	clusterNowCQL = `/* ` + string(StmtClusterNow) + ` */ SELECT toTimestamp(now()) FROM system.local`
	scanCQL       = `/* ` + string(StmtScan) + ` */ SELECT tenant, operation, request_id, entity_id, payload_hash, command, state,
	created_at, completed_at, attempts, last_error, claim_token FROM write_requests_by_id`

	enqueueCQL = `/* ` + string(StmtEnqueue) + ` */ INSERT INTO due_requests
		(shard, due_bucket, not_before, tenant, operation, request_id, claim_token, created_at, owed_order)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) USING TTL ?`
	// A removed entry is marked done, not deleted: an upsert of the same
	// primary key, it never leaves a tombstone in the partitions the
	// reconciler reads on every pass.
	dequeueCQL = `/* ` + string(StmtRemove) + ` */ UPDATE due_requests USING TTL ? SET done = true
		WHERE shard = ? AND due_bucket = ? AND not_before = ? AND tenant = ? AND operation = ? AND request_id = ? AND claim_token = ?`
	dueCQL = `/* ` + string(StmtDue) + ` */ SELECT not_before, tenant, operation, request_id, claim_token, created_at, done, owed_order FROM due_requests
		WHERE shard = ? AND due_bucket = ? AND not_before > ? AND not_before <= ?`
	dropBucketCQL = `/* ` + string(StmtDropBucket) + ` */ DELETE FROM due_requests WHERE shard = ? AND due_bucket = ?`
)

// updateCQL is each update's statement.
var updateCQL = map[UpdateKind]string{
	UpdateAttempt: attemptCQL, UpdateFail: failCQL, UpdateComplete: completeCQL,
	UpdateRequeue: requeueCQL, UpdateWithdraw: withdrawCQL,
}

// cqlTable is the Table on a Cassandra session whose keyspace holds
// write_requests_by_id and due_requests.
type cqlTable struct{ s cassandra.Session }

// NewCQLTable is the ledger's Table on s.
func NewCQLTable(s cassandra.Session) Table { return cqlTable{s: s} }

func claimArgs(rec Record) []any {
	return []any{rec.EntityID.String(), rec.Fingerprint, rec.Command, rec.CreatedAt, rec.ClaimToken.String(), unsetIfEmpty(rec.TraceParent)}
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

// InsertClaim implements Table.
func (t cqlTable) InsertClaim(ctx context.Context, rec Record, ttl int, commitAny bool) (bool, Record, error) {
	commit := gocql.LocalQuorum
	if commitAny {
		commit = gocql.Any
	}
	existing := map[string]any{}
	applied, err := t.s.Query(claimCQL, args(keyArgs(rec.Key),
		[]any{rec.EntityID.String(), rec.Fingerprint, rec.Command, rec.CreatedAt, rec.ClaimToken.String(), unsetIfEmpty(rec.TraceParent), ttl})...,
	).Consistency(commit).SerialConsistency(t.s.Serial()).MapScanCASContext(ctx, existing)
	if err != nil || applied {
		return applied, Record{}, cassandra.WriteError("claim request", err)
	}
	cur, err := fromMap(existing)
	return false, cur, err
}

// Update implements Table.
func (t cqlTable) Update(ctx context.Context, u Update) (bool, error) {
	r, token := u.Row, u.IfToken.String()
	var values []any
	switch u.Kind {
	case UpdateAttempt:
		values = args([]any{u.TTL}, claimArgs(r), []any{r.Attempts, r.LastError}, keyArgs(r.Key), []any{token, u.IfAttempts})
	case UpdateFail:
		values = args([]any{u.TTL}, claimArgs(r), []any{r.Attempts, r.LastError, r.CompletedAt}, keyArgs(r.Key), []any{token})
	case UpdateComplete:
		values = args([]any{u.TTL}, claimArgs(r), []any{r.Attempts, nullable(r.LastError), r.CompletedAt, r.Outcome},
			keyArgs(r.Key), []any{token})
	case UpdateRequeue:
		values = args([]any{u.TTL}, claimArgs(r), []any{nullable(r.LastError)}, keyArgs(r.Key), []any{token})
	case UpdateWithdraw:
		values = args(keyArgs(r.Key), []any{token})
	default:
		return false, fault.New(fault.ReasonInternal, fmt.Errorf("ledger: no update %q", u.Kind))
	}
	applied, err := t.s.Query(updateCQL[u.Kind], values...).SerialConsistency(t.s.Serial()).MapScanCASContext(ctx, map[string]any{})
	return applied, cassandra.WriteError(string(u.Kind)+" request", err)
}

// Read implements Table.
func (t cqlTable) Read(ctx context.Context, key Key, serial bool) (Record, error) {
	cl := gocql.LocalQuorum
	if serial {
		cl = t.s.Serial()
	}
	row := map[string]any{}
	err := t.s.Query(selectCQL, keyArgs(key)...).Consistency(cl).MapScanContext(ctx, row)
	if errors.Is(err, gocql.ErrNotFound) {
		return Record{}, ErrNotFound
	}
	if err != nil {
		return Record{}, cassandra.ReadError("read request", err)
	}
	rec, err := fromMap(row)
	if err == nil && Remnant(rec) {
		return Record{}, ErrNotFound
	}
	return rec, err
}

// ReadMany implements Table.
func (t cqlTable) ReadMany(ctx context.Context, tenant, operation string, ids []uuid.UUID) ([]Record, error) {
	strs := make([]string, len(ids))
	for i, id := range ids {
		strs[i] = id.String()
	}
	var out []Record
	iter := t.s.Query(selectManyCQL, tenant, operation, strs).Consistency(gocql.LocalQuorum).IterContext(ctx)
	for row := map[string]any{}; iter.MapScan(row); row = map[string]any{} {
		rec, err := fromMap(row)
		if err != nil {
			_ = iter.Close()
			return nil, fault.New(fault.ReasonInternal, err)
		}
		if !Remnant(rec) {
			out = append(out, rec)
		}
	}
	return out, cassandra.ReadError("read request", iter.Close())
}

// ScanChunk implements Table.
func (t cqlTable) ScanChunk(ctx context.Context, from []byte) ([]Record, []byte, error) {
	iter := t.s.Query(scanCQL).Consistency(gocql.LocalQuorum).PageSize(ScanChunk).PageState(from).IterContext(ctx)
	var rows []Record
	for {
		r, ok := scanRow(iter)
		if !ok {
			break
		}
		rows = append(rows, r)
	}
	after := iter.PageState()
	if err := iter.Close(); err != nil {
		return nil, nil, cassandra.ReadError("scan the ledger", err)
	}
	return rows, after, nil
}

// scanRow reads one row of scanCQL (it reads no outcome: a page of
// outcomes would be the scan's largest cost and no lister shows them).
func scanRow(iter cassandra.Iter) (Record, bool) {
	var r Record
	var st string
	var requestID, entityID, claimToken gocql.UUID
	var completed time.Time
	if !iter.Scan(&r.Tenant, &r.Operation, &requestID, &entityID, &r.Fingerprint, &r.Command, &st,
		&r.CreatedAt, &completed, &r.Attempts, &r.LastError, &claimToken) {
		return Record{}, false
	}
	r.RequestID, r.EntityID, r.ClaimToken = uuid.UUID(requestID), uuid.UUID(entityID), uuid.UUID(claimToken)
	r.State, r.CreatedAt = State(st), r.CreatedAt.UTC()
	if completed.Unix() > 0 {
		r.CompletedAt = completed.UTC()
	}
	return r, true
}

// ClusterNow implements Table: the clock of the node that coordinates the
// read.
func (t cqlTable) ClusterNow(ctx context.Context) (time.Time, error) {
	var now time.Time
	if err := t.s.Query(clusterNowCQL).ScanContext(ctx, &now); err != nil {
		return time.Time{}, cassandra.ReadError("read the cluster's clock", err)
	}
	return now.UTC(), nil
}

// WriteEntries implements Table.
func (t cqlTable) WriteEntries(ctx context.Context, entries []DueEntry, ttl func(DueEntry) int) error {
	return t.writeEntries(ctx, "enqueue pending requests", enqueueCQL, entries, func(e DueEntry) []any {
		return []any{e.Shard, e.Due, e.NotBefore, e.Tenant, e.Operation, e.RequestID.String(), e.ClaimToken.String(),
			e.CreatedAt, owedOrder(e), ttl(e)}
	})
}

// RemoveEntries implements Table.
func (t cqlTable) RemoveEntries(ctx context.Context, entries []DueEntry, ttl func(DueEntry) int) error {
	return t.writeEntries(ctx, "remove pending entries", dequeueCQL, entries, func(e DueEntry) []any {
		return []any{ttl(e), e.Shard, e.Due, e.NotBefore, e.Tenant, e.Operation, e.RequestID.String(), e.ClaimToken.String()}
	})
}

// writeEntries writes entries with stmt: one statement for one entry, an
// unlogged batch for several (the callers group them by partition).
func (t cqlTable) writeEntries(ctx context.Context, op, stmt string, entries []DueEntry, values func(DueEntry) []any) error {
	if len(entries) == 1 {
		return cassandra.WriteError(op, t.s.Query(stmt, values(entries[0])...).Idempotent(true).ExecContext(ctx))
	}
	rows := make([][]any, len(entries))
	for i, e := range entries {
		rows[i] = values(e)
	}
	return cassandra.WriteError(op, t.s.ExecBatch(ctx, stmt, rows))
}

// owedOrder binds an entry's owed order id, or nothing when it owes none.
func owedOrder(e DueEntry) any {
	if e.Owed == uuid.Nil {
		// Unset, not null: a null is a tombstone cell, and one in every
		// entry made the reconciler's reads of a busy minute read as many
		// tombstones as entries (Cassandra warns past 1,000). An entry's
		// owed order is only ever set, never cleared, so nothing is lost.
		return gocql.UnsetValue
	}
	return e.Owed.String()
}

// ListDue implements Table.
func (t cqlTable) ListDue(ctx context.Context, shard int, bucket, after, through time.Time) ([]DueEntry, error) {
	iter := t.s.Query(dueCQL, shard, bucket, after, through).PageSize(5000).IterContext(ctx)
	var (
		out              []DueEntry
		e                = DueEntry{Shard: shard, Due: bucket}
		requestID, token gocql.UUID
		owed             *gocql.UUID
		done             bool
	)
	for iter.Scan(&e.NotBefore, &e.Tenant, &e.Operation, &requestID, &token, &e.CreatedAt, &done, &owed) {
		if !done {
			e.RequestID, e.ClaimToken, e.CreatedAt, e.NotBefore = uuid.UUID(requestID), uuid.UUID(token), e.CreatedAt.UTC(), e.NotBefore.UTC()
			e.Owed = uuid.Nil
			if owed != nil {
				e.Owed = uuid.UUID(*owed)
			}
			out = append(out, e)
		}
		owed = nil
	}
	if err := iter.Close(); err != nil {
		return nil, cassandra.ReadError(fmt.Sprintf("read due entries of shard %d at %s", shard, bucket.Format(time.RFC3339)), err)
	}
	return out, nil
}

// DropBucket implements Table. The tombstone is dated by the coordinator's
// clock: a process clock that leads would date it past entries written
// into the minute later.
func (t cqlTable) DropBucket(ctx context.Context, shard int, bucket time.Time) error {
	err := t.s.Query(dropBucketCQL, shard, bucket).ServerTimestamp().Idempotent(true).ExecContext(ctx)
	return cassandra.WriteError(fmt.Sprintf("drop due bucket of shard %d at %s", shard, bucket.Format(time.RFC3339)), err)
}

// nullable binds "" as null (no cell) rather than an empty string.
// unsetIfEmpty binds s, or nothing when it is empty: an untraced claim
// writes no trace_parent cell (not even a tombstone).
func unsetIfEmpty(s string) any {
	if s == "" {
		return gocql.UnsetValue
	}
	return s
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// fromMap decodes a row of columns. A remnant (Remnant) decodes without
// error; a row with a state but no fingerprint, or the reverse, is an
// error (no write leaves one).
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
	r.TraceParent = str("trace_parent")
	r.Command, _ = m["command"].([]byte)
	r.Outcome, _ = m["outcome"].([]byte)
	r.CreatedAt, r.CompletedAt = tm("created_at"), tm("completed_at")
	if r.CompletedAt.Unix() <= 0 {
		r.CompletedAt = time.Time{}
	}
	r.Attempts, _ = m["attempts"].(int)
	if err == nil && !Remnant(r) && (r.State == "" || r.Fingerprint == "") {
		err = fmt.Errorf("ledger row %s without a state or fingerprint", r.RequestID)
	}
	return r, err
}
