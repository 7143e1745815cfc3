package leasestest

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/platform/cassandra"
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
	if now == nil {
		now = time.Now
	}
	t := &table{faults: cassandra.NewFaults(), now: now, members: map[uuid.UUID]expiring[[]string]{},
		leases: map[int]expiring[leases.Lease]{}, cursors: map[int]time.Time{}, saves: map[int][]time.Time{}}
	return t.coordinator()
}

// Advertising is a coordinator on the same table whose heartbeats say its
// instance finishes operations (leases.Config.Operations).
func (c *MemoryCoordinator) Advertising(operations ...string) *MemoryCoordinator {
	return c.t.coordinator(operations...)
}

func (t *table) coordinator(operations ...string) *MemoryCoordinator {
	l := leases.New(t, leases.Config{Operations: operations, Now: t.now})
	return &MemoryCoordinator{Leases: l, Faults: t.faults, t: t}
}

// table is leases.Table in memory: rows with their TTLs, each statement
// atomic, conditions evaluated as Cassandra evaluates them. It knows
// nothing of the protocol (leases.Leases runs that on it).
type table struct {
	faults *cassandra.Faults
	now    func() time.Time

	mu      sync.Mutex
	members map[uuid.UUID]expiring[[]string] // each member's operations
	leases  map[int]expiring[leases.Lease]
	cursors map[int]time.Time
	saves   map[int][]time.Time // the cursors written, per shard, in order
}

// expiring is a row written with a TTL.
type expiring[V any] struct {
	v       V
	expires time.Time
}

func expire[V any](v V, now time.Time, ttl int) expiring[V] {
	return expiring[V]{v: v, expires: now.Add(time.Duration(ttl) * time.Second)}
}

// live drops the rows whose TTL ran out at now, as Cassandra would, and
// returns the rest.
func live[K comparable, V any](rows map[K]expiring[V], now time.Time) map[K]expiring[V] {
	maps.DeleteFunc(rows, func(_ K, r expiring[V]) bool { return !now.Before(r.expires) })
	return rows
}

