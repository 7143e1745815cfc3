package leases

import (
	"context"
	"errors"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/platform/cassandra"
)

// The statements, by the names they give themselves
// (cassandra.StatementName): what a FaultSession, the in-memory
// coordinator's Arm, traces and metrics call them.
const (
	StmtHeartbeat  cassandra.Stmt = "coord.heartbeat"
	StmtMembers    cassandra.Stmt = "coord.members"
	StmtMemberOps  cassandra.Stmt = "coord.member-ops"
	StmtLeave      cassandra.Stmt = "coord.leave"
	StmtOwners     cassandra.Stmt = "coord.owners"
	StmtLease      cassandra.Stmt = "coord.lease" // the serial read that settles a lease LWT
	StmtAcquire    cassandra.Stmt = "coord.acquire"
	StmtRenew      cassandra.Stmt = "coord.renew"
	StmtRelease    cassandra.Stmt = "coord.release"
	StmtCursor     cassandra.Stmt = "coord.cursor"
	StmtSaveCursor cassandra.Stmt = "coord.save_cursor"
)

// Statements names every statement the coordinator runs.
var Statements = []cassandra.Stmt{StmtHeartbeat, StmtMembers, StmtMemberOps, StmtLeave, StmtOwners, StmtLease, StmtAcquire, StmtRenew, StmtRelease, StmtCursor, StmtSaveCursor}

const (
	group = "orderd"

	heartbeatCQL = `/* ` + string(StmtHeartbeat) + ` */ INSERT INTO reconciler_members (grp, instance, seen_at, operations) VALUES (?, ?, ?, ?) USING TTL ?`
	membersCQL   = `/* ` + string(StmtMembers) + ` */ SELECT instance FROM reconciler_members WHERE grp = ?`
	memberOpsCQL = `/* ` + string(StmtMemberOps) + ` */ SELECT instance, operations FROM reconciler_members WHERE grp = ?`
	leaveCQL     = `/* ` + string(StmtLeave) + ` */ DELETE FROM reconciler_members WHERE grp = ? AND instance = ?`

	// reconciler_leases is written only with LWTs.
	ownersCQL  = `/* ` + string(StmtOwners) + ` */ SELECT shard, owner FROM reconciler_leases`
	leaseCQL   = `/* ` + string(StmtLease) + ` */ SELECT owner, acquired_at FROM reconciler_leases WHERE shard = ?`
	acquireCQL = `/* ` + string(StmtAcquire) + ` */ INSERT INTO reconciler_leases (shard, owner, acquired_at) VALUES (?, ?, ?) IF NOT EXISTS USING TTL ?`
	renewCQL   = `/* ` + string(StmtRenew) + ` */ UPDATE reconciler_leases USING TTL ? SET owner = ?, acquired_at = ? WHERE shard = ? IF owner = ?`
	releaseCQL = `/* ` + string(StmtRelease) + ` */ DELETE FROM reconciler_leases WHERE shard = ? IF owner = ?`

	// reconciler_cursors is written plainly, by the lease holder only.
	cursorCQL     = `/* ` + string(StmtCursor) + ` */ SELECT bucket FROM reconciler_cursors WHERE shard = ?`
	saveCursorCQL = `/* ` + string(StmtSaveCursor) + ` */ INSERT INTO reconciler_cursors (shard, bucket, updated_at) VALUES (?, ?, ?)`
)

// cqlTable is the Table on a Cassandra session whose keyspace holds the
// reconciler's tables.
type cqlTable struct{ s cassandra.Session }

// NewCQLTable is the coordinator's Table on s.
func NewCQLTable(s cassandra.Session) Table { return cqlTable{s: s} }

// WriteMember implements Table.
func (t cqlTable) WriteMember(ctx context.Context, instance uuid.UUID, operations []string, seenAt time.Time, ttl int) error {
	err := t.s.Query(heartbeatCQL, group, instance.String(), seenAt, operations, ttl).Idempotent(true).ExecContext(ctx)
	return cassandra.WriteError("reconciler heartbeat", err)
}

