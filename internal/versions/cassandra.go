package versions

import (
	"context"
	"errors"
	"fmt"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/cassandra"
	"github.com/atlasmart/orderd/internal/fault"
	"github.com/atlasmart/orderd/internal/order"
)

const (
	setChange = `current_version = ?, status = ?, change_id = ?, operation = ?, request_id = ?, payload_hash = ?,
		new_status = ?, shipping_note = ?, changed_at = ?
		WHERE tenant = ? AND order_id = ? AND version = ?`
	// The first change of an order: no partition yet (version 1).
	applyFirstCQL = `/* versions.apply */ UPDATE order_versions SET ` + setChange + ` IF current_version = null`
	applyNextCQL  = `/* versions.apply */ UPDATE order_versions SET ` + setChange + ` IF current_version = ? AND status = 'CREATED'`

	stateCQL = `/* versions.state */ SELECT current_version, status FROM order_versions
		WHERE tenant = ? AND order_id = ? LIMIT 1`
	historyCQL = `/* versions.history */ SELECT version, change_id, operation, request_id, payload_hash, new_status,
		shipping_note, changed_at FROM order_versions WHERE tenant = ? AND order_id = ? AND version >= ? AND version <= ?`
)

// SettleAttempts bounds the resends of a version check whose outcome was
// unknown and settled as not applied (the order still awaiting it).
const SettleAttempts = 3

// CassandraStore is the Store on a session whose keyspace holds
// order_versions (migration 0004).
type CassandraStore struct{ s cassandra.Session }

var _ Store = (*CassandraStore)(nil)

// NewCassandraStore returns the store on s.
func NewCassandraStore(s cassandra.Session) *CassandraStore { return &CassandraStore{s: s} }

// Apply implements Store. An outcome that is unknown (a timeout, a lost
// response) is never guessed: a LOCAL_SERIAL read of the order's version,
// which finishes or invalidates any Paxos round in flight, decides; if the
// order still awaits the change it is sent again (bounded).
func (c *CassandraStore) Apply(ctx context.Context, ch order.Change) (Decision, error) {
	for attempt := 1; ; attempt++ {
		cur, status, applied, err := c.apply(ctx, ch)
		if err == nil && applied {
			return Decision{Accepted: true}, nil
		}
		if err == nil {
			return c.decide(ctx, ch, cur, status)
		}
		if fault.KindOf(err) != fault.OutcomeUnknown {
			return Decision{}, err
		}
		cur, status, serr := c.state(ctx, ch)
		switch {
		case serr != nil:
			return Decision{}, err // unsettled: OutcomeUnknown
		case Awaits(ch, cur, status) && attempt < SettleAttempts:
			continue // definitely not applied, and nothing else was: send it again
		case Awaits(ch, cur, status):
			return Decision{}, fault.New(fault.ReasonClusterUnavailable,
				fmt.Errorf("version check of change %s did not apply in %d tries: %w", ch.ID, attempt, err))
		}
		return c.decide(ctx, ch, cur, status)
	}
}

// Awaits reports whether an order at version cur with status awaits ch:
// it is at ch's expected version and open, so ch did not apply and may be
// sent again.
func Awaits(ch order.Change, cur int64, status string) bool {
	return cur == ch.Version-1 && status != order.StatusCancelled
}

// apply sends the LWT once: applied, or the order's version and status as
// the condition found them.
func (c *CassandraStore) apply(ctx context.Context, ch order.Change) (cur int64, status string, applied bool, err error) {
	var note any // a cancel leaves the note as it was
	if ch.SetsNote() {
		note = ch.ShippingNote
	}
	args := []any{ch.Version, ch.Status, ch.ID.String(), ch.Operation, ch.RequestID.String(), ch.Fingerprint,
		ch.Status, note, ch.At, ch.Tenant, ch.OrderID.String(), ch.Version}
	stmt := applyFirstCQL
	if ch.Version-1 > order.CreatedVersion {
		stmt, args = applyNextCQL, append(args, ch.Version-1)
	}
	row := map[string]any{}
	applied, err = c.s.Query(stmt, args...).SerialConsistency(c.s.Serial()).MapScanCASContext(ctx, row)
	if err != nil {
		return 0, "", false, cassandra.WriteError("version check of an order change", err)
	}
	cur, status = stateOf(row)
	return cur, status, applied, nil
}

// stateOf reads current_version and status from a row; an order never
// changed (no partition, null statics) is at version 1, CREATED.
func stateOf(row map[string]any) (int64, string) {
	cur, _ := row["current_version"].(int64)
	status, _ := row["status"].(string)
	if cur == 0 {
		return order.CreatedVersion, order.StatusCreated
	}
	return cur, status
}

// state reads the order's version at the session's serial consistency
// (settling an unknown outcome).
func (c *CassandraStore) state(ctx context.Context, ch order.Change) (int64, string, error) {
	row := map[string]any{}
	err := c.s.Query(stateCQL, ch.Tenant, ch.OrderID.String()).Consistency(c.s.Serial()).MapScanContext(ctx, row)
	if err != nil && !errors.Is(err, gocql.ErrNotFound) {
		return 0, "", cassandra.ReadError("read an order's version", err)
	}
	cur, status := stateOf(row)
	return cur, status, nil
}

// decide tells, for a check that did not apply now, whether the change
// holds its version anyway (an earlier attempt of it applied): the row of
// that version names the change that made it.
func (c *CassandraStore) decide(ctx context.Context, ch order.Change, cur int64, status string) (Decision, error) {
	if cur >= ch.Version {
		made, err := c.history(ctx, ch.Tenant, ch.OrderID, ch.Version, ch.Version)
		if err != nil {
			return Decision{}, err
		}
		if len(made) == 1 && made[0].ID == ch.ID {
			return Decision{Accepted: true}, nil
		}
	}
	return Decision{Current: cur, Status: status}, nil
}

// History implements Store.
func (c *CassandraStore) History(ctx context.Context, tenant string, orderID uuid.UUID, upTo int64) ([]order.Change, error) {
	return c.history(ctx, tenant, orderID, order.CreatedVersion+1, upTo)
}

// history reads the changes of versions from to upTo at LOCAL_QUORUM. It is
// only asked for versions known to be decided (an LWT that found the order
// past them committed any round in flight at quorum first), or, before a
// claim, to find a recorded change early (a miss then costs a claim, never
// a wrong answer).
func (c *CassandraStore) history(ctx context.Context, tenant string, orderID uuid.UUID, from, upTo int64) ([]order.Change, error) {
	iter := c.s.Query(historyCQL, tenant, orderID.String(), from, upTo).Consistency(gocql.LocalQuorum).IterContext(ctx)
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
