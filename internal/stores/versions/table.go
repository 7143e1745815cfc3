package versions

import (
	"context"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/domain/order"
)

// Table is the store's storage, statement by statement: order_versions
// (one partition per changed order, written only by LWTs) and
// change_requests. The protocol (Versions: the version check, the
// refusal's record, settling their unknown outcomes, Lookup's fallback)
// runs on it and on nothing else, so the one protocol runs on Cassandra
// (NewCQLTable) and, in unit tests, on versionstest's in-memory table; the
// contract suite (versionstest.Run) holds both to the same answers.
//
// Each method is one statement, sent once, never retried. Errors are
// *fault.Error values as cassandra.ReadError and WriteError make them
// (Internal for a record that cannot be decoded).
type Table interface {
	// ApplyOnce sends ch's version check: applied, or the state its
	// condition found (with ch's record, if any).
	ApplyOnce(ctx context.Context, ch order.Change) (State, bool, error)
	// RefuseOnce records r under ch's change id if it has none: applied,
	// or the state its condition found (with the record there).
	RefuseOnce(ctx context.Context, ch order.Change, r Record) (State, bool, error)
	// ReadState reads the order's state and ch's record at the serial
	// consistency: it finishes or invalidates any Paxos round in flight.
	ReadState(ctx context.Context, ch order.Change) (State, error)
	// ReadChanges reads the changes that made versions from to upTo at
	// LOCAL_QUORUM, oldest first.
	ReadChanges(ctx context.Context, tenant string, orderID uuid.UUID, from, upTo int64) ([]order.Change, error)
	// ReadOutcome reads the order's partition at LOCAL_QUORUM for what it
	// holds of changeID: the record under it (nil: none), and, from the row
	// of the version the change made, if any, the record an acceptance
	// would have (nil: no row names it).
	ReadOutcome(ctx context.Context, tenant string, orderID, changeID uuid.UUID) (recorded, row *Record, err error)
	// Bind writes that the change request key is for order orderID
	// (change_requests: no TTL), a plain idempotent write at LOCAL_QUORUM.
	Bind(ctx context.Context, tenant, operation string, requestID, orderID uuid.UUID) error
	// Bound reads the order a change request id was bound to (false:
	// none) at LOCAL_QUORUM.
	Bound(ctx context.Context, tenant, operation string, requestID uuid.UUID) (uuid.UUID, bool, error)
}

// State is what an LWT's condition or a settling read found of an order:
// its version and status, and the record under one change id (nil: none).
// An order never changed is at version 1, CREATED.
type State struct {
	Current int64
	Status  string
	Record  *Record
}
