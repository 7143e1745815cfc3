package store

import (
	"context"
	"fmt"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"
)

// The statements, bound with ?, on a session bound to the consumer's keyspace.
const (
	recordEventCQL = `INSERT INTO inbox (event_id, order_id, order_version, event_type, topic, partition, offset, occurred_at, applied_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) IF NOT EXISTS`
	getEventCQL = `SELECT event_id, order_id, order_version, event_type, topic, partition, offset, occurred_at, applied_at
		FROM inbox WHERE event_id = ?`

	insertOrderCQL = `INSERT INTO orders (order_id, version, tenant, customer_id, status, total, currency, last_event_id, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) IF NOT EXISTS`
	// The version check and the write are one step (one Paxos round): no
	// concurrent writer can slip an older version in between.
	updateOrderCQL = `UPDATE orders SET version = ?, tenant = ?, customer_id = ?, status = ?, total = ?, currency = ?, last_event_id = ?, updated_at = ?
		WHERE order_id = ? IF version < ?`
	getOrderCQL = `SELECT order_id, version, tenant, customer_id, status, total, currency, last_event_id, updated_at
		FROM orders WHERE order_id = ?`
)

// upsertTries bounds UpsertOrder's insert-then-update rounds. A round only
// repeats when the row vanished between the two statements (nothing here
// deletes rows), so more than one is already rare.
const upsertTries = 3

// Cassandra is the store on Cassandra.
type Cassandra struct{ s *gocql.Session }

// NewCassandra returns the store on s, a session bound to the keyspace
// CreateSchema made.
func NewCassandra(s *gocql.Session) *Cassandra { return &Cassandra{s: s} }

// RecordEvent writes e's inbox row unless a row with its event id exists,
// and reports whether this call wrote it (false: a duplicate). Errors wrap
// ErrOutcomeUnknown or ErrNotApplied; any other error is a bug.
func (c *Cassandra) RecordEvent(ctx context.Context, e InboxEntry) (first bool, err error) {
	e = e.Stored()
	first, _, err = c.cas(ctx, recordEventCQL, gocql.UUID(e.EventID), gocql.UUID(e.OrderID), e.OrderVersion, e.EventType,
		e.Topic, e.Partition, e.Offset, e.OccurredAt, e.AppliedAt)
	if err != nil {
		return false, writeError(fmt.Sprintf("record event %s", e.EventID), err)
	}
	return first, nil
}

// UpsertOrder writes o unless the stored version of the order is o.Version
// or newer, and reports whether it wrote (false: o is stale, nothing
// written). Errors wrap ErrOutcomeUnknown or ErrNotApplied; any other error
// is a bug.
func (c *Cassandra) UpsertOrder(ctx context.Context, o Order) (written bool, err error) {
	o = o.Stored()
	op := fmt.Sprintf("upsert order %s version %d", o.OrderID, o.Version)
	for range upsertTries {
		applied, _, err := c.cas(ctx, insertOrderCQL, gocql.UUID(o.OrderID), o.Version, o.Tenant, o.CustomerID,
			o.Status, o.Total, o.Currency, gocql.UUID(o.LastEventID), o.UpdatedAt)
		if err != nil || applied {
			return applied, writeError(op, err)
		}
		applied, current, err := c.cas(ctx, updateOrderCQL, o.Version, o.Tenant, o.CustomerID, o.Status, o.Total,
			o.Currency, gocql.UUID(o.LastEventID), o.UpdatedAt, gocql.UUID(o.OrderID), o.Version)
		if err != nil || applied {
			return applied, writeError(op, err)
		}
		// Not applied: the row holds an equal or newer version (stale),
		// or it is gone (Cassandra then returns no version): insert again.
		if stored, ok := current["version"].(int64); ok && stored >= o.Version {
			return false, nil
		}
	}
	return false, fmt.Errorf("%s: %w: the row changed under %d tries", op, ErrNotApplied, upsertTries)
}

// cas runs a conditional statement. LOCAL_SERIAL keeps the Paxos round in
// the local data centre; LOCAL_QUORUM is the consistency of its commit.
func (c *Cassandra) cas(ctx context.Context, stmt string, args ...any) (applied bool, current map[string]any, err error) {
	current = map[string]any{}
	applied, err = c.s.Query(stmt, args...).Consistency(gocql.LocalQuorum).SerialConsistency(gocql.LocalSerial).
		MapScanCASContext(ctx, current)
	return applied, current, err
}

// Event reads the inbox row of an event id, or ErrNotFound. It reads at
// LOCAL_SERIAL, which first finishes any Paxos round a lost write left in
// flight, so what it returns is what every later LWT will see.
func (c *Cassandra) Event(ctx context.Context, eventID uuid.UUID) (InboxEntry, error) {
	var e InboxEntry
	var id, orderID gocql.UUID
	err := c.s.Query(getEventCQL, gocql.UUID(eventID)).Consistency(gocql.LocalSerial).ScanContext(ctx,
		&id, &orderID, &e.OrderVersion, &e.EventType, &e.Topic, &e.Partition, &e.Offset, &e.OccurredAt, &e.AppliedAt)
	if err != nil {
		return InboxEntry{}, readError(fmt.Sprintf("read event %s", eventID), err)
	}
	e.EventID, e.OrderID = uuid.UUID(id), uuid.UUID(orderID)
	return e, nil
}

// Order reads the stored view of an order, or ErrNotFound, at LOCAL_SERIAL
// as Event does.
func (c *Cassandra) Order(ctx context.Context, orderID uuid.UUID) (Order, error) {
	var o Order
	var id, lastEvent gocql.UUID
	err := c.s.Query(getOrderCQL, gocql.UUID(orderID)).Consistency(gocql.LocalSerial).ScanContext(ctx,
		&id, &o.Version, &o.Tenant, &o.CustomerID, &o.Status, &o.Total, &o.Currency, &lastEvent, &o.UpdatedAt)
	if err != nil {
		return Order{}, readError(fmt.Sprintf("read order %s", orderID), err)
	}
	o.OrderID, o.LastEventID = uuid.UUID(id), uuid.UUID(lastEvent)
	return o, nil
}
