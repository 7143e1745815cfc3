// Package versionstest holds the in-memory versions.Store that unit tests
// use and the contract suite (Run) that it and versions.CassandraStore
// (e2e/contract_versions_test.go) are both held to.
package versionstest

import (
	"context"
	"fmt"
	"sync"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/cassandra"
	"github.com/atlasmart/orderd/internal/fault"
	"github.com/atlasmart/orderd/internal/order"
	"github.com/atlasmart/orderd/internal/versions"
)

// Memory is versions.Store in memory, with the real store's semantics: one
// linearizable version check per order, rows written once, and faults armed
// by statement name (versions.StmtApply, StmtState, StmtHistory) served as
// a FaultSession serves them: Unavailable and Timeout do not apply,
// LoseResponse applies, and the caller sees the driver's error.
type Memory struct {
	*cassandra.Faults
	mu     sync.Mutex
	orders map[orderKey]*history
}

type orderKey struct {
	tenant string
	id     uuid.UUID
}

type history struct {
	current int64
	status  string
	changes map[int64]order.Change
}

var _ versions.Store = (*Memory)(nil)

// NewMemory returns an empty store.
func NewMemory() *Memory {
	return &Memory{Faults: cassandra.NewFaults(), orders: map[orderKey]*history{}}
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
func (m *Memory) Apply(ctx context.Context, ch order.Change) (versions.Decision, error) {
	for attempt := 1; ; attempt++ {
		cur, status, applied, err := m.apply(ch)
		if err == nil {
			if applied {
				return versions.Decision{Accepted: true}, nil
			}
			return m.decide(ch, cur, status)
		}
		if fault.KindOf(err) != fault.OutcomeUnknown {
			return versions.Decision{}, err
		}
		cur, status, serr := m.state(ch)
		switch {
		case serr != nil:
			return versions.Decision{}, err
		case versions.Awaits(ch, cur, status) && attempt < versions.SettleAttempts:
			continue
		case versions.Awaits(ch, cur, status):
			return versions.Decision{}, fault.New(fault.ReasonClusterUnavailable, err)
		}
		return m.decide(ch, cur, status)
	}
}

func (m *Memory) apply(ch order.Change) (int64, string, bool, error) {
	f, armed := m.Take(versions.StmtApply)
	if armed && f != cassandra.FaultLoseResponse && f != cassandra.FaultPass {
		return 0, "", false, injected(versions.StmtApply, f, true)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k := orderKey{ch.Tenant, ch.OrderID}
	h := m.orders[k]
	if h == nil {
		h = &history{current: order.CreatedVersion, status: order.StatusCreated, changes: map[int64]order.Change{}}
	}
	if h.current != ch.Version-1 || h.status == order.StatusCancelled {
		if armed && f == cassandra.FaultLoseResponse {
			return 0, "", false, injected(versions.StmtApply, f, true)
		}
		return h.current, h.status, false, nil
	}
	h.current, h.status, h.changes[ch.Version] = ch.Version, ch.Status, ch
	m.orders[k] = h
	if armed && f == cassandra.FaultLoseResponse {
		return 0, "", false, injected(versions.StmtApply, f, true)
	}
	return 0, "", true, nil
}

func (m *Memory) state(ch order.Change) (int64, string, error) {
	if f, ok := m.Take(versions.StmtState); ok && f != cassandra.FaultPass {
		return 0, "", injected(versions.StmtState, f, false)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if h := m.orders[orderKey{ch.Tenant, ch.OrderID}]; h != nil {
		return h.current, h.status, nil
	}
	return order.CreatedVersion, order.StatusCreated, nil
}

func (m *Memory) decide(ch order.Change, cur int64, status string) (versions.Decision, error) {
	if cur >= ch.Version {
		made, err := m.history(ch.Tenant, ch.OrderID, ch.Version, ch.Version)
		if err != nil {
			return versions.Decision{}, err
		}
		if len(made) == 1 && made[0].ID == ch.ID {
			return versions.Decision{Accepted: true}, nil
		}
	}
	return versions.Decision{Current: cur, Status: status}, nil
}

// History implements versions.Store.
func (m *Memory) History(_ context.Context, tenant string, orderID uuid.UUID, upTo int64) ([]order.Change, error) {
	return m.history(tenant, orderID, order.CreatedVersion+1, upTo)
}

func (m *Memory) history(tenant string, orderID uuid.UUID, from, upTo int64) ([]order.Change, error) {
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
