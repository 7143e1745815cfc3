package leases

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// Table is the coordinator's storage, statement by statement: the
// membership (reconciler_members), the shards' leases (reconciler_leases,
// written only with LWTs) and their cursors (reconciler_cursors). The
// protocol (Leases: TTLs in whole seconds, settling a lease LWT's unknown
// outcome, counting members) runs on it and on nothing else, so the one
// protocol runs on Cassandra (NewCQLTable) and, in unit tests, on the
// in-memory table of leasestest; the contract suite
// (leasestest.RunCoordinator) holds both to the same answers.
//
// Each method is one statement, sent once, never retried. Errors are
// *fault.Error values as cassandra.ReadError and WriteError make them: a
// failed read is Unavailable, a refused write Unavailable (not applied), a
// write that timed out or lost its response OutcomeUnknown (it may have
// applied). Times come back as Cassandra returns them: UTC, to the
// millisecond. A ttl is in whole seconds.
type Table interface {
	// WriteMember writes instance's membership row: the operations it
	// finishes, seen at seenAt, living ttl seconds.
	WriteMember(ctx context.Context, instance uuid.UUID, operations []string, seenAt time.Time, ttl int) error
	// ReadMembers lists the live members.
	ReadMembers(ctx context.Context) ([]uuid.UUID, error)
	// ReadMemberOps lists the live members with their operations, as
	// written.
	ReadMemberOps(ctx context.Context) (map[uuid.UUID][]string, error)
	// DeleteMember deletes instance's membership row.
	DeleteMember(ctx context.Context, instance uuid.UUID) error

	// ReadOwners lists the live leases' owners by shard.
	ReadOwners(ctx context.Context) (map[int]uuid.UUID, error)
	// ReadLease reads shard's lease at the serial consistency (which
	// finishes any Paxos round in flight).
	ReadLease(ctx context.Context, shard int) (Lease, error)
	// InsertLease writes shard's lease, owner's since at, living ttl
	// seconds, if there is no live lease: applied.
	InsertLease(ctx context.Context, shard int, owner uuid.UUID, at time.Time, ttl int) (bool, error)
	// UpdateLease rewrites shard's lease, owner's since at, living ttl
	// seconds from now, if owner holds it: applied.
	UpdateLease(ctx context.Context, shard int, owner uuid.UUID, at time.Time, ttl int) (bool, error)
	// DeleteLease deletes shard's lease if owner holds it: applied.
	DeleteLease(ctx context.Context, shard int, owner uuid.UUID) (bool, error)

	// ReadCursor reads shard's cursor; false if it has none.
	ReadCursor(ctx context.Context, shard int) (time.Time, bool, error)
	// WriteCursor overwrites shard's cursor with bucket, dated updatedAt.
	WriteCursor(ctx context.Context, shard int, bucket, updatedAt time.Time) error
}

// Lease is a shard's lease as a serial read found it.
type Lease struct {
	Owner    uuid.UUID
	Acquired time.Time
	Found    bool
}
