// Package leases is where reconciler instances meet: their membership,
// the shards' leases (LWT-only) and the shards' cursors, in Cassandra.
// The lease LWTs are settled, like every LWT of the service, through
// lwt.Do (LeaseWrite).
package leases

import (
	"context"
	"errors"
	"math"
	"slices"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/platform/lwt"
)

// Coordinator is where reconciler instances meet: membership, shard leases
// and per-shard cursors.
type Coordinator interface {
	// Heartbeat marks instance alive for ttl and returns how many instances
	// are alive.
	Heartbeat(ctx context.Context, instance uuid.UUID, ttl time.Duration) (int, error)
	// Leave removes instance from the live instances.
	Leave(ctx context.Context, instance uuid.UUID) error
	// Owners lists the shards that have a live lease, with their owner.
	Owners(ctx context.Context) (map[int]uuid.UUID, error)
	// Acquire takes shard's lease for ttl if nobody holds it.
	Acquire(ctx context.Context, shard int, instance uuid.UUID, ttl time.Duration) (bool, error)
	// Renew extends the lease if instance still holds it.
	Renew(ctx context.Context, shard int, instance uuid.UUID, ttl time.Duration) (bool, error)
	// Release gives up the lease if instance holds it.
	Release(ctx context.Context, shard int, instance uuid.UUID) error
	// Cursor is the shard's oldest due minute not yet settled; false if unset.
	Cursor(ctx context.Context, shard int) (time.Time, bool, error)
	// SaveCursor moves the shard's cursor (only the lease holder calls it).
	SaveCursor(ctx context.Context, shard int, bucket time.Time) error
	// Members lists the live instances with the operations each one's
	// heartbeat says it finishes (none for a release that says nothing).
	Members(ctx context.Context) (map[uuid.UUID][]string, error)
}

// The statements, by the names they give themselves
// (cassandra.StatementName): what a FaultSession, the in-memory
// coordinator's Arm, traces and metrics call them.
const (
	StmtHeartbeat  = "coord.heartbeat"
	StmtMembers    = "coord.members"
	StmtMemberOps  = "coord.member-ops"
	StmtLeave      = "coord.leave"
	StmtOwners     = "coord.owners"
	StmtLease      = "coord.lease" // the serial read that settles a lease LWT
	StmtAcquire    = "coord.acquire"
	StmtRenew      = "coord.renew"
	StmtRelease    = "coord.release"
	StmtCursor     = "coord.cursor"
	StmtSaveCursor = "coord.save_cursor"
)

const (
	group = "orderd"

	heartbeatCQL = `/* ` + StmtHeartbeat + ` */ INSERT INTO reconciler_members (grp, instance, seen_at, operations) VALUES (?, ?, ?, ?) USING TTL ?`
	membersCQL   = `/* ` + StmtMembers + ` */ SELECT instance FROM reconciler_members WHERE grp = ?`
	memberOpsCQL = `/* ` + StmtMemberOps + ` */ SELECT instance, operations FROM reconciler_members WHERE grp = ?`
	leaveCQL     = `/* ` + StmtLeave + ` */ DELETE FROM reconciler_members WHERE grp = ? AND instance = ?`

	// reconciler_leases is written only with LWTs.
	ownersCQL  = `/* ` + StmtOwners + ` */ SELECT shard, owner FROM reconciler_leases`
	leaseCQL   = `/* ` + StmtLease + ` */ SELECT owner, acquired_at FROM reconciler_leases WHERE shard = ?`
	acquireCQL = `/* ` + StmtAcquire + ` */ INSERT INTO reconciler_leases (shard, owner, acquired_at) VALUES (?, ?, ?) IF NOT EXISTS USING TTL ?`
	renewCQL   = `/* ` + StmtRenew + ` */ UPDATE reconciler_leases USING TTL ? SET owner = ?, acquired_at = ? WHERE shard = ? IF owner = ?`
	releaseCQL = `/* ` + StmtRelease + ` */ DELETE FROM reconciler_leases WHERE shard = ? IF owner = ?`

	// reconciler_cursors is written plainly, by the lease holder only.
	cursorCQL     = `/* ` + StmtCursor + ` */ SELECT bucket FROM reconciler_cursors WHERE shard = ?`
	saveCursorCQL = `/* ` + StmtSaveCursor + ` */ INSERT INTO reconciler_cursors (shard, bucket, updated_at) VALUES (?, ?, ?)`
)

