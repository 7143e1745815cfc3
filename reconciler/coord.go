package reconciler

import (
	"context"
	"errors"
	"math"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/cassandra"
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
}

const (
	group = "orderd"

	heartbeatCQL = `INSERT INTO reconciler_members (grp, instance, seen_at) VALUES (?, ?, ?) USING TTL ?`
	membersCQL   = `SELECT instance FROM reconciler_members WHERE grp = ?`
	leaveCQL     = `DELETE FROM reconciler_members WHERE grp = ? AND instance = ?`

	// reconciler_leases is written only with LWTs.
	ownersCQL  = `SELECT shard, owner FROM reconciler_leases`
	acquireCQL = `INSERT INTO reconciler_leases (shard, owner, acquired_at) VALUES (?, ?, ?) IF NOT EXISTS USING TTL ?`
	renewCQL   = `UPDATE reconciler_leases USING TTL ? SET owner = ?, acquired_at = ? WHERE shard = ? IF owner = ?`
	releaseCQL = `DELETE FROM reconciler_leases WHERE shard = ? IF owner = ?`

	// reconciler_cursors is written plainly, by the lease holder only.
	cursorCQL     = `SELECT bucket FROM reconciler_cursors WHERE shard = ?`
	saveCursorCQL = `INSERT INTO reconciler_cursors (shard, bucket, updated_at) VALUES (?, ?, ?)`
)

// CassandraCoordinator is the Coordinator on the keyspace's reconciler tables.
type CassandraCoordinator struct{ s *gocql.Session }

var _ Coordinator = (*CassandraCoordinator)(nil)

// NewCassandraCoordinator returns a Coordinator on s.
func NewCassandraCoordinator(s *gocql.Session) *CassandraCoordinator {
	return &CassandraCoordinator{s: s}
}

func seconds(d time.Duration) int { return max(1, int(math.Ceil(d.Seconds()))) }

// Heartbeat implements Coordinator.
func (c *CassandraCoordinator) Heartbeat(ctx context.Context, instance uuid.UUID, ttl time.Duration) (int, error) {
	if err := c.s.Query(heartbeatCQL, group, instance.String(), time.Now().UTC(), seconds(ttl)).
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
	return c.cas(ctx, "acquire shard lease", acquireCQL, shard, instance.String(), time.Now().UTC(), seconds(ttl))
}

// Renew implements Coordinator.
func (c *CassandraCoordinator) Renew(ctx context.Context, shard int, instance uuid.UUID, ttl time.Duration) (bool, error) {
	return c.cas(ctx, "renew shard lease", renewCQL, seconds(ttl), instance.String(), time.Now().UTC(), shard, instance.String())
}

// Release implements Coordinator.
func (c *CassandraCoordinator) Release(ctx context.Context, shard int, instance uuid.UUID) error {
	_, err := c.cas(ctx, "release shard lease", releaseCQL, shard, instance.String())
	return err
}

func (c *CassandraCoordinator) cas(ctx context.Context, op, stmt string, args ...any) (bool, error) {
	applied, err := c.s.Query(stmt, args...).MapScanCASContext(ctx, map[string]any{})
	if err != nil {
		// An unknown lease outcome is treated as not held: at worst a shard
		// is reconciled twice, which Finish makes harmless.
		return false, cassandra.WriteError(op, err)
	}
	return applied, nil
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
