package leasestest

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/platform/cassandra/memtable"
	"github.com/atlasmart/orderd/internal/stores/leases"
)

// MemoryCoordinator is leases.Leases, the coordinator's own protocol, on an
// in-memory table (see the package doc) whose TTLs follow an injectable
// clock. Safe for concurrent use.
type MemoryCoordinator struct {
	*leases.Leases
	// Faults armed by statement name (leases.StmtAcquire, ...), served as a
	// cassandra.FaultSession serves them: Arm, Hits, Pending.
	*cassandra.Faults
	t *table
}

var _ leases.Coordinator = (*MemoryCoordinator)(nil)

// NewMemoryCoordinator returns an empty coordinator on the clock now
// (time.Now if nil).
func NewMemoryCoordinator(now func() time.Time) *MemoryCoordinator {
	t := &table{rt: memtable.New(now), members: map[uuid.UUID]memtable.Expiring[[]string]{},
		leases: map[int]memtable.Expiring[leases.Lease]{}, cursors: map[int]time.Time{}, saves: map[int][]time.Time{}}
	return t.coordinator()
}

// Advertising is a coordinator on the same table whose heartbeats say its
// instance finishes operations (leases.Config.Operations).
func (c *MemoryCoordinator) Advertising(operations ...string) *MemoryCoordinator {
	return c.t.coordinator(operations...)
}

func (t *table) coordinator(operations ...string) *MemoryCoordinator {
	l := leases.New(t, leases.Config{Operations: operations, Now: t.rt.Now})
	return &MemoryCoordinator{Leases: l, Faults: t.rt.Faults, t: t}
}

// table is leases.Table in memory: rows with their TTLs, each statement
// atomic, conditions evaluated as Cassandra evaluates them. It knows
// nothing of the protocol (leases.Leases runs that on it).
type table struct {
	rt      *memtable.Runtime
	members map[uuid.UUID]memtable.Expiring[[]string] // each member's operations
	leases  map[int]memtable.Expiring[leases.Lease]
	cursors map[int]time.Time
	saves   map[int][]time.Time // the cursors written, per shard, in order
}

func (t *table) WriteMember(ctx context.Context, instance uuid.UUID, operations []string, _ time.Time, ttl int) error {
	return t.rt.Write(ctx, leases.StmtHeartbeat, instance, "reconciler heartbeat", func(now time.Time) {
		t.members[instance] = memtable.Expire(slices.Clone(operations), now, ttl)
	})
}

func (t *table) ReadMembers(ctx context.Context) (out []uuid.UUID, err error) {
	err = t.rt.Read(ctx, leases.StmtMembers, nil, "count reconcilers", func(now time.Time) {
		out = slices.Collect(maps.Keys(memtable.Live(t.members, now)))
	})
	return out, err
}

func (t *table) ReadMemberOps(ctx context.Context) (map[uuid.UUID][]string, error) {
	out := map[uuid.UUID][]string{}
	err := t.rt.Read(ctx, leases.StmtMemberOps, nil, "read reconcilers' operations", func(now time.Time) {
		for id, m := range memtable.Live(t.members, now) {
			out[id] = slices.Clone(m.V)
		}
	})
	return out, err
}

func (t *table) DeleteMember(ctx context.Context, instance uuid.UUID) error {
	return t.rt.Write(ctx, leases.StmtLeave, instance, "leave reconcilers", func(time.Time) { delete(t.members, instance) })
}

func (t *table) ReadOwners(ctx context.Context) (map[int]uuid.UUID, error) {
	out := map[int]uuid.UUID{}
	err := t.rt.Read(ctx, leases.StmtOwners, nil, "read shard leases", func(now time.Time) {
		for s, l := range memtable.Live(t.leases, now) {
			out[s] = l.V.Owner
		}
	})
	return out, err
}

func (t *table) ReadLease(ctx context.Context, shard int) (l leases.Lease, err error) {
	err = t.rt.Read(ctx, leases.StmtLease, shard, "read shard lease", func(now time.Time) { l = memtable.Live(t.leases, now)[shard].V })
	return l, err
}

