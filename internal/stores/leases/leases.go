// Package leases is where reconciler instances meet: their membership,
// the shards' leases (LWT-only) and the shards' cursors, in Cassandra.
// Leases is the protocol, on a Table (one method per statement): the CQL
// table in production, leasestest's in-memory table in unit tests. The
// lease LWTs are settled, like every LWT of the service, through lwt.Do.
package leases

import (
	"context"
	"math"
	"slices"
	"time"

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

// Config configures Leases.
type Config struct {
	// Operations are what this instance's heartbeats say it finishes.
	Operations []string
	// Now is the clock that dates heartbeats, leases and cursors; default
	// time.Now.
	Now func() time.Time
}

// Leases is the Coordinator: its protocol on a Table, which is Cassandra
// in production (NewCassandraCoordinator).
type Leases struct {
	t          Table
	operations []string
	now        func() time.Time
}

var _ Coordinator = (*Leases)(nil)

// New returns the Coordinator on t.
func New(t Table, cfg Config) *Leases {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Leases{t: t, operations: slices.Clone(cfg.Operations), now: cfg.Now}
}

// NewCassandraCoordinator returns the Coordinator on s whose heartbeats say
// that its instance finishes operations.
func NewCassandraCoordinator(s cassandra.Session, operations ...string) *Leases {
	return New(NewCQLTable(s), Config{Operations: operations})
}

// seconds is a TTL as Cassandra keeps it: whole seconds, at least one.
func seconds(d time.Duration) int { return max(1, int(math.Ceil(d.Seconds()))) }

// Heartbeat implements Coordinator.
func (l *Leases) Heartbeat(ctx context.Context, instance uuid.UUID, ttl time.Duration) (int, error) {
	if err := l.t.WriteMember(ctx, instance, l.operations, l.now().UTC(), seconds(ttl)); err != nil {
		return 0, err
	}
	members, err := l.t.ReadMembers(ctx)
	return len(members), err
}

// Members implements Coordinator.
func (l *Leases) Members(ctx context.Context) (map[uuid.UUID][]string, error) {
	out, err := l.t.ReadMemberOps(ctx)
	for id, ops := range out {
		out[id] = slices.Sorted(slices.Values(ops))
	}
	return out, err
}

// Leave implements Coordinator.
func (l *Leases) Leave(ctx context.Context, instance uuid.UUID) error {
	return l.t.DeleteMember(ctx, instance)
}

// Owners implements Coordinator.
func (l *Leases) Owners(ctx context.Context) (map[int]uuid.UUID, error) {
	return l.t.ReadOwners(ctx)
}

// Acquire implements Coordinator.
func (l *Leases) Acquire(ctx context.Context, shard int, instance uuid.UUID, ttl time.Duration) (bool, error) {
	at := l.now().UTC().Truncate(time.Millisecond)
	return l.write(ctx, "acquire shard lease", shard, instance, at, acquire, func(ctx context.Context) (bool, error) {
		return l.t.InsertLease(ctx, shard, instance, at, seconds(ttl))
	})
}

// Renew implements Coordinator.
func (l *Leases) Renew(ctx context.Context, shard int, instance uuid.UUID, ttl time.Duration) (bool, error) {
	at := l.now().UTC().Truncate(time.Millisecond)
	return l.write(ctx, "renew shard lease", shard, instance, at, renew, func(ctx context.Context) (bool, error) {
		return l.t.UpdateLease(ctx, shard, instance, at, seconds(ttl))
	})
}

// Release implements Coordinator.
func (l *Leases) Release(ctx context.Context, shard int, instance uuid.UUID) error {
	_, err := l.write(ctx, "release shard lease", shard, instance, time.Time{}, release, func(ctx context.Context) (bool, error) {
		return l.t.DeleteLease(ctx, shard, instance)
	})
	return err
}

// leaseWrite is which of the lease LWTs a write is.
type leaseWrite int

const (
	acquire leaseWrite = iota
	renew
	release
)

// write runs one lease LWT of instance (an acquire or renew dated at, or a
// release), sent once: the next renewal or pass tries again. An unknown
// outcome is settled by reading the lease at the serial consistency (which
// finishes any round in flight):
//   - the lease shows instance as owner since at: an acquire or renew
//     applied;
//   - a renew that finds the lease still instance's, as acquired before
//     at, did not apply, but the lease is still instance's until its old
//     TTL runs out: an Unavailable error, never "not renewed" (the caller
//     would give up a lease it holds);
//   - no lease of instance: a release applied;
//   - the lease still instance's: a release did not apply, an Unavailable
//     error (never "released": the caller would forget a lease it still
//     holds).
//
// A read that fails too is an error, and then the lease counts as not held
// (at worst it expires by its TTL and a shard waits that long).
func (l *Leases) write(ctx context.Context, op string, shard int, instance uuid.UUID, at time.Time, kind leaseWrite,
	send func(context.Context) (bool, error)) (bool, error) {
	w := lwt.Write[Lease]{
		Op: op,
		Send: func(ctx context.Context) (bool, Lease, error) {
			applied, err := send(ctx)
			return applied, Lease{}, err
		},
		Read:  func(ctx context.Context) (Lease, error) { return l.t.ReadLease(ctx, shard) },
		Sends: 1,
	}
	ours := func(l Lease) bool { return l.Found && l.Owner == instance }
	if kind == release {
		w.Applied = func(l Lease) bool { return !ours(l) }
	} else {
		w.Applied = func(l Lease) bool { return ours(l) && l.Acquired.Equal(at) }
	}
	if kind != acquire {
		w.Awaits = ours // the lease still this instance's: not applied, and still held
	}
	res, err := lwt.Do(ctx, w)
	return res.Applied, err
}

// Cursor implements Coordinator.
func (l *Leases) Cursor(ctx context.Context, shard int) (time.Time, bool, error) {
	return l.t.ReadCursor(ctx, shard)
}

// SaveCursor implements Coordinator.
func (l *Leases) SaveCursor(ctx context.Context, shard int, bucket time.Time) error {
	return l.t.WriteCursor(ctx, shard, bucket, l.now().UTC())
}