// ms is t as a Cassandra timestamp reads back: UTC, milliseconds.
func ms(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

// exec runs one statement as the CQL table's session would, under the
// fault armed for it (cassandra.Served, as every fake serves faults): do
// runs under the lock, with the table's time, and reports whether it
// applied.
func (t *table) exec(ctx context.Context, stmt, op string, write bool, do func(now time.Time) bool) (bool, error) {
	f, _ := t.faults.Take(stmt)
	return cassandra.Served(ctx, stmt, op, write, f, func() bool {
		t.mu.Lock()
		defer t.mu.Unlock()
		return do(t.now())
	})
}

// read runs a read; what do read counts only without an error.
func (t *table) read(ctx context.Context, stmt, op string, do func(now time.Time)) error {
	_, err := t.exec(ctx, stmt, op, false, func(now time.Time) bool { do(now); return false })
	return err
}

// write runs a plain write.
func (t *table) write(ctx context.Context, stmt, op string, do func(now time.Time)) error {
	_, err := t.exec(ctx, stmt, op, true, func(now time.Time) bool { do(now); return true })
	return err
}

func (t *table) WriteMember(ctx context.Context, instance uuid.UUID, operations []string, _ time.Time, ttl int) error {
	return t.write(ctx, leases.StmtHeartbeat, "reconciler heartbeat", func(now time.Time) {
		t.members[instance] = expire(slices.Clone(operations), now, ttl)
	})
}

func (t *table) ReadMembers(ctx context.Context) (out []uuid.UUID, err error) {
	err = t.read(ctx, leases.StmtMembers, "count reconcilers", func(now time.Time) {
		out = slices.Collect(maps.Keys(live(t.members, now)))
	})
	return out, err
}

func (t *table) ReadMemberOps(ctx context.Context) (map[uuid.UUID][]string, error) {
	out := map[uuid.UUID][]string{}
	err := t.read(ctx, leases.StmtMemberOps, "read reconcilers' operations", func(now time.Time) {
		for id, m := range live(t.members, now) {
			out[id] = slices.Clone(m.v)
		}
	})
	return out, err
}

func (t *table) DeleteMember(ctx context.Context, instance uuid.UUID) error {
	return t.write(ctx, leases.StmtLeave, "leave reconcilers", func(time.Time) { delete(t.members, instance) })
}

func (t *table) ReadOwners(ctx context.Context) (map[int]uuid.UUID, error) {
	out := map[int]uuid.UUID{}
	err := t.read(ctx, leases.StmtOwners, "read shard leases", func(now time.Time) {
		for s, l := range live(t.leases, now) {
			out[s] = l.v.Owner
		}
	})
	return out, err
}

func (t *table) ReadLease(ctx context.Context, shard int) (l leases.Lease, err error) {
	err = t.read(ctx, leases.StmtLease, "read shard lease", func(now time.Time) { l = live(t.leases, now)[shard].v })
	return l, err
}

// InsertLease implements leases.Table: IF NOT EXISTS.
func (t *table) InsertLease(ctx context.Context, shard int, owner uuid.UUID, at time.Time, ttl int) (bool, error) {
	return t.exec(ctx, leases.StmtAcquire, "acquire shard lease", true, func(now time.Time) bool {
		return !live(t.leases, now)[shard].v.Found && t.put(shard, owner, at, now, ttl)
	})
}

// UpdateLease implements leases.Table: IF owner = owner.
func (t *table) UpdateLease(ctx context.Context, shard int, owner uuid.UUID, at time.Time, ttl int) (bool, error) {
	return t.exec(ctx, leases.StmtRenew, "renew shard lease", true, func(now time.Time) bool {
		return t.heldBy(shard, owner, now) && t.put(shard, owner, at, now, ttl)
	})
}

// DeleteLease implements leases.Table: IF owner = owner.
func (t *table) DeleteLease(ctx context.Context, shard int, owner uuid.UUID) (bool, error) {
	return t.exec(ctx, leases.StmtRelease, "release shard lease", true, func(now time.Time) bool {
		if !t.heldBy(shard, owner, now) {
			return false
		}
		delete(t.leases, shard)
		return true
	})
}

func (t *table) heldBy(shard int, owner uuid.UUID, now time.Time) bool {
	l := live(t.leases, now)[shard].v
	return l.Found && l.Owner == owner
}

// put writes shard's lease (a lease LWT whose condition held).
func (t *table) put(shard int, owner uuid.UUID, at, now time.Time, ttl int) bool {
	t.leases[shard] = expire(leases.Lease{Owner: owner, Acquired: ms(at), Found: true}, now, ttl)
	return true
}

func (t *table) ReadCursor(ctx context.Context, shard int) (at time.Time, ok bool, err error) {
	err = t.read(ctx, leases.StmtCursor, "read reconciler cursor", func(time.Time) { at, ok = t.cursors[shard] })
	return at, ok && err == nil, err
}

func (t *table) WriteCursor(ctx context.Context, shard int, bucket, _ time.Time) error {
	return t.write(ctx, leases.StmtSaveCursor, "save reconciler cursor", func(time.Time) {
		t.cursors[shard] = ms(bucket)
		t.saves[shard] = append(t.saves[shard], ms(bucket))
	})
}

// ---- test helpers: no statement runs, no fault is served

// locked runs do under the table's lock, with its time.
func (c *MemoryCoordinator) locked(do func(now time.Time)) {
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	do(c.t.now())
}

// SetCursor sets shard's cursor.
func (c *MemoryCoordinator) SetCursor(shard int, at time.Time) {
	c.locked(func(time.Time) { c.t.cursors[shard] = ms(at) })
}

// CursorOf is shard's cursor (false if unset).
func (c *MemoryCoordinator) CursorOf(shard int) (at time.Time, ok bool) {
	c.locked(func(time.Time) { at, ok = c.t.cursors[shard] })
	return at, ok
}

// Saves lists the cursors SaveCursor stored for shard, in order.
func (c *MemoryCoordinator) Saves(shard int) (out []time.Time) {
	c.locked(func(time.Time) { out = slices.Clone(c.t.saves[shard]) })
	return out
}

// LeasesOf lists the shards instance holds a live lease on, sorted.
func (c *MemoryCoordinator) LeasesOf(instance uuid.UUID) (out []int) {
	c.locked(func(now time.Time) {
		for s, l := range live(c.t.leases, now) {
			if l.v.Owner == instance {
				out = append(out, s)
			}
		}
	})
	slices.Sort(out)
	return out
}

// IsMember reports whether instance is a live member.
func (c *MemoryCoordinator) IsMember(instance uuid.UUID) (ok bool) {
	c.locked(func(now time.Time) { _, ok = live(c.t.members, now)[instance] })
	return ok
}
