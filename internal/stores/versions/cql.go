package versions

import (
	"context"
	"errors"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
)

const (
	setChange = `current_version = ?, status = ?, change_id = ?, operation = ?, request_id = ?, payload_hash = ?,
		new_status = ?, shipping_note = ?, changed_at = ?, change_outcomes[?] = ?
		WHERE tenant = ? AND order_id = ? AND version = ?`
	// The first change of an order: no row yet (version 1); the partition
	// may hold refusals already.
	applyFirstCQL = `/* ` + string(StmtApply) + ` */ UPDATE order_versions SET ` + setChange +
		` IF current_version = null AND change_outcomes[?] = null`
	applyNextCQL = `/* ` + string(StmtApply) + ` */ UPDATE order_versions SET ` + setChange +
		` IF current_version = ? AND status = 'CREATED' AND change_outcomes[?] = null`
	refuseCQL = `/* ` + string(StmtRefuse) + ` */ UPDATE order_versions SET change_outcomes[?] = ?
		WHERE tenant = ? AND order_id = ? IF change_outcomes[?] = null`

	stateCQL = `/* ` + string(StmtState) + ` */ SELECT current_version, status, change_outcomes[?] FROM order_versions
		WHERE tenant = ? AND order_id = ? LIMIT 1`
	historyCQL = `/* ` + string(StmtHistory) + ` */ SELECT version, change_id, operation, request_id, payload_hash, new_status,
		shipping_note, changed_at FROM order_versions WHERE tenant = ? AND order_id = ? AND version >= ? AND version <= ?`
	lookupCQL = `/* ` + string(StmtLookup) + ` */ SELECT change_outcomes[?], version, change_id, payload_hash FROM order_versions
		WHERE tenant = ? AND order_id = ?`

	bindCQL = `/* ` + string(StmtBind) + ` */ INSERT INTO change_requests (tenant, operation, request_id, order_id)
		VALUES (?, ?, ?, ?)`
	boundCQL = `/* ` + string(StmtBound) + ` */ SELECT order_id FROM change_requests
		WHERE tenant = ? AND operation = ? AND request_id = ?`
)

// cqlTable is the Table on a session whose keyspace holds order_versions
// (migrations 0004 and 0006) and change_requests (0009).
type cqlTable struct{ s cassandra.Session }

// NewCQLTable is the store's Table on s.
func NewCQLTable(s cassandra.Session) Table { return cqlTable{s: s} }

// NewCassandraStore returns the Store on s.
func NewCassandraStore(s cassandra.Session) *Versions { return New(NewCQLTable(s)) }

// ApplyOnce implements Table.
func (t cqlTable) ApplyOnce(ctx context.Context, ch order.Change) (State, bool, error) {
	var note any // a cancel leaves the note as it was
	if ch.SetsNote() {
		note = ch.ShippingNote
	}
	id := gocql.UUID(ch.ID)
	args := []any{ch.Version, ch.Status, id, ch.Operation, ch.RequestID.String(), ch.Fingerprint,
		ch.Status, note, ch.At, id, acceptedRecord(ch).Encode(), ch.Tenant, ch.OrderID.String(), ch.Version}
	stmt := applyFirstCQL
	if ch.Version-1 > order.CreatedVersion {
		stmt, args = applyNextCQL, append(args, ch.Version-1)
	}
	return t.cas(ctx, "version check of an order change", ch, t.s.Query(stmt, append(args, id)...))
}

// RefuseOnce implements Table.
func (t cqlTable) RefuseOnce(ctx context.Context, ch order.Change, r Record) (State, bool, error) {
	id := gocql.UUID(ch.ID)
	q := t.s.Query(refuseCQL, id, r.Encode(), ch.Tenant, ch.OrderID.String(), id)
	return t.cas(ctx, "record a refused order change", ch, q)
}

// cas sends an LWT of ch's order once: applied, or the state its condition
// found.
func (t cqlTable) cas(ctx context.Context, what string, ch order.Change, q cassandra.Query) (State, bool, error) {
	row := map[string]any{}
	applied, err := q.SerialConsistency(t.s.Serial()).MapScanCASContext(ctx, row)
	if err != nil {
		return State{}, false, cassandra.WriteError(what, err)
	}
	if applied {
		return State{}, true, nil
	}
	st := State{Current: order.CreatedVersion, Status: order.StatusCreated}
	if cur, _ := row["current_version"].(int64); cur != 0 {
		st.Current = cur
		st.Status, _ = row["status"].(string)
	}
	outcomes, _ := row["change_outcomes"].(map[gocql.UUID]string)
	if enc, ok := outcomes[gocql.UUID(ch.ID)]; ok {
		r, err := DecodeRecord(enc)
		if err != nil {
			return State{}, false, err
		}
		st.Record = &r
	}
	return st, false, nil
}

