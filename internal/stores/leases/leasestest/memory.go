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
	t := &table{faults: cassandra.NewFaults(), now: now, members: map[uuid.UUID]member{}, leases: map[int]lease{},
		cursors: map[int]time.Time{}, saves: map[int][]time.Time{}}
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
	members map[uuid.UUID]member
	leases  map[int]lease
	cursors map[int]time.Time
	saves   map[int][]time.Time // the cursors WriteCursor wrote, per shard
}

type member struct {
	operations []string
	expires    time.Time
}

type lease struct {
	owner    uuid.UUID
	acquired time.Time
	expires  time.Time
}

var _ leases.Table = (*table)(nil)

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

// read runs a read statement: what do read, or the statement's error.
func read[T any](ctx context.Context, t *table, stmt, op string, do func(now time.Time) T) (T, error) {
	var out T
	_, err := t.exec(ctx, stmt, op, false, func(now time.Time) bool { out = do(now); return false })
	if err != nil {
		var none T
		return none, err
	}
	return out, nil
}

// expiresAt is when a row written at now with ttl seconds expires.
func expiresAt(now time.Time, ttl int) time.Time { return now.Add(time.Duration(ttl) * time.Second) }

// ms is t as a Cassandra timestamp reads back: UTC, milliseconds.
func ms(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

// liveMembersLocked drops the members whose TTL ran out and returns the rest.
func (t *table) liveMembersLocked(now time.Time) map[uuid.UUID]member {
	for id, m := range t.members {
		if !now.Before(m.expires) {
			delete(t.members, id)
		}
	}
	return t.members
}

// liveLeaseLocked is shard's lease, unless its TTL ran out.
func (t *table) liveLeaseLocked(shard int, now time.Time) (lease, bool) {
	l, ok := t.leases[shard]
	if ok && !now.Before(l.expires) {
		delete(t.leases, shard)
		return lease{}, false
	}
	return l, ok
}

func (t *table) WriteMember(ctx context.Context, instance uuid.UUID, operations []string, _ time.Time, ttl int) error {
	_, err := t.exec(ctx, leases.StmtHeartbeat, "reconciler heartbeat", true, func(now time.Time) bool {
		t.members[instance] = member{operations: slices.Clone(operations), expires: expiresAt(now, ttl)}
		return true
	})
	return err
}

func (t *table) ReadMembers(ctx context.Context) ([]uuid.UUID, error) {
	return read(ctx, t, leases.StmtMembers, "count reconcilers", func(now time.Time) []uuid.UUID {
		return slices.Collect(maps.Keys(t.liveMembersLocked(now)))
	})
}

func (t *table) ReadMemberOps(ctx context.Context) (map[uuid.UUID][]string, error) {
	return read(ctx, t, leases.StmtMemberOps, "read reconcilers' operations", func(now time.Time) map[uuid.UUID][]string {
		out := map[uuid.UUID][]string{}
		for id, m := range t.liveMembersLocked(now) {
			out[id] = slices.Clone(m.operations)
		}
		return out
	})
}

func (t *table) DeleteMember(ctx context.Context, instance uuid.UUID) error {
	_, err := t.exec(ctx, leases.StmtLeave, "leave reconcilers", true, func(time.Time) bool {
		delete(t.members, instance)
		return true
	})
	return err
}

func (t *table) ReadOwners(ctx context.Context) (map[int]uuid.UUID, error) {
	return read(ctx, t, leases.StmtOwners, "read shard leases", func(now time.Time) map[int]uuid.UUID {
		out := map[int]uuid.UUID{}
		for s := range t.leases {
			if l, ok := t.liveLeaseLocked(s, now); ok {
				out[s] = l.owner
			}
		}
		return out
	})
}

func (t *table) ReadLease(ctx context.Context, shard int) (leases.Lease, error) {
	return read(ctx, t, leases.StmtLease, "read shard lease", func(now time.Time) leases.Lease {
		l, ok := t.liveLeaseLocked(shard, now)
		return leases.Lease{Owner: l.owner, Acquired: l.acquired, Found: ok}
	})
}

// InsertLease implements leases.Table: IF NOT EXISTS.
func (t *table) InsertLease(ctx context.Context, shard int, owner uuid.UUID, at time.Time, ttl int) (bool, error) {
	return t.exec(ctx, leases.StmtAcquire, "acquire shard lease", true, func(now time.Time) bool {
		if _, held := t.liveLeaseLocked(shard, now); held {
			return false
		}
		t.leases[shard] = lease{owner: owner, acquired: ms(at), expires: expiresAt(now, ttl)}
		return true
	})
}

// UpdateLease implements leases.Table: IF owner = owner.
func (t *table) UpdateLease(ctx context.Context, shard int, owner uuid.UUID, at time.Time, ttl int) (bool, error) {
	return t.exec(ctx, leases.StmtRenew, "renew shard lease", true, func(now time.Time) bool {
		if l, held := t.liveLeaseLocked(shard, now); !held || l.owner != owner {
			return false
		}
		t.leases[shard] = lease{owner: owner, acquired: ms(at), expires: expiresAt(now, ttl)}
		return true
	})
}

// DeleteLease implements leases.Table: IF owner = owner.
func (t *table) DeleteLease(ctx context.Context, shard int, owner uuid.UUID) (bool, error) {
	return t.exec(ctx, leases.StmtRelease, "release shard lease", true, func(now time.Time) bool {
		if l, held := t.liveLeaseLocked(shard, now); !held || l.owner != owner {
			return false
		}
		delete(t.leases, shard)
		return true
	})
}

type cursor struct {
	at  time.Time
	set bool
}

func (t *table) ReadCursor(ctx context.Context, shard int) (time.Time, bool, error) {
	c, err := read(ctx, t, leases.StmtCursor, "read reconciler cursor", func(time.Time) cursor {
		at, ok := t.cursors[shard]
		return cursor{at, ok}
	})
	return c.at, c.set, err
}

func (t *table) WriteCursor(ctx context.Context, shard int, bucket, _ time.Time) error {
	_, err := t.exec(ctx, leases.StmtSaveCursor, "save reconciler cursor", true, func(time.Time) bool {
		t.cursors[shard] = ms(bucket)
		t.saves[shard] = append(t.saves[shard], ms(bucket))
		return true
	})
	return err
}

// ---- test helpers

// SetCursor sets shard's cursor directly.
func (c *MemoryCoordinator) SetCursor(shard int, at time.Time) {
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	c.t.cursors[shard] = ms(at)
}

// CursorOf is shard's cursor (false if unset), without faults.
func (c *MemoryCoordinator) CursorOf(shard int) (time.Time, bool) {
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	at, ok := c.t.cursors[shard]
	return at, ok
}

// Saves lists the cursors SaveCursor stored for shard, in order.
func (c *MemoryCoordinator) Saves(shard int) []time.Time {
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	return slices.Clone(c.t.saves[shard])
}

// LeasesOf lists the shards instance holds a live lease on, sorted.
func (c *MemoryCoordinator) LeasesOf(instance uuid.UUID) []int {
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	var out []int
	now := c.t.now()
	for s := range c.t.leases {
		if l, ok := c.t.liveLeaseLocked(s, now); ok && l.owner == instance {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// IsMember reports whether instance is a live member.
func (c *MemoryCoordinator) IsMember(instance uuid.UUID) bool {
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	_, ok := c.t.liveMembersLocked(c.t.now())[instance]
	return ok
}
