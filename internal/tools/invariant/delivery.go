package invariant

import (
	"context"
	"fmt"
	"regexp"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/domain/order"
)

// The delivery checks: an order's event is delivered once its
// due entry is released (docs/outbox.md), and applied once a consumer's
// inbox (cmd/orderconsumer) holds its event id. Both look at the orders in
// scope: the acknowledged ones when acks are given, else every COMPLETE
// request; only orders older than the grace, which a healthy system has
// delivered by then.

var keyspaceName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,47}$`)

type entryKey struct {
	tenant     string
	requestID  uuid.UUID
	claimToken uuid.UUID
}

// owedEntry is a live due entry that owes its order's event past its
// claim (owed_order set: a delivery attempt failed).
type owedEntry struct {
	tenant, operation  string
	requestID, orderID uuid.UUID
	created            time.Time
}

// liveEntries reads the due queue: the entries not yet released, and of
// them those that owe an event past their claim.
func liveEntries(ctx context.Context, s *gocql.Session) (map[entryKey]bool, []owedEntry, error) {
	live := map[entryKey]bool{}
	var owed []owedEntry
	iter := s.Query(`SELECT tenant, operation, request_id, claim_token, created_at, done, owed_order FROM due_requests`).
		PageSize(1000).IterContext(ctx)
	var (
		tenant, op string
		req, token gocql.UUID
		created    time.Time
		done       *bool
		owes       *gocql.UUID
	)
	for iter.Scan(&tenant, &op, &req, &token, &created, &done, &owes) {
		if done == nil || !*done {
			live[entryKey{tenant, uuid.UUID(req), uuid.UUID(token)}] = true
			if owes != nil {
				owed = append(owed, owedEntry{tenant, op, uuid.UUID(req), uuid.UUID(*owes), created})
			}
		}
		done, owes = nil, nil
	}
	if err := iter.Close(); err != nil {
		return nil, nil, fmt.Errorf("read due_requests: %w", err)
	}
	return live, owed, nil
}

type applied struct {
	orderID uuid.UUID
	version int64
}

// consumerRows reads a reference consumer's inbox (event id → order) and
// orders (order id → version) in keyspace ks.
func consumerRows(ctx context.Context, s *gocql.Session, ks string) (inbox map[uuid.UUID]uuid.UUID, orders map[uuid.UUID]int64, err error) {
	if !keyspaceName.MatchString(ks) {
		return nil, nil, fmt.Errorf("consumer keyspace %q: not a keyspace name", ks)
	}
	inbox, orders = map[uuid.UUID]uuid.UUID{}, map[uuid.UUID]int64{}
	var (
		id, oid gocql.UUID
		version int64
	)
	iter := s.Query(`SELECT event_id, order_id FROM ` + ks + `.inbox`).PageSize(1000).IterContext(ctx)
	for iter.Scan(&id, &oid) {
		inbox[uuid.UUID(id)] = uuid.UUID(oid)
	}
	if err := iter.Close(); err != nil {
		return nil, nil, fmt.Errorf("read %s.inbox: %w", ks, err)
	}
	iter = s.Query(`SELECT order_id, version FROM ` + ks + `.orders`).PageSize(1000).IterContext(ctx)
	for iter.Scan(&oid, &version) {
		orders[uuid.UUID(oid)] = version
	}
	if err := iter.Close(); err != nil {
		return nil, nil, fmt.Errorf("read %s.orders: %w", ks, err)
	}
	return inbox, orders, nil
}

// checkDelivery reports the orders in scope, older than the grace, whose
// event is still owed (a live due entry of their claim) and, given a
// consumer keyspace, those its consumer has not applied exactly once.
func checkDelivery(ctx context.Context, s *gocql.Session, cfg Config, scope []request, now time.Time, rep *Report) ([]string, error) {
	var v []string
	if cfg.CheckDelivered {
		live, owed, err := liveEntries(ctx, s)
		if err != nil {
			return nil, err
		}
		// An event owed past its request's retention is in no scope (the
		// claim is gone): its entry is what says it is undelivered.
		// With acks, only the acknowledged requests' are in scope.
		acked := map[key]bool{}
		for _, a := range cfg.Acks {
			if id, err := uuid.Parse(a.RequestID); err == nil {
				acked[key{a.Tenant, id}] = true
			}
		}
		// A request may have two live entries (a reschedule writes the
		// new one before it removes the old): one line per request.
		type request struct {
			tenant, operation string
			id                uuid.UUID
		}
		seen := map[request]bool{}
		for _, o := range owed {
			k := request{o.tenant, o.operation, o.requestID}
			if len(cfg.Acks) > 0 && !acked[key{o.tenant, o.requestID}] {
				continue
			}
			if now.Sub(o.created) > cfg.Grace && !seen[k] {
				seen[k] = true
				v = append(v, fmt.Sprintf("order %s (request %s, %s): event owed, not acknowledged by the broker %s after the request (its due entry outlives the claim until it is)",
					o.orderID, o.requestID, o.operation, now.Sub(o.created).Round(time.Second)))
			}
		}
		for _, r := range scope {
			if now.Sub(r.created) > cfg.Grace && live[entryKey{r.tenant, r.requestID, r.claimToken}] {
				v = append(v, fmt.Sprintf("order %s (request %s): event not acknowledged by the broker %s after the order (grace %s)",
					r.orderID, r.requestID, now.Sub(r.created).Round(time.Second), cfg.Grace))
			}
			rep.DeliveriesChecked++
		}
	}
	if cfg.ConsumerKeyspace == "" {
		return v, nil
	}
	inbox, orders, err := consumerRows(ctx, s, cfg.ConsumerKeyspace)
	if err != nil {
		return nil, err
	}
	for _, r := range scope {
		if now.Sub(r.created) <= cfg.Grace {
			continue
		}
		rep.AppliesChecked++
		oid, ok := inbox[order.EventID(r.tenant, order.OperationCreate, r.requestID)]
		switch {
		case !ok:
			v = append(v, fmt.Sprintf("order %s (request %s): event not applied by the consumer (%s.inbox)", r.orderID, r.requestID, cfg.ConsumerKeyspace))
		case oid != r.orderID:
			v = append(v, fmt.Sprintf("event %s applied to order %s, want %s", r.requestID, oid, r.orderID))
		case orders[r.orderID] < 1:
			v = append(v, fmt.Sprintf("order %s: the consumer's inbox has its event but its orders table has version %d", r.orderID, orders[r.orderID]))
		}
	}
	return v, nil
}