// CassandraCoordinator is the Coordinator on the keyspace's reconciler tables.
type CassandraCoordinator struct {
	s          cassandra.Session
	operations []string // what this instance's heartbeats say it finishes
}

var _ Coordinator = (*CassandraCoordinator)(nil)

// NewCassandraCoordinator returns a Coordinator on s whose heartbeats say
// that its instance finishes operations.
func NewCassandraCoordinator(s cassandra.Session, operations ...string) *CassandraCoordinator {
	return &CassandraCoordinator{s: s, operations: operations}
}

func seconds(d time.Duration) int { return max(1, int(math.Ceil(d.Seconds()))) }

// Heartbeat implements Coordinator.
func (c *CassandraCoordinator) Heartbeat(ctx context.Context, instance uuid.UUID, ttl time.Duration) (int, error) {
	if err := c.s.Query(heartbeatCQL, group, instance.String(), time.Now().UTC(), c.operations, seconds(ttl)).
		Idempotent(true).ExecContext(ctx); err != nil {
		return 0, cassandra.WriteError("reconciler heartbeat", err)
	}
	iter := c.s.Query(membersCQL, group).IterContext(ctx)
	n := 0
	var id gocql.UUID
	for iter.Scan(&id) {
		n++
	}
	return n, cassandra.ReadError("count reconcilers", iter.Close())
}

// Members implements Coordinator.
func (c *CassandraCoordinator) Members(ctx context.Context) (map[uuid.UUID][]string, error) {
	iter := c.s.Query(memberOpsCQL, group).IterContext(ctx)
	out := map[uuid.UUID][]string{}
	var (
		id  gocql.UUID
		ops []string
	)
	for iter.Scan(&id, &ops) {
		out[uuid.UUID(id)] = slices.Sorted(slices.Values(ops))
		ops = nil
	}
	return out, cassandra.ReadError("read reconcilers' operations", iter.Close())
}

// Leave implements Coordinator.
func (c *CassandraCoordinator) Leave(ctx context.Context, instance uuid.UUID) error {
	return cassandra.WriteError("leave reconcilers", c.s.Query(leaveCQL, group, instance.String()).ExecContext(ctx))
}

// Owners implements Coordinator.
func (c *CassandraCoordinator) Owners(ctx context.Context) (map[int]uuid.UUID, error) {
	out := map[int]uuid.UUID{}
	iter := c.s.Query(ownersCQL).IterContext(ctx)
	var (
		shard int
		owner gocql.UUID
	)
	for iter.Scan(&shard, &owner) {
		out[shard] = uuid.UUID(owner)
	}
	return out, cassandra.ReadError("read shard leases", iter.Close())
}

// Acquire implements Coordinator.
func (c *CassandraCoordinator) Acquire(ctx context.Context, shard int, instance uuid.UUID, ttl time.Duration) (bool, error) {
	at := time.Now().UTC().Truncate(time.Millisecond)
	return c.cas(ctx, "acquire shard lease", shard, instance, at, true,
		acquireCQL, shard, instance.String(), at, seconds(ttl))
}

// Renew implements Coordinator.
func (c *CassandraCoordinator) Renew(ctx context.Context, shard int, instance uuid.UUID, ttl time.Duration) (bool, error) {
	at := time.Now().UTC().Truncate(time.Millisecond)
	return c.cas(ctx, "renew shard lease", shard, instance, at, true,
		renewCQL, seconds(ttl), instance.String(), at, shard, instance.String())
}

// Release implements Coordinator.
func (c *CassandraCoordinator) Release(ctx context.Context, shard int, instance uuid.UUID) error {
	_, err := c.cas(ctx, "release shard lease", shard, instance, time.Time{}, false,
		releaseCQL, shard, instance.String())
	return err
}