// InsertLease implements leases.Table: IF NOT EXISTS.
func (t *table) InsertLease(ctx context.Context, shard int, owner uuid.UUID, at time.Time, ttl int) (bool, error) {
	return t.rt.Exec(ctx, leases.StmtAcquire, shard, "acquire shard lease", true, func(now time.Time) bool {
		return !memtable.Live(t.leases, now)[shard].V.Found && t.put(shard, owner, at, now, ttl)
	})
}

// UpdateLease implements leases.Table: IF owner = owner.
func (t *table) UpdateLease(ctx context.Context, shard int, owner uuid.UUID, at time.Time, ttl int) (bool, error) {
	return t.rt.Exec(ctx, leases.StmtRenew, shard, "renew shard lease", true, func(now time.Time) bool {
		return t.heldBy(shard, owner, now) && t.put(shard, owner, at, now, ttl)
	})
}

// DeleteLease implements leases.Table: IF owner = owner.
func (t *table) DeleteLease(ctx context.Context, shard int, owner uuid.UUID) (bool, error) {
	return t.rt.Exec(ctx, leases.StmtRelease, shard, "release shard lease", true, func(now time.Time) bool {
		if !t.heldBy(shard, owner, now) {
			return false
		}
		delete(t.leases, shard)
		return true
	})
}

func (t *table) heldBy(shard int, owner uuid.UUID, now time.Time) bool {
	l := memtable.Live(t.leases, now)[shard].V
	return l.Found && l.Owner == owner
}

// put writes shard's lease (a lease LWT whose condition held).
func (t *table) put(shard int, owner uuid.UUID, at, now time.Time, ttl int) bool {
	t.leases[shard] = memtable.Expire(leases.Lease{Owner: owner, Acquired: memtable.MS(at), Found: true}, now, ttl)
	return true
}

func (t *table) ReadCursor(ctx context.Context, shard int) (at time.Time, ok bool, err error) {
	err = t.rt.Read(ctx, leases.StmtCursor, shard, "read reconciler cursor", func(time.Time) { at, ok = t.cursors[shard] })
	return at, ok && err == nil, err
}

func (t *table) WriteCursor(ctx context.Context, shard int, bucket, _ time.Time) error {
	return t.rt.Write(ctx, leases.StmtSaveCursor, shard, "save reconciler cursor", func(time.Time) {
		t.cursors[shard] = memtable.MS(bucket)
		t.saves[shard] = append(t.saves[shard], memtable.MS(bucket))
	})
}

// ---- test helpers: no statement runs, no fault is served

// SetCursor sets shard's cursor.
func (c *MemoryCoordinator) SetCursor(shard int, at time.Time) {
	c.t.rt.Locked(func(time.Time) { c.t.cursors[shard] = memtable.MS(at) })
}

// CursorOf is shard's cursor (false if unset).
func (c *MemoryCoordinator) CursorOf(shard int) (at time.Time, ok bool) {
	c.t.rt.Locked(func(time.Time) { at, ok = c.t.cursors[shard] })
	return at, ok
}

// Saves lists the cursors SaveCursor stored for shard, in order.
func (c *MemoryCoordinator) Saves(shard int) (out []time.Time) {
	c.t.rt.Locked(func(time.Time) { out = slices.Clone(c.t.saves[shard]) })
	return out
}

// LeasesOf lists the shards instance holds a live lease on, sorted.
func (c *MemoryCoordinator) LeasesOf(instance uuid.UUID) (out []int) {
	c.t.rt.Locked(func(now time.Time) {
		for s, l := range memtable.Live(c.t.leases, now) {
			if l.V.Owner == instance {
				out = append(out, s)
			}
		}
	})
	slices.Sort(out)
	return out
}

// IsMember reports whether instance is a live member.
func (c *MemoryCoordinator) IsMember(instance uuid.UUID) (ok bool) {
	c.t.rt.Locked(func(now time.Time) { _, ok = memtable.Live(c.t.members, now)[instance] })
	return ok
}
