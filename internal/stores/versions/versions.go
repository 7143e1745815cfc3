// Package versions owns an order's authoritative version
// (docs/changes.md): the order_versions table, one partition per changed
// order, written only by LWTs. The version check of a change is
//
//	UPDATE order_versions SET current_version = E+1, status = ..., <the change's row>,
//	       change_outcomes[<change id>] = <accepted at E+1>
//	WHERE tenant = ? AND order_id = ? AND version = E+1
//	IF current_version = E AND status = 'CREATED' AND change_outcomes[<change id>] = null
//	-- IF current_version = null AND ... for E = 1
//
// The condition is on the partition's static columns and the row it writes
// is the change's own, so one Paxos round both decides the precondition and
// records the accepted change; the version a change made is its row's key,
// so no two changes can make one version. A row never changes once written.
// An order with no row here was never changed: it is at version 1.
//
// change_outcomes (migration 0006) keeps every change id's outcome on the
// order for as long as the order: accepted (the version it made) or
// refused (the conflict it was answered). A refusal is recorded by its own
// LWT, IF change_outcomes[<change id>] = null, and the version check
// carries the same condition: whichever of the two lands first is the
// change id's outcome for ever, whatever the ledger has forgotten.
//
// Versions is the protocol, on a Table (one method per statement): the
// CQL table in production, versionstest's in-memory table in unit tests.
package versions

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
)

// Decision is what the version check decided for one change, for good:
// the same change (same change id) gets the same decision every time.
type Decision struct {
	// Accepted: the change holds the version it asked for, applied by this
	// call or by an earlier attempt of the same change (same change id).
	Accepted bool
	// Earlier: accepted, and certainly by an earlier attempt: the order
	// showed the version already, or this call's version check found the
	// change's record there before it (its condition failed). An unknown
	// outcome that a read settles as accepted may be this call's own
	// write: not Earlier.
	Earlier bool
	// Refusal is why a change was not accepted, as recorded under its
	// change id: STALE_VERSION (the order was not at its expected version)
	// or ORDER_CANCELLED, with the order's version when it was decided; or
	// REQUEST_ID_REUSED: its change id's outcome is another command's.
	Refusal order.ChangeOutcome
}

// Record is a change request's outcome on its order, kept under its change
// id in the order's partition for as long as the order: accepted (Version,
// the version it made) or refused (Reason and the order's version then),
// with the fingerprint of the command it was decided for.
type Record struct {
	Fingerprint    string       `json:"fingerprint"`
	Version        int64        `json:"version,omitempty"`
	Reason         fault.Reason `json:"reason,omitempty"`
	CurrentVersion int64        `json:"current_version,omitempty"`
}

// Accepted reports whether the recorded change was accepted.
func (r Record) Accepted() bool { return r.Version > 0 }

// Refusal is a refused change's recorded conflict.
func (r Record) Refusal() order.ChangeOutcome {
	return order.ChangeOutcome{Reason: r.Reason, CurrentVersion: r.CurrentVersion}
}

// Encode is the stored form of a record (a change_outcomes value).
func (r Record) Encode() string {
	b, err := json.Marshal(r)
	if err != nil {
		panic(fmt.Sprintf("versions: encode a change record: %v", err))
	}
	return string(b)
}

// DecodeRecord reads a record stored by Encode.
func DecodeRecord(s string) (Record, error) {
	var r Record
	if err := json.Unmarshal([]byte(s), &r); err != nil || r.Fingerprint == "" || (r.Version == 0) == (r.Reason == "") {
		return Record{}, fault.New(fault.ReasonInternal, fmt.Errorf("decode a change's record %q: %v", s, err))
	}
	return r, nil
}

// acceptedRecord is what the version check records for ch.
func acceptedRecord(ch order.Change) Record {
	return Record{Fingerprint: ch.Fingerprint, Version: ch.Version}
}

// Store is the order's authoritative version. Errors are *fault.Error
// values: Unavailable (definitely not decided now), OutcomeUnknown (the
// change may have been decided and no read could settle it) or Internal.
type Store interface {
	// Apply makes c the change from version c.Version-1 to c.Version if the
	// order is at that version, not cancelled, and c's change id has no
	// outcome yet; else it records c's refusal under its change id (unless
	// one is recorded). Run again after any error, by another finisher of
	// the same change, or long after, it answers the same. shown is the
	// version the order's row showed the caller: a history behind it
	// decides nothing (ErrHistoryBehind; Versions.Apply says why).
	Apply(ctx context.Context, c order.Change, shown int64) (Decision, error)
	// History reads the accepted changes that made versions 2 to upTo,
	// oldest first, at LOCAL_QUORUM (fewer if the order is not that far).
	History(ctx context.Context, tenant string, orderID uuid.UUID, upTo int64) ([]order.Change, error)
	// Lookup reads the outcome recorded for change id on the order at
	// LOCAL_QUORUM: its record, or, for a change accepted by a version
	// that wrote no record, its history row's (false: none). A miss is
	// never a wrong answer: Apply decides with the record's condition.
	Lookup(ctx context.Context, tenant string, orderID, changeID uuid.UUID) (Record, bool, error)
	// Bind records that the change request key is for order orderID
	// (change_requests: no TTL), a plain idempotent write at LOCAL_QUORUM.
	Bind(ctx context.Context, tenant, operation string, requestID, orderID uuid.UUID) error
	// Bound reads the order a change request id was bound to (false:
	// none) at LOCAL_QUORUM.
	Bound(ctx context.Context, tenant, operation string, requestID uuid.UUID) (uuid.UUID, bool, error)
}

// Statement names (cassandra.StatementName), for faults and traces.
const (
	StmtApply   cassandra.Stmt = "versions.apply"
	StmtRefuse  cassandra.Stmt = "versions.refuse"  // the LWT that records a refusal
	StmtState   cassandra.Stmt = "versions.state"   // the settling read of the order's version and a change's record
	StmtHistory cassandra.Stmt = "versions.history" // History, and the read of a version's change
	StmtLookup  cassandra.Stmt = "versions.lookup"  // Lookup
	StmtBind    cassandra.Stmt = "versions.bind"    // Bind
	StmtBound   cassandra.Stmt = "versions.bound"   // Bound
)

// Statements names every statement the store runs.
var Statements = []cassandra.Stmt{StmtApply, StmtRefuse, StmtState, StmtHistory, StmtLookup, StmtBind, StmtBound}
