// Package versions owns an order's authoritative version (issue 13,
// docs/changes.md): the order_versions table, one partition per changed
// order, written only by the version check of a change, an LWT:
//
//	UPDATE order_versions SET current_version = E+1, status = ..., <the change's row>
//	WHERE tenant = ? AND order_id = ? AND version = E+1
//	IF current_version = E AND status = 'CREATED'   -- IF current_version = null for E = 1
//
// The condition is on the partition's static columns and the row it writes
// is the change's own, so one Paxos round both decides the precondition and
// records the accepted change; the version a change made is its row's key,
// so no two changes can make one version. A row never changes once written.
// An order with no partition here was never changed: it is at version 1.
package versions

import (
	"context"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/order"
)

// Decision is what the version check decided for one change.
type Decision struct {
	// Accepted: the change holds the version it asked for, applied by this
	// call or by an earlier attempt of the same change (same change id).
	Accepted bool
	// Current and Status are the order's version and status when a change
	// was not accepted: Current ≠ its expected version (STALE_VERSION), or
	// Status is CANCELLED (ORDER_CANCELLED).
	Current int64
	Status  string
}

// Store is the order's authoritative version. Errors are *fault.Error
// values: Unavailable (definitely not applied), OutcomeUnknown (the
// change may have applied and no read could settle it) or Internal.
type Store interface {
	// Apply makes c the change from version c.Version-1 to c.Version if the
	// order is at that version and not cancelled. Run again after any
	// error, or by another finisher of the same change, it answers the same.
	Apply(ctx context.Context, c order.Change) (Decision, error)
	// History reads the accepted changes that made versions 2 to upTo,
	// oldest first, at LOCAL_QUORUM (fewer if the order is not that far).
	History(ctx context.Context, tenant string, orderID uuid.UUID, upTo int64) ([]order.Change, error)
}

// Statement names (cassandra.StatementName), for faults and traces.
const (
	StmtApply   = "versions.apply"
	StmtState   = "versions.state"   // the settling read of the order's version
	StmtHistory = "versions.history" // History, and the read of a version's change
)
