// Package versionstest holds the in-memory versions.Store that unit tests
// use and the contract suite (Run) that it and versions.CassandraStore
// (e2e/contract_versions_test.go) are both held to.
package versionstest

import (
	"context"
	"sync"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/stores/versions"
)

// Memory is versions.Store in memory, with the real store's semantics: one
// linearizable LWT at a time per order (the version check and the
// refusal, both conditional on the change id's record), rows and records
// written once, and faults armed by statement name (versions.StmtApply,
// StmtRefuse, StmtState, StmtHistory, StmtLookup) served as a FaultSession
// serves them: Unavailable and Timeout do not apply, LoseResponse applies,
// and the caller sees the driver's error.
type Memory struct {
	*cassandra.Faults
	mu     sync.Mutex
	orders map[orderKey]*history
	bound  map[requestKey]uuid.UUID // change_requests
}

// requestKey is a change request's key in change_requests.
type requestKey struct {
	tenant, operation string
	requestID         uuid.UUID
}

type orderKey struct {
	tenant string
	id     uuid.UUID
}

// history is an order's partition: statics, rows and records. A partition
// holding refusals only is at version 1, CREATED.
type history struct {
	current int64
	status  string
	changes map[int64]order.Change
	records map[uuid.UUID]versions.Record
}

var (
	_ versions.Store      = (*Memory)(nil)
	_ versions.Statements = (*Memory)(nil)
)

// NewMemory returns an empty store.
func NewMemory() *Memory {
	return &Memory{Faults: cassandra.NewFaults(), orders: map[orderKey]*history{}, bound: map[requestKey]uuid.UUID{}}
}

// exec runs one statement under the fault armed for it, as
// cassandra.Served serves it to every fake; do runs under m.mu.
func (m *Memory) exec(ctx context.Context, stmt, op string, write bool, do func() bool) (bool, error) {
	f, _ := m.Take(stmt)
	return cassandra.Served(ctx, stmt, op, write, f, func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return do()
	})
}

// Apply implements versions.Store, with CassandraStore's settling.
func (m *Memory) Apply(ctx context.Context, ch order.Change, shown int64) (versions.Decision, error) {
	return versions.Check(ctx, m, ch, shown)
}

// partition is ch's order's partition, made if need be; m.mu is held.
func (m *Memory) partition(tenant string, id uuid.UUID) *history {
	k := orderKey{tenant, id}
	h := m.orders[k]
	if h == nil {
		h = &history{current: order.CreatedVersion, status: order.StatusCreated,
			changes: map[int64]order.Change{}, records: map[uuid.UUID]versions.Record{}}
		m.orders[k] = h
	}
	return h
}

// state is h as an LWT's condition or a read finds it for ch; m.mu is held.
func (h *history) state(ch order.Change) versions.State {
	st := versions.State{Current: h.current, Status: h.status}
	if r, ok := h.records[ch.ID]; ok {
		st.Record = &r
	}
	return st
}

// cas runs one LWT of ch's order: cond decides, write applies; not
// applied, the state its condition found.
func (m *Memory) cas(ctx context.Context, stmt, op string, ch order.Change, cond func(*history) bool, write func(*history)) (versions.State, bool, error) {
	var found versions.State
	applied, err := m.exec(ctx, stmt, op, true, func() bool {
		h := m.partition(ch.Tenant, ch.OrderID)
		if !cond(h) {
			found = h.state(ch)
			return false
		}
		write(h)
		return true
	})
	if err != nil || applied {
		return versions.State{}, applied, err
	}
	return found, false, nil
}

// ApplyOnce implements versions.Statements.
func (m *Memory) ApplyOnce(ctx context.Context, ch order.Change) (versions.State, bool, error) {
	return m.cas(ctx, versions.StmtApply, "version check of an order change", ch, func(h *history) bool {
		_, decided := h.records[ch.ID]
		return !decided && h.current == ch.Version-1 && h.status != order.StatusCancelled
	}, func(h *history) {
		h.current, h.status, h.changes[ch.Version] = ch.Version, ch.Status, ch
		h.records[ch.ID] = versions.Record{Fingerprint: ch.Fingerprint, Version: ch.Version}
	})
}

// RefuseOnce implements versions.Statements.
func (m *Memory) RefuseOnce(ctx context.Context, ch order.Change, r versions.Record) (versions.State, bool, error) {
	return m.cas(ctx, versions.StmtRefuse, "record a refused order change", ch, func(h *history) bool {
		_, decided := h.records[ch.ID]
		return !decided
	}, func(h *history) { h.records[ch.ID] = r })
}