// ReadMembers implements Table.
func (t cqlTable) ReadMembers(ctx context.Context) ([]uuid.UUID, error) {
	iter := t.s.Query(membersCQL, group).IterContext(ctx)
	var (
		out []uuid.UUID
		id  gocql.UUID
	)
	for iter.Scan(&id) {
		out = append(out, uuid.UUID(id))
	}
	return out, cassandra.ReadError("count reconcilers", iter.Close())
}

// ReadMemberOps implements Table.
func (t cqlTable) ReadMemberOps(ctx context.Context) (map[uuid.UUID][]string, error) {
	iter := t.s.Query(memberOpsCQL, group).IterContext(ctx)
	out := map[uuid.UUID][]string{}
	var (
		id  gocql.UUID
		ops []string
	)
	for iter.Scan(&id, &ops) {
		out[uuid.UUID(id)] = ops
		ops = nil
	}
	return out, cassandra.ReadError("read reconcilers' operations", iter.Close())
}

// DeleteMember implements Table.
func (t cqlTable) DeleteMember(ctx context.Context, instance uuid.UUID) error {
	return cassandra.WriteError("leave reconcilers", t.s.Query(leaveCQL, group, instance.String()).ExecContext(ctx))
}

// ReadOwners implements Table.
func (t cqlTable) ReadOwners(ctx context.Context) (map[int]uuid.UUID, error) {
	out := map[int]uuid.UUID{}
	iter := t.s.Query(ownersCQL).IterContext(ctx)
	var (
		shard int
		owner gocql.UUID
	)
	for iter.Scan(&shard, &owner) {
		out[shard] = uuid.UUID(owner)
	}
	return out, cassandra.ReadError("read shard leases", iter.Close())
}

// ReadLease implements Table.
func (t cqlTable) ReadLease(ctx context.Context, shard int) (Lease, error) {
	var (
		owner    gocql.UUID
		acquired time.Time
	)
	err := t.s.Query(leaseCQL, shard).Consistency(t.s.Serial()).ScanContext(ctx, &owner, &acquired)
	switch {
	case errors.Is(err, gocql.ErrNotFound):
		return Lease{}, nil
	case err != nil:
		return Lease{}, cassandra.ReadError("read shard lease", err)
	}
	return Lease{Owner: uuid.UUID(owner), Acquired: acquired.UTC(), Found: true}, nil
}

// InsertLease implements Table.
func (t cqlTable) InsertLease(ctx context.Context, shard int, owner uuid.UUID, at time.Time, ttl int) (bool, error) {
	return t.cas(ctx, "acquire shard lease", acquireCQL, shard, owner.String(), at, ttl)
}

// UpdateLease implements Table.
func (t cqlTable) UpdateLease(ctx context.Context, shard int, owner uuid.UUID, at time.Time, ttl int) (bool, error) {
	return t.cas(ctx, "renew shard lease", renewCQL, ttl, owner.String(), at, shard, owner.String())
}

// DeleteLease implements Table.
func (t cqlTable) DeleteLease(ctx context.Context, shard int, owner uuid.UUID) (bool, error) {
	return t.cas(ctx, "release shard lease", releaseCQL, shard, owner.String())
}

// cas sends one lease LWT at the session's serial consistency.
func (t cqlTable) cas(ctx context.Context, op, stmt string, args ...any) (bool, error) {
	applied, err := t.s.Query(stmt, args...).SerialConsistency(t.s.Serial()).MapScanCASContext(ctx, map[string]any{})
	return applied, cassandra.WriteError(op, err)
}

// ReadCursor implements Table.
func (t cqlTable) ReadCursor(ctx context.Context, shard int) (time.Time, bool, error) {
	var b time.Time
	err := t.s.Query(cursorCQL, shard).ScanContext(ctx, &b)
	switch {
	case errors.Is(err, gocql.ErrNotFound):
		return time.Time{}, false, nil
	case err != nil:
		return time.Time{}, false, cassandra.ReadError("read reconciler cursor", err)
	}
	return b.UTC(), true, nil
}

// WriteCursor implements Table.
func (t cqlTable) WriteCursor(ctx context.Context, shard int, bucket, updatedAt time.Time) error {
	return cassandra.WriteError("save reconciler cursor",
		t.s.Query(saveCursorCQL, shard, bucket, updatedAt).Idempotent(true).ExecContext(ctx))
}
