package leasestest

import (
	"context"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/platform/lwt"
	"github.com/atlasmart/orderd/internal/stores/leases"
)

type lease struct {
	owner    uuid.UUID
	acquired time.Time
	expires  time.Time
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
	// Faults armed by statement name (leases.StmtAcquire, ...), served as a
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

var _ leases.Coordinator = (*MemoryCoordinator)(nil)

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
// instance finishes operations (leases.NewCassandraCoordinator's
// operations).
func (c *MemoryCoordinator) Advertising(operations ...string) *MemoryCoordinator {
	return &MemoryCoordinator{memoryTables: c.memoryTables, operations: slices.Clone(operations)}
}

// ttlOf is a TTL as Cassandra keeps it: whole seconds, at least one
// (leases.CassandraCoordinator rounds up).
func ttlOf(d time.Duration) time.Duration {
	return time.Duration(max(1, int(math.Ceil(d.Seconds())))) * time.Second
}

// writeLocked runs a plain write of statement under the fault armed for
// it (cassandra.Served, as every fake serves faults): the error a
// CassandraCoordinator write returns.
func (c *MemoryCoordinator) writeLocked(ctx context.Context, statement, op string, apply func()) error {
	f, _ := c.Take(statement)
	_, err := cassandra.Served(ctx, statement, op, true, f, func() bool { apply(); return true })
	return err
}

// readLocked fails as a read of statement would: any fault is Unavailable.
func (c *MemoryCoordinator) readLocked(ctx context.Context, statement, op string) error {
	f, _ := c.Take(statement)
	_, err := cassandra.Served(ctx, statement, op, false, f, func() bool { return false })
	return err
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

// lwtLocked runs a lease LWT as CassandraCoordinator.cas does, settled by
// the same leases.LeaseWrite: apply (dated at, which it reports
// whether its condition held) under the fault armed for statement; an
// unknown outcome is settled by reading the lease (leases.StmtLease).
func (c *MemoryCoordinator) lwtLocked(ctx context.Context, statement, op string, shard int, instance uuid.UUID, take bool, apply func(at time.Time) bool) (bool, error) {
	at := c.now().UTC().Truncate(time.Millisecond)
	send := func(ctx context.Context) (bool, error) {
		f, _ := c.Take(statement)
		return cassandra.Served(ctx, statement, op, true, f, func() bool { return apply(at) })
	}
	read := func(ctx context.Context) (leases.Lease, error) {
		if err := c.readLocked(ctx, leases.StmtLease, "read shard lease"); err != nil {
			return leases.Lease{}, err
		}
		l, ok := c.liveLocked(shard)
		return leases.Lease{Owner: l.owner, Acquired: l.acquired, Found: ok}, nil
	}
	res, err := lwt.Do(ctx, leases.LeaseWrite(op, instance, at, take, send, read))
	return res.Applied, err
}

// Heartbeat implements Coordinator.
func (c *MemoryCoordinator) Heartbeat(ctx context.Context, instance uuid.UUID, ttl time.Duration) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if err := c.writeLocked(ctx, leases.StmtHeartbeat, "reconciler heartbeat", func() {
		c.members[instance] = member{expires: now.Add(ttlOf(ttl)), operations: slices.Sorted(slices.Values(c.operations))}
	}); err != nil {
		return 0, err
	}
	if err := c.readLocked(ctx, leases.StmtMembers, "count reconcilers"); err != nil {
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
	if err := c.readLocked(ctx, leases.StmtMemberOps, "read reconcilers' operations"); err != nil {
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
	return c.writeLocked(ctx, leases.StmtLeave, "leave reconcilers", func() { delete(c.members, instance) })
}

// Owners implements Coordinator.
func (c *MemoryCoordinator) Owners(ctx context.Context) (map[int]uuid.UUID, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[int]uuid.UUID{}
	if err := c.readLocked(ctx, leases.StmtOwners, "read shard leases"); err != nil {
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
	return c.lwtLocked(ctx, leases.StmtAcquire, "acquire shard lease", shard, instance, true, func(at time.Time) bool {
		if _, held := c.liveLocked(shard); held {
			return false
		}
		c.leases[shard] = lease{owner: instance, acquired: at, expires: c.now().Add(ttlOf(ttl))}
		return true
	})
}

// Renew implements Coordinator: only if instance holds a live lease.
func (c *MemoryCoordinator) Renew(ctx context.Context, shard int, instance uuid.UUID, ttl time.Duration) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lwtLocked(ctx, leases.StmtRenew, "renew shard lease", shard, instance, true, func(at time.Time) bool {
		if l, held := c.liveLocked(shard); !held || l.owner != instance {
			return false
		}
		c.leases[shard] = lease{owner: instance, acquired: at, expires: c.now().Add(ttlOf(ttl))}
		return true
	})
}

// Release implements Coordinator: only if instance holds it; releasing a
// lease instance does not hold is not an error.
func (c *MemoryCoordinator) Release(ctx context.Context, shard int, instance uuid.UUID) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.lwtLocked(ctx, leases.StmtRelease, "release shard lease", shard, instance, false, func(time.Time) bool {
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
	if err := c.readLocked(ctx, leases.StmtCursor, "read reconciler cursor"); err != nil {
		return time.Time{}, false, err
	}
	t, ok := c.cursors[shard]
	return t, ok, nil
}

// SaveCursor implements Coordinator.
func (c *MemoryCoordinator) SaveCursor(ctx context.Context, shard int, bucket time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writeLocked(ctx, leases.StmtSaveCursor, "save reconciler cursor", func() {
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