// cas runs one lease LWT. An unknown outcome is settled by reading the
// lease at the session's serial consistency (which finishes any round in flight): the lease
// shows this instance as owner since at → an acquire or renew applied; no
// lease of this instance → a release applied; the lease still this
// instance's → a release did not apply, an Unavailable error (never "released":
// the caller would forget a lease it still holds). A read that fails too is
// an error, and then the lease counts as not held (at worst it expires by
// its TTL and a shard waits that long).
func (c *CassandraCoordinator) cas(ctx context.Context, op string, shard int, instance uuid.UUID, at time.Time, take bool, stmt string, args ...any) (bool, error) {
	send := func(ctx context.Context) (bool, error) {
		applied, err := c.s.Query(stmt, args...).SerialConsistency(c.s.Serial()).MapScanCASContext(ctx, map[string]any{})
		return applied, cassandra.WriteError(op, err)
	}
	read := func(ctx context.Context) (Lease, error) { return c.readLease(ctx, shard) }
	res, err := lwt.Do(ctx, LeaseWrite(op, instance, at, take, send, read))
	return res.Applied, err
}

// Lease is a shard's lease as a serial read found it.
type Lease struct {
	Owner    uuid.UUID
	Acquired time.Time
	Found    bool
}

// LeaseWrite is a lease LWT of instance (an acquire or renew dated at, when
// take; a release otherwise) and how a read settles its unknown outcome:
// the lease shows instance as owner since at → an acquire or renew
// applied; no lease of instance → a release applied; the lease still
// instance's → a release did not apply, an Unavailable error (never
// "released": the caller would forget a lease it still holds). No lease
// write is resent: the next renewal or pass tries again. The coordinator
// and its in-memory fake both settle their lease writes with it.
func LeaseWrite(op string, instance uuid.UUID, at time.Time, take bool,
	send func(context.Context) (bool, error), read func(context.Context) (Lease, error)) lwt.Write[Lease] {
	w := lwt.Write[Lease]{
		Op: op,
		Send: func(ctx context.Context) (bool, Lease, error) {
			applied, err := send(ctx)
			return applied, Lease{}, err
		},
		Read:  read,
		Sends: 1,
	}
	if take {
		w.Applied = func(l Lease) bool { return l.Found && l.Owner == instance && l.Acquired.Equal(at) }
	} else {
		w.Applied = func(l Lease) bool { return !l.Found || l.Owner != instance }
		w.Awaits = func(l Lease) bool { return l.Found && l.Owner == instance }
	}
	return w
}

// readLease reads shard's lease at the session's serial consistency.
func (c *CassandraCoordinator) readLease(ctx context.Context, shard int) (Lease, error) {
	var (
		owner    gocql.UUID
		acquired time.Time
	)
	err := c.s.Query(leaseCQL, shard).Consistency(c.s.Serial()).ScanContext(ctx, &owner, &acquired)
	switch {
	case errors.Is(err, gocql.ErrNotFound):
		return Lease{}, nil
	case err != nil:
		return Lease{}, cassandra.ReadError("read shard lease", err)
	}
	return Lease{Owner: uuid.UUID(owner), Acquired: acquired.UTC(), Found: true}, nil
}

// Cursor implements Coordinator.
func (c *CassandraCoordinator) Cursor(ctx context.Context, shard int) (time.Time, bool, error) {
	var b time.Time
	err := c.s.Query(cursorCQL, shard).ScanContext(ctx, &b)
	if errors.Is(err, gocql.ErrNotFound) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, cassandra.ReadError("read reconciler cursor", err)
	}
	return b.UTC(), true, nil
}

// SaveCursor implements Coordinator.
func (c *CassandraCoordinator) SaveCursor(ctx context.Context, shard int, bucket time.Time) error {
	return cassandra.WriteError("save reconciler cursor",
		c.s.Query(saveCursorCQL, shard, bucket, time.Now().UTC()).Idempotent(true).ExecContext(ctx))
}
