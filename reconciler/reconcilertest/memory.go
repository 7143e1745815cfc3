package reconcilertest

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
)

// Coordinator is reconciler.Coordinator's method set (see the package doc
// for why it is repeated here).
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

// The names reconciler.CassandraCoordinator's statements give themselves
// (see cassandra.StatementName): what Arm and a cassandra.FaultSession take.
const (
	StmtHeartbeat  = "coord.heartbeat"
	StmtMembers    = "coord.members"
	StmtMemberOps  = "coord.member-ops"
	StmtLeave      = "coord.leave"
	StmtOwners     = "coord.owners"
	StmtLease      = "coord.lease" // the LOCAL_SERIAL read that settles a lease LWT
	StmtAcquire    = "coord.acquire"
	StmtRenew      = "coord.renew"
	StmtRelease    = "coord.release"
	StmtCursor     = "coord.cursor"
	StmtSaveCursor = "coord.save_cursor"
)

type lease struct {
	owner   uuid.UUID
	expires time.Time
}

// MemoryCoordinator is an in-memory Coordinator with CassandraCoordinator's
// semantics (see the package doc) whose TTLs follow an injectable clock.
// Safe for concurrent use.
type MemoryCoordinator struct {
	*memoryTables
	operations []string // what this coordinator's heartbeats say its instance finishes
}

// memoryTables are the tables every MemoryCoordinator of one store shares
// (Advertising).
type memoryTables struct {
	// Faults armed by statement name (StmtAcquire, ...), served as a
	// cassandra.FaultSession serves them: Arm, Hits, Pending.
	*cassandra.Faults
	now func() time.Time

	mu      sync.Mutex
	members map[uuid.UUID]member
	leases  map[int]lease
	cursors map[int]time.Time
	saves   map[int][]time.Time // applied SaveCursor calls per shard
}

type member struct {
	expires    time.Time
	operations []string
}

var _ Coordinator = (*MemoryCoordinator)(nil)

// NewMemoryCoordinator returns an empty coordinator on the clock now
// (time.Now if nil).
func NewMemoryCoordinator(now func() time.Time) *MemoryCoordinator {
	if now == nil {
		now = time.Now
	}
	return &MemoryCoordinator{memoryTables: &memoryTables{now: now, members: map[uuid.UUID]member{}, leases: map[int]lease{},
		cursors: map[int]time.Time{}, saves: map[int][]time.Time{},
		Faults: cassandra.NewFaults()}}
}

// Advertising is a coordinator on the same tables whose heartbeats say its
// instance finishes operations (reconciler.NewCassandraCoordinator's
// operations).
func (c *MemoryCoordinator) Advertising(operations ...string) *MemoryCoordinator {
	return &MemoryCoordinator{memoryTables: c.memoryTables, operations: slices.Clone(operations)}
}

// ttlOf is a TTL as Cassandra keeps it: whole seconds, at least one
// (reconciler.CassandraCoordinator rounds up).
func ttlOf(d time.Duration) time.Duration {
	return time.Duration(max(1, int(math.Ceil(d.Seconds())))) * time.Second
}

func injected(op, statement string, f cassandra.Fault) error {
	return fmt.Errorf("%s: injected fault on %s: %s", op, statement, f)
}

// writeLocked runs a plain write of statement: apply unless a fault stops
// it; the error a CassandraCoordinator write returns.
func (c *MemoryCoordinator) writeLocked(ctx context.Context, statement, op string, apply func()) error {
	if err := ctx.Err(); err != nil {
		return fault.New(fault.ReasonOutcomeUnknown, fmt.Errorf("%s: %w", op, err))
	}
	f, faulty := c.Take(statement)
	switch {
	case !faulty:
		apply()
		return nil
	case f == cassandra.FaultUnavailable:
		return fault.New(fault.ReasonClusterUnavailable, injected(op, statement, f))
	case f == cassandra.FaultLoseResponse:
		apply()
	}
	return fault.New(fault.ReasonOutcomeUnknown, injected(op, statement, f))
}

// readLocked fails as a read of statement would: any fault is Unavailable.
func (c *MemoryCoordinator) readLocked(ctx context.Context, statement, op string) error {
	if err := ctx.Err(); err != nil {
		return fault.New(fault.ReasonClusterUnavailable, fmt.Errorf("%s: %w", op, err))
	}
	if f, ok := c.Take(statement); ok {
		return fault.New(fault.ReasonClusterUnavailable, injected(op, statement, f))
	}
	return nil
}

func (c *MemoryCoordinator) liveLocked(shard int) (lease, bool) {
	l, ok := c.leases[shard]
	if !ok {
		return lease{}, false
	}
	if !c.now().Before(l.expires) {
		delete(c.leases, shard) // expired, as a TTL would
		return lease{}, false
	}
	return l, true
}

// lwtLocked runs a lease LWT as CassandraCoordinator.cas does: apply (which
// says whether its condition held) unless a fault stops it; an unknown
// outcome (timeout, lost response) is settled by reading the lease: take
// (acquire, renew) → applied iff it did; release → done iff the lease is no
// longer instance's. A settling read that fails too leaves OutcomeUnknown
// and "not applied".
func (c *MemoryCoordinator) lwtLocked(ctx context.Context, statement, op string, shard int, instance uuid.UUID, take bool, apply func() bool) (bool, error) {
	if err := ctx.Err(); err != nil {
		// The LWT is not sent and the settling read fails the same way.
		return false, fault.New(fault.ReasonOutcomeUnknown, fmt.Errorf("%s: %w", op, err))
	}
	f, faulty := c.Take(statement)
	if faulty && f == cassandra.FaultUnavailable {
		return false, fault.New(fault.ReasonClusterUnavailable, injected(op, statement, f))
	}
	applied := false
	if !faulty || f == cassandra.FaultLoseResponse {
		applied = apply()
	}
	if !faulty {
		return applied, nil
	}
	unknown := fault.New(fault.ReasonOutcomeUnknown, injected(op, statement, f))
	if _, bad := c.Take(StmtLease); bad {
		return false, unknown
	}
	if take {
		return applied, nil
	}
	if l, ok := c.liveLocked(shard); ok && l.owner == instance {
		return false, fault.New(fault.ReasonClusterUnavailable, fmt.Errorf("%s: settled as not applied: %w", op, unknown))
	}
	return true, nil
}