// ReadState implements Table: an order never changed (no partition,
// or null statics) is at version 1, CREATED.
func (t cqlTable) ReadState(ctx context.Context, ch order.Change) (State, error) {
	var (
		cur    *int64
		status *string
		enc    *string
	)
	err := t.s.Query(stateCQL, gocql.UUID(ch.ID), ch.Tenant, ch.OrderID.String()).
		Consistency(t.s.Serial()).ScanContext(ctx, &cur, &status, &enc)
	if err != nil && !errors.Is(err, gocql.ErrNotFound) {
		return State{}, cassandra.ReadError("read an order's version", err)
	}
	st := State{Current: order.CreatedVersion, Status: order.StatusCreated}
	if cur != nil && status != nil {
		st.Current, st.Status = *cur, *status
	}
	if enc != nil {
		r, err := DecodeRecord(*enc)
		if err != nil {
			return State{}, err
		}
		st.Record = &r
	}
	return st, nil
}

// ReadChanges implements Table: the changes of versions from to upTo
// at LOCAL_QUORUM. It is only asked for versions known to be decided (an
// LWT that found the order past them committed any round in flight at
// quorum first), or, before a claim, to find a recorded change early (a
// miss then costs a claim, never a wrong answer).
func (t cqlTable) ReadChanges(ctx context.Context, tenant string, orderID uuid.UUID, from, upTo int64) ([]order.Change, error) {
	iter := t.s.Query(historyCQL, tenant, orderID.String(), from, upTo).Consistency(gocql.LocalQuorum).IterContext(ctx)
	var (
		out               []order.Change
		ch                order.Change
		id, rid           gocql.UUID
		note              *string
		changedAt         time.Time
		version           int64
		op, fp, newStatus string
	)
	for iter.Scan(&version, &id, &op, &rid, &fp, &newStatus, &note, &changedAt) {
		ch = order.Change{ID: uuid.UUID(id), Tenant: tenant, OrderID: orderID, Operation: op, RequestID: uuid.UUID(rid),
			Fingerprint: fp, Version: version, Status: newStatus, At: changedAt.UTC()}
		if note != nil {
			ch.ShippingNote = *note
		}
		out = append(out, ch)
		note = nil
	}
	if err := iter.Close(); err != nil {
		return nil, cassandra.ReadError("read an order's changes", err)
	}
	return out, nil
}

// Bind implements Table.
func (t cqlTable) Bind(ctx context.Context, tenant, operation string, requestID, orderID uuid.UUID) error {
	err := t.s.Query(bindCQL, tenant, operation, requestID.String(), orderID.String()).
		Consistency(gocql.LocalQuorum).Idempotent(true).ExecContext(ctx)
	return cassandra.WriteError("bind a change request id to its order", err)
}

// Bound implements Table.
func (t cqlTable) Bound(ctx context.Context, tenant, operation string, requestID uuid.UUID) (uuid.UUID, bool, error) {
	var id gocql.UUID
	err := t.s.Query(boundCQL, tenant, operation, requestID.String()).Consistency(gocql.LocalQuorum).ScanContext(ctx, &id)
	switch {
	case errors.Is(err, gocql.ErrNotFound):
		return uuid.Nil, false, nil
	case err != nil:
		return uuid.Nil, false, cassandra.ReadError("read the order a change request id is bound to", err)
	}
	return uuid.UUID(id), true, nil
}

// ReadOutcome implements Table: one read of the partition, the record's
// cell and every row's change id (a change accepted before migration 0006
// has only its row).
func (t cqlTable) ReadOutcome(ctx context.Context, tenant string, orderID, changeID uuid.UUID) (*Record, *Record, error) {
	iter := t.s.Query(lookupCQL, gocql.UUID(changeID), tenant, orderID.String()).Consistency(gocql.LocalQuorum).IterContext(ctx)
	var (
		enc, fp, recorded *string
		version           *int64
		id                *gocql.UUID
		row               *Record
	)
	for iter.Scan(&enc, &version, &id, &fp) {
		if enc != nil {
			recorded = enc
		}
		if version != nil && id != nil && fp != nil && uuid.UUID(*id) == changeID {
			row = &Record{Fingerprint: *fp, Version: *version}
		}
		enc, version, id, fp = nil, nil, nil, nil
	}
	if err := iter.Close(); err != nil {
		return nil, nil, cassandra.ReadError("read a change's recorded outcome", err)
	}
	if recorded == nil {
		return nil, row, nil
	}
	r, err := DecodeRecord(*recorded)
	if err != nil {
		return nil, nil, err
	}
	return &r, row, nil
}