// ReadState implements versions.Statements.
func (m *Memory) ReadState(ctx context.Context, ch order.Change) (versions.State, error) {
	st := versions.State{Current: order.CreatedVersion, Status: order.StatusCreated}
	_, err := m.exec(ctx, versions.StmtState, "read an order's version", false, func() bool {
		if h := m.orders[orderKey{ch.Tenant, ch.OrderID}]; h != nil {
			st = h.state(ch)
		}
		return false
	})
	if err != nil {
		return versions.State{}, err
	}
	return st, nil
}

// History implements versions.Store.
func (m *Memory) History(ctx context.Context, tenant string, orderID uuid.UUID, upTo int64) ([]order.Change, error) {
	return m.ReadChanges(ctx, tenant, orderID, order.CreatedVersion+1, upTo)
}

// ReadChanges implements versions.Statements.
func (m *Memory) ReadChanges(ctx context.Context, tenant string, orderID uuid.UUID, from, upTo int64) ([]order.Change, error) {
	var out []order.Change
	_, err := m.exec(ctx, versions.StmtHistory, "read an order's changes", false, func() bool {
		h := m.orders[orderKey{tenant, orderID}]
		for v := from; h != nil && v <= upTo; v++ {
			if ch, ok := h.changes[v]; ok {
				out = append(out, ch)
			}
		}
		return false
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Lookup implements versions.Store: the record, or the row of a change
// accepted with none (WriteUnrecorded).
func (m *Memory) Lookup(ctx context.Context, tenant string, orderID, changeID uuid.UUID) (versions.Record, bool, error) {
	var (
		r     versions.Record
		found bool
	)
	_, err := m.exec(ctx, versions.StmtLookup, "read a change's recorded outcome", false, func() bool {
		r, found = m.lookupLocked(tenant, orderID, changeID)
		return false
	})
	return r, found, err
}

// lookupLocked is Lookup's read; m.mu is held.
func (m *Memory) lookupLocked(tenant string, orderID, changeID uuid.UUID) (versions.Record, bool) {
	h := m.orders[orderKey{tenant, orderID}]
	if h == nil {
		return versions.Record{}, false
	}
	if r, ok := h.records[changeID]; ok {
		return r, true
	}
	for _, ch := range h.changes {
		if ch.ID == changeID {
			return versions.Record{Fingerprint: ch.Fingerprint, Version: ch.Version}, true
		}
	}
	return versions.Record{}, false
}

// Bind implements versions.Store, its faults served as the LWTs' are
// (Unavailable and Timeout do not apply, LoseResponse applies).
func (m *Memory) Bind(ctx context.Context, tenant, operation string, requestID, orderID uuid.UUID) error {
	_, err := m.exec(ctx, versions.StmtBind, "bind a change request id to its order", true, func() bool {
		m.bound[requestKey{tenant, operation, requestID}] = orderID
		return true
	})
	return err
}

// Bound implements versions.Store.
func (m *Memory) Bound(ctx context.Context, tenant, operation string, requestID uuid.UUID) (uuid.UUID, bool, error) {
	var (
		id uuid.UUID
		ok bool
	)
	_, err := m.exec(ctx, versions.StmtBound, "read the order a change request id is bound to", false, func() bool {
		id, ok = m.bound[requestKey{tenant, operation, requestID}]
		return false
	})
	return id, ok, err
}

// WriteUnrecorded accepts ch as a version before migration 0006 did: its
// row and the statics, no record under its change id. It is an older
// instance's version check (the LWT without the record), applied only if
// the order is at ch's expected version and open.
func (m *Memory) WriteUnrecorded(ch order.Change) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.partition(ch.Tenant, ch.OrderID)
	if h.current != ch.Version-1 || h.status == order.StatusCancelled {
		return false
	}
	h.current, h.status, h.changes[ch.Version] = ch.Version, ch.Status, ch
	return true
}

// RollBack leaves the order's partition as a restore from a snapshot taken
// at version upTo leaves it: the rows and records of the changes after it
// gone, the statics at upTo. (A test helper: what the real store's
// operators do with sstables.)
func (m *Memory) RollBack(tenant string, orderID uuid.UUID, upTo int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.partition(tenant, orderID)
	for v, c := range h.changes {
		if v > upTo {
			delete(h.changes, v)
			delete(h.records, c.ID)
		}
	}
	h.current, h.status = order.CreatedVersion, order.StatusCreated
	if c, ok := h.changes[upTo]; ok {
		h.current, h.status = upTo, c.Status
	}
}
