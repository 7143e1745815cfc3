// Package versionstest holds the in-memory versions.Store that unit tests
// use and the contract suite (Run) that it and versions.CassandraStore
// (e2e/contract_versions_test.go) are both held to.
package versionstest

import (
	"context"
	"fmt"
	"sync"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/domain/fault"
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

// injected is the error a FaultSession returns for fault f on stmt, as
// the store converts it: a write's timeout is an unknown outcome, a read's
// any failure and a refusal are Unavailable.
func injected(stmt string, f cassandra.Fault, write bool) error {
	reason := fault.ReasonClusterUnavailable
	if write && f != cassandra.FaultUnavailable {
		reason = fault.ReasonOutcomeUnknown
	}
	return fault.New(reason, fmt.Errorf("injected fault on %s: %s", stmt, f))
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

// cas runs one LWT of ch's order: cond decides, write applies.
func (m *Memory) cas(stmt string, ch order.Change, cond func(*history) bool, write func(*history)) (versions.State, bool, error) {
	f, armed := m.Take(stmt)
	if armed && f != cassandra.FaultLoseResponse && f != cassandra.FaultPass {
		return versions.State{}, false, injected(stmt, f, true)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.partition(ch.Tenant, ch.OrderID)
	applied := cond(h)
	if applied {
		write(h)
	}
	if armed && f == cassandra.FaultLoseResponse {
		return versions.State{}, false, injected(stmt, f, true)
	}
	if applied {
		return versions.State{}, true, nil
	}
	return h.state(ch), false, nil
}

// ApplyOnce implements versions.Statements.
func (m *Memory) ApplyOnce(_ context.Context, ch order.Change) (versions.State, bool, error) {
	return m.cas(versions.StmtApply, ch, func(h *history) bool {
		_, decided := h.records[ch.ID]
		return !decided && h.current == ch.Version-1 && h.status != order.StatusCancelled
	}, func(h *history) {
		h.current, h.status, h.changes[ch.Version] = ch.Version, ch.Status, ch
		h.records[ch.ID] = versions.Record{Fingerprint: ch.Fingerprint, Version: ch.Version}
	})
}

// RefuseOnce implements versions.Statements.
func (m *Memory) RefuseOnce(_ context.Context, ch order.Change, r versions.Record) (versions.State, bool, error) {
	return m.cas(versions.StmtRefuse, ch, func(h *history) bool {
		_, decided := h.records[ch.ID]
		return !decided
	}, func(h *history) { h.records[ch.ID] = r })
}

// ReadState implements versions.Statements.
func (m *Memory) ReadState(_ context.Context, ch order.Change) (versions.State, error) {
	if f, ok := m.Take(versions.StmtState); ok && f != cassandra.FaultPass {
		return versions.State{}, injected(versions.StmtState, f, false)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if h := m.orders[orderKey{ch.Tenant, ch.OrderID}]; h != nil {
		return h.state(ch), nil
	}
	return versions.State{Current: order.CreatedVersion, Status: order.StatusCreated}, nil
}

// History implements versions.Store.
func (m *Memory) History(ctx context.Context, tenant string, orderID uuid.UUID, upTo int64) ([]order.Change, error) {
	return m.ReadChanges(ctx, tenant, orderID, order.CreatedVersion+1, upTo)
}

// ReadChanges implements versions.Statements.
func (m *Memory) ReadChanges(_ context.Context, tenant string, orderID uuid.UUID, from, upTo int64) ([]order.Change, error) {
	if f, ok := m.Take(versions.StmtHistory); ok && f != cassandra.FaultPass {
		return nil, injected(versions.StmtHistory, f, false)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.orders[orderKey{tenant, orderID}]
	var out []order.Change
	for v := from; h != nil && v <= upTo; v++ {
		if ch, ok := h.changes[v]; ok {
			out = append(out, ch)
		}
	}
	return out, nil
}

// Lookup implements versions.Store: the record, or the row of a change
// accepted with none (WriteUnrecorded).
func (m *Memory) Lookup(_ context.Context, tenant string, orderID, changeID uuid.UUID) (versions.Record, bool, error) {
	if f, ok := m.Take(versions.StmtLookup); ok && f != cassandra.FaultPass {
		return versions.Record{}, false, injected(versions.StmtLookup, f, false)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.orders[orderKey{tenant, orderID}]
	if h == nil {
		return versions.Record{}, false, nil
	}
	if r, ok := h.records[changeID]; ok {
		return r, true, nil
	}
	for _, ch := range h.changes {
		if ch.ID == changeID {
			return versions.Record{Fingerprint: ch.Fingerprint, Version: ch.Version}, true, nil
		}
	}
	return versions.Record{}, false, nil
}

// Bind implements versions.Store, its faults served as the LWTs' are
// (Unavailable and Timeout do not apply, LoseResponse applies).
func (m *Memory) Bind(_ context.Context, tenant, operation string, requestID, orderID uuid.UUID) error {
	f, armed := m.Take(versions.StmtBind)
	if armed && f != cassandra.FaultLoseResponse && f != cassandra.FaultPass {
		return injected(versions.StmtBind, f, true)
	}
	m.mu.Lock()
	m.bound[requestKey{tenant, operation, requestID}] = orderID
	m.mu.Unlock()
	if armed && f != cassandra.FaultPass {
		return injected(versions.StmtBind, f, true)
	}
	return nil
}

// Bound implements versions.Store.
func (m *Memory) Bound(_ context.Context, tenant, operation string, requestID uuid.UUID) (uuid.UUID, bool, error) {
	if f, ok := m.Take(versions.StmtBound); ok && f != cassandra.FaultPass {
		return uuid.Nil, false, injected(versions.StmtBound, f, false)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	id, ok := m.bound[requestKey{tenant, operation, requestID}]
	return id, ok, nil
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
