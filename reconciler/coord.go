package reconciler

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

const (
	group = "orderd"

	heartbeatCQL = `/* coord.heartbeat */ INSERT INTO reconciler_members (grp, instance, seen_at, operations) VALUES (?, ?, ?, ?) USING TTL ?`
	membersCQL   = `/* coord.members */ SELECT instance FROM reconciler_members WHERE grp = ?`
	memberOpsCQL = `/* coord.member-ops */ SELECT instance, operations FROM reconciler_members WHERE grp = ?`
	leaveCQL     = `/* coord.leave */ DELETE FROM reconciler_members WHERE grp = ? AND instance = ?`

	// reconciler_leases is written only with LWTs.
	ownersCQL  = `/* coord.owners */ SELECT shard, owner FROM reconciler_leases`
	leaseCQL   = `/* coord.lease */ SELECT owner, acquired_at FROM reconciler_leases WHERE shard = ?`
	acquireCQL = `/* coord.acquire */ INSERT INTO reconciler_leases (shard, owner, acquired_at) VALUES (?, ?, ?) IF NOT EXISTS USING TTL ?`
	renewCQL   = `/* coord.renew */ UPDATE reconciler_leases USING TTL ? SET owner = ?, acquired_at = ? WHERE shard = ? IF owner = ?`
	releaseCQL = `/* coord.release */ DELETE FROM reconciler_leases WHERE shard = ? IF owner = ?`

	// reconciler_cursors is written plainly, by the lease holder only.
	cursorCQL     = `/* coord.cursor */ SELECT bucket FROM reconciler_cursors WHERE shard = ?`
	saveCursorCQL = `/* coord.save_cursor */ INSERT INTO reconciler_cursors (shard, bucket, updated_at) VALUES (?, ?, ?)`
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
	w := lwt.Write[lease]{
		Op: op,
		Send: func(ctx context.Context) (bool, lease, error) {
			applied, err := c.s.Query(stmt, args...).SerialConsistency(c.s.Serial()).MapScanCASContext(ctx, map[string]any{})
			return applied, lease{}, cassandra.WriteError(op, err)
		},
		Read:  func(ctx context.Context) (lease, error) { return c.readLease(ctx, shard) },
		Sends: 1, // a lease write is never resent: the next renewal or pass tries again
	}
	if take {
		w.Applied = func(l lease) bool { return l.found && l.owner == instance && l.acquired.Equal(at) }
	} else {
		w.Applied = func(l lease) bool { return !l.found || l.owner != instance }
		// Still this instance's: not released. An error, never "released"
		// (the caller would forget a lease it still holds).
		w.Awaits = func(l lease) bool { return l.found && l.owner == instance }
	}
	res, err := lwt.Do(ctx, w)
	return res.Applied, err
}

// lease is a shard's lease as a serial read found it.
type lease struct {
	owner    uuid.UUID
	acquired time.Time
	found    bool
}

// readLease reads shard's lease at the session's serial consistency.
func (c *CassandraCoordinator) readLease(ctx context.Context, shard int) (lease, error) {
	var (
		owner    gocql.UUID
		acquired time.Time
	)
	err := c.s.Query(leaseCQL, shard).Consistency(c.s.Serial()).ScanContext(ctx, &owner, &acquired)
	switch {
	case errors.Is(err, gocql.ErrNotFound):
		return lease{}, nil
	case err != nil:
		return lease{}, cassandra.ReadError("read shard lease", err)
	}
	return lease{owner: uuid.UUID(owner), acquired: acquired, found: true}, nil
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
