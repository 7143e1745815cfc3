package versionstest

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/platform/cassandra/memtable"
	"github.com/atlasmart/orderd/internal/stores/versions"
)

// Memory is versions.Versions, the store's own protocol, on an in-memory
// table (see the package doc). Safe for concurrent use.
type Memory struct {
	*versions.Versions
	// Faults armed by statement name: Arm, Before, Hits, Pending.
	*cassandra.Faults
	t *table
}

// NewMemory returns an empty store.
func NewMemory() *Memory {
	t := &table{rt: memtable.New(nil), orders: map[orderKey]*partition{}, bound: map[requestKey]uuid.UUID{}}
	return &Memory{Versions: versions.New(t), Faults: t.rt.Faults, t: t}
}

// table is versions.Table in memory. It knows nothing of the protocol
// (versions.Versions runs that on it).
type table struct {
	rt     *memtable.Runtime
	orders map[orderKey]*partition
	bound  map[requestKey]uuid.UUID // change_requests
}

type orderKey struct {
	tenant string
	id     uuid.UUID
}

// requestKey is a change request's key in change_requests.
type requestKey struct {
	tenant, operation string
	requestID         uuid.UUID
}

// partition is an order's partition in order_versions: the statics, the
// versions' rows and the change ids' records. One that holds refusals only
// is at version 1, CREATED.
type partition struct {
	current int64
	status  string
	changes map[int64]order.Change
	records map[uuid.UUID]versions.Record
}

// onOrder runs a statement on the order's partition (an empty one if it
// has none).
func (t *table) onOrder(ctx context.Context, stmt cassandra.Stmt, op string, write bool, tenant string, id uuid.UUID, do func(*partition) bool) (bool, error) {
	return t.rt.Exec(ctx, stmt, id, op, write, func(time.Time) bool { return do(t.partitionLocked(tenant, id)) })
}

// partitionLocked is the order's partition, made empty if need be.
func (t *table) partitionLocked(tenant string, id uuid.UUID) *partition {
	p := t.orders[orderKey{tenant, id}]
	if p == nil {
		p = &partition{current: order.CreatedVersion, status: order.StatusCreated,
			changes: map[int64]order.Change{}, records: map[uuid.UUID]versions.Record{}}
		t.orders[orderKey{tenant, id}] = p
	}
	return p
}

// state is p as an LWT's condition or a read finds it for ch.
func (p *partition) state(ch order.Change) versions.State {
	st := versions.State{Current: p.current, Status: p.status}
	if r, ok := p.records[ch.ID]; ok {
		st.Record = &r
	}
	return st
}

// accept writes ch's row and the statics if the order is at ch's expected
// version and open (the version check's condition, without the record's).
func (p *partition) accept(ch order.Change) bool {
	if p.current != ch.Version-1 || p.status == order.StatusCancelled {
		return false
	}
	p.current, p.status, p.changes[ch.Version] = ch.Version, ch.Status, ch
	return true
}

// cas runs one LWT of ch's order. Both are conditional on ch's change id
// having no record; do tests the rest of its condition and, if it holds,
// writes. Not applied: the state the condition found.
func (t *table) cas(ctx context.Context, stmt cassandra.Stmt, op string, ch order.Change, do func(*partition) bool) (versions.State, bool, error) {
	var found versions.State
	applied, err := t.onOrder(ctx, stmt, op, true, ch.Tenant, ch.OrderID, func(p *partition) bool {
		if _, decided := p.records[ch.ID]; !decided && do(p) {
			return true
		}
		found = p.state(ch)
		return false
	})
	if err != nil || applied {
		return versions.State{}, applied, err
	}
	return found, false, nil
}

func (t *table) ApplyOnce(ctx context.Context, ch order.Change) (versions.State, bool, error) {
	return t.cas(ctx, versions.StmtApply, "version check of an order change", ch, func(p *partition) bool {
		if !p.accept(ch) {
			return false
		}
		p.records[ch.ID] = versions.Record{Fingerprint: ch.Fingerprint, Version: ch.Version}
		return true
	})
}

func (t *table) RefuseOnce(ctx context.Context, ch order.Change, r versions.Record) (versions.State, bool, error) {
	return t.cas(ctx, versions.StmtRefuse, "record a refused order change", ch, func(p *partition) bool {
		p.records[ch.ID] = r
		return true
	})
}

func (t *table) ReadState(ctx context.Context, ch order.Change) (st versions.State, err error) {
	_, err = t.onOrder(ctx, versions.StmtState, "read an order's version", false, ch.Tenant, ch.OrderID, func(p *partition) bool {
		st = p.state(ch)
		return false
	})
	return st, err
}

func (t *table) ReadChanges(ctx context.Context, tenant string, orderID uuid.UUID, from, upTo int64) (out []order.Change, err error) {
	_, err = t.onOrder(ctx, versions.StmtHistory, "read an order's changes", false, tenant, orderID, func(p *partition) bool {
		for _, v := range slices.Sorted(maps.Keys(p.changes)) {
			if v >= from && v <= upTo {
				out = append(out, p.changes[v])
			}
		}
		return false
	})
	return out, err
}

func (t *table) ReadOutcome(ctx context.Context, tenant string, orderID, changeID uuid.UUID) (recorded, row *versions.Record, err error) {
	_, err = t.onOrder(ctx, versions.StmtLookup, "read a change's recorded outcome", false, tenant, orderID, func(p *partition) bool {
		if r, ok := p.records[changeID]; ok {
			recorded = &r
		}
		for _, ch := range p.changes {
			if ch.ID == changeID {
				row = &versions.Record{Fingerprint: ch.Fingerprint, Version: ch.Version}
			}
		}
		return false
	})
	return recorded, row, err
}

func (t *table) Bind(ctx context.Context, tenant, operation string, requestID, orderID uuid.UUID) error {
	return t.rt.Write(ctx, versions.StmtBind, requestID, "bind a change request id to its order", func(time.Time) {
		t.bound[requestKey{tenant, operation, requestID}] = orderID
	})
}

func (t *table) Bound(ctx context.Context, tenant, operation string, requestID uuid.UUID) (id uuid.UUID, ok bool, err error) {
	err = t.rt.Read(ctx, versions.StmtBound, requestID, "read the order a change request id is bound to", func(time.Time) {
		id, ok = t.bound[requestKey{tenant, operation, requestID}]
	})
	return id, ok && err == nil, err
}

// WriteUnrecorded accepts ch as a version before migration 0006 did: its
// row and the statics, no record under its change id. It is an older
// instance's version check (the LWT without the record), applied only if
// the order is at ch's expected version and open.
func (m *Memory) WriteUnrecorded(ch order.Change) (ok bool) {
	m.t.rt.Locked(func(time.Time) { ok = m.t.partitionLocked(ch.Tenant, ch.OrderID).accept(ch) })
	return ok
}

// RollBack leaves the order's partition as a restore from a snapshot taken
// at version upTo leaves it: the rows and records of the changes after it
// gone, the statics at upTo. (A test helper: what the real store's
// operators do with sstables.)
func (m *Memory) RollBack(tenant string, orderID uuid.UUID, upTo int64) {
	m.t.rt.Locked(func(time.Time) { m.t.partitionLocked(tenant, orderID).rollBack(upTo) })
}

func (p *partition) rollBack(upTo int64) {
	for v, c := range p.changes {
		if v > upTo {
			delete(p.changes, v)
			delete(p.records, c.ID)
		}
	}
	p.current, p.status = order.CreatedVersion, order.StatusCreated
	if c, ok := p.changes[upTo]; ok {
		p.current, p.status = upTo, c.Status
	}
}