// Heartbeat implements Coordinator.
func (c *MemoryCoordinator) Heartbeat(ctx context.Context, instance uuid.UUID, ttl time.Duration) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if err := c.writeLocked(ctx, StmtHeartbeat, "reconciler heartbeat", func() {
		c.members[instance] = member{expires: now.Add(ttlOf(ttl)), operations: slices.Sorted(slices.Values(c.operations))}
	}); err != nil {
		return 0, err
	}
	if err := c.readLocked(ctx, StmtMembers, "count reconcilers"); err != nil {
		return 0, err
	}
	return len(c.liveMembersLocked()), nil
}

// liveMembersLocked drops the members whose TTL ran out and returns the rest.
func (c *memoryTables) liveMembersLocked() map[uuid.UUID]member {
	now := c.now()
	for id, m := range c.members {
		if !now.Before(m.expires) {
			delete(c.members, id)
		}
	}
	return c.members
}

// Members implements Coordinator.
func (c *MemoryCoordinator) Members(ctx context.Context) (map[uuid.UUID][]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.readLocked(ctx, StmtMemberOps, "read reconcilers' operations"); err != nil {
		return nil, err
	}
	out := map[uuid.UUID][]string{}
	for id, m := range c.liveMembersLocked() {
		out[id] = slices.Clone(m.operations)
	}
	return out, nil
}

// Leave implements Coordinator.
func (c *MemoryCoordinator) Leave(ctx context.Context, instance uuid.UUID) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writeLocked(ctx, StmtLeave, "leave reconcilers", func() { delete(c.members, instance) })
}

// Owners implements Coordinator.
func (c *MemoryCoordinator) Owners(ctx context.Context) (map[int]uuid.UUID, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[int]uuid.UUID{}
	if err := c.readLocked(ctx, StmtOwners, "read shard leases"); err != nil {
		return out, err
	}
	for s := range c.leases {
		if l, ok := c.liveLocked(s); ok {
			out[s] = l.owner
		}
	}
	return out, nil
}

// Acquire implements Coordinator: only if nobody holds a live lease.
func (c *MemoryCoordinator) Acquire(ctx context.Context, shard int, instance uuid.UUID, ttl time.Duration) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lwtLocked(ctx, StmtAcquire, "acquire shard lease", shard, instance, true, func() bool {
		if _, held := c.liveLocked(shard); held {
			return false
		}
		c.leases[shard] = lease{owner: instance, expires: c.now().Add(ttlOf(ttl))}
		return true
	})
}

// Renew implements Coordinator: only if instance holds a live lease.
func (c *MemoryCoordinator) Renew(ctx context.Context, shard int, instance uuid.UUID, ttl time.Duration) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lwtLocked(ctx, StmtRenew, "renew shard lease", shard, instance, true, func() bool {
		if l, held := c.liveLocked(shard); !held || l.owner != instance {
			return false
		}
		c.leases[shard] = lease{owner: instance, expires: c.now().Add(ttlOf(ttl))}
		return true
	})
}

// Release implements Coordinator: only if instance holds it; releasing a
// lease instance does not hold is not an error.
func (c *MemoryCoordinator) Release(ctx context.Context, shard int, instance uuid.UUID) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.lwtLocked(ctx, StmtRelease, "release shard lease", shard, instance, false, func() bool {
		if l, held := c.liveLocked(shard); !held || l.owner != instance {
			return false
		}
		delete(c.leases, shard)
		return true
	})
	return err
}

// Cursor implements Coordinator.
func (c *MemoryCoordinator) Cursor(ctx context.Context, shard int) (time.Time, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.readLocked(ctx, StmtCursor, "read reconciler cursor"); err != nil {
		return time.Time{}, false, err
	}
	t, ok := c.cursors[shard]
	return t, ok, nil
}

// SaveCursor implements Coordinator.
func (c *MemoryCoordinator) SaveCursor(ctx context.Context, shard int, bucket time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writeLocked(ctx, StmtSaveCursor, "save reconciler cursor", func() {
		c.cursors[shard] = stored(bucket)
		c.saves[shard] = append(c.saves[shard], stored(bucket))
	})
}

// stored is t as a Cassandra timestamp reads back: UTC, milliseconds.
func stored(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

// ---- test helpers

// SetCursor sets shard's cursor directly.
func (c *MemoryCoordinator) SetCursor(shard int, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cursors[shard] = stored(t)
}

// CursorOf is shard's cursor (false if unset), without faults.
func (c *MemoryCoordinator) CursorOf(shard int) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.cursors[shard]
	return t, ok
}

// Saves lists the cursors SaveCursor stored for shard, in order.
func (c *MemoryCoordinator) Saves(shard int) []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.saves[shard])
}

// LeasesOf lists the shards instance holds a live lease on, sorted.
func (c *MemoryCoordinator) LeasesOf(instance uuid.UUID) []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for s := range c.leases {
		if l, ok := c.liveLocked(s); ok && l.owner == instance {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// IsMember reports whether instance is a live member.
func (c *MemoryCoordinator) IsMember(instance uuid.UUID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.members[instance]
	return ok && c.now().Before(m.expires)
}
