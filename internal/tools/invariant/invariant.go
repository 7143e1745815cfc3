// Package invariant checks, from the rows of a keyspace, the promises orderd
// makes (design doc 000): every COMPLETE request has exactly one order in
// each projection and one event, matching its stored command; every order
// has its request (unless the request has expired); no request stays PENDING
// past the grace period; no two requests map to one order; and, given the
// outcomes a load driver saw acknowledged, every acknowledged order exists
// exactly once with the acknowledged values.
//
// It reads whole tables (paged), so it is a tool for tests and audits, not
// for the request path.
package invariant

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"
	"gopkg.in/inf.v0"

	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
)

// Config says what to hold the rows to.
type Config struct {
	// Grace: a request PENDING longer than this is a violation.
	Grace time.Duration
	// Retention: an order younger than this must still have its request.
	// Default 7 days.
	Retention time.Duration
	// Acks are the outcomes a client saw acknowledged (may be empty).
	Acks []Ack
	// Now is the check's clock; default time.Now.
	Now func() time.Time
	// CheckDelivered: every order in scope older than Grace has its event
	// acknowledged by the broker (its due entry released).
	CheckDelivered bool
	// ConsumerKeyspace, if set, is a reference consumer's keyspace
	// (cmd/orderconsumer): every order in scope older than Grace has its
	// event applied there, once.
	ConsumerKeyspace string
}

// Ack is one acknowledged outcome, as a client recorded it: a CreateOrder
// (Operation empty) or an accepted change (Operation CANCEL_ORDER or
// AMEND_ORDER, with the change id and the version it made).
type Ack struct {
	Tenant     string `json:"tenant"`
	RequestID  string `json:"request_id"`
	OrderID    string `json:"order_id"`
	CustomerID string `json:"customer_id,omitempty"`
	Total      string `json:"total,omitempty"`
	Currency   string `json:"currency,omitempty"`
	Operation  string `json:"operation,omitempty"`
	ChangeID   string `json:"change_id,omitempty"`
	Version    int64  `json:"version,omitempty"`
}

// IsChange reports whether a is an accepted change's ack.
func (a Ack) IsChange() bool { return a.Operation != "" && a.Operation != order.Operation }

// Report is what the check found.
type Report struct {
	Requests, Complete, Pending, Failed int
	// ReadAgain: requests the quorum scan missed and a serial read found
	// (claims committed at ANY whose commit had not landed).
	ReadAgain                                int
	OrdersByID, OrdersByCustomerTime, Events int
	AcksChecked                              int
	DeliveriesChecked, AppliesChecked        int
	// Versioned changes (docs/changes.md).
	ChangeRequests, OrdersChanged, Changes, ChangeAcksChecked int
	Violations                                                []string
}

// OK reports whether no invariant is violated.
func (r Report) OK() bool { return len(r.Violations) == 0 }

func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "requests: %d (COMPLETE %d, PENDING %d, FAILED %d)\n", r.Requests, r.Complete, r.Pending, r.Failed)
	if r.ReadAgain > 0 {
		fmt.Fprintf(&b, "requests the quorum scan missed, found by a serial read: %d\n", r.ReadAgain)
	}
	fmt.Fprintf(&b, "orders_by_id: %d, orders_by_customer_time: %d, events: %d\n", r.OrdersByID, r.OrdersByCustomerTime, r.Events)
	fmt.Fprintf(&b, "acknowledged outcomes checked: %d\n", r.AcksChecked)
	if r.ChangeRequests > 0 || r.Changes > 0 {
		fmt.Fprintf(&b, "change requests: %d; orders changed: %d, changes: %d; acknowledged changes checked: %d\n",
			r.ChangeRequests, r.OrdersChanged, r.Changes, r.ChangeAcksChecked)
	}
	if r.DeliveriesChecked > 0 || r.AppliesChecked > 0 {
		fmt.Fprintf(&b, "event deliveries checked: %d, consumer applies checked: %d\n", r.DeliveriesChecked, r.AppliesChecked)
	}
	fmt.Fprintf(&b, "violations: %d\n", len(r.Violations))
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "  - %s\n", v)
	}
	return b.String()
}

type request struct {
	tenant, state, lastErr         string
	requestID, orderID, claimToken uuid.UUID
	cmd                            order.Command
	cmdErr                         error
	created                        time.Time
}

type orderRow struct {
	tenant, customer, total, currency string
	requestID                         uuid.UUID
	month                             string
	created                           time.Time
	version                           int64 // 1 when never changed (or before migration 0004)
}

type key struct {
	tenant string
	id     uuid.UUID
}

const (
	selectRequests  = `SELECT tenant, operation, request_id, entity_id, command, state, created_at, last_error, claim_token FROM write_requests_by_id`
	selectRequest   = selectRequests + ` WHERE tenant = ? AND operation = ? AND request_id = ?`
	selectByID      = `SELECT tenant, order_id, customer_id, order_month, total, currency, request_id, created_at, version FROM orders_by_id`
	selectByCust    = `SELECT tenant, customer_id, order_month, created_at, order_id, total, request_id FROM orders_by_customer_time`
	selectEvents    = `SELECT tenant, order_id, event_id, event_type FROM order_events_by_order`
	createOperation = order.Operation
)

// Check reads the keyspace of s and reports every violation.
func Check(ctx context.Context, s *gocql.Session, cfg Config) (Report, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Retention == 0 {
		cfg.Retention = 7 * 24 * time.Hour
	}
	now := cfg.Now()
	var rep Report
	var v []string

	// The ledger.
	requests := map[key]request{}
	byOrder := map[key][]uuid.UUID{}
	iter := s.Query(selectRequests).PageSize(1000).IterContext(ctx)
	var (
		r               request
		op              string
		reqID, entityID gocql.UUID
		token           gocql.UUID
		cmdBytes        []byte
	)
	var changeReqs []changeRequest
	addRequest := func() {
		switch op {
		case createOperation:
		case order.OperationCancel, order.OperationAmend:
			changeReqs = append(changeReqs, newChangeRequest(r, op, uuid.UUID(reqID), uuid.UUID(entityID), cmdBytes))
			return
		default:
			return // another operation's rows (tests of the ledger alone): not orderd's
		}
		r.requestID, r.orderID, r.claimToken = uuid.UUID(reqID), uuid.UUID(entityID), uuid.UUID(token)
		r.cmd, r.cmdErr = order.DecodeCommand(cmdBytes)
		requests[key{r.tenant, r.requestID}] = r
		byOrder[key{r.tenant, r.orderID}] = append(byOrder[key{r.tenant, r.orderID}], r.requestID)
		rep.Requests++
		if r.state == "FAILED" {
			rep.Failed++
			v = append(v, fmt.Sprintf("request %s FAILED: %s", r.requestID, r.lastErr))
		}
		if r.cmdErr != nil {
			v = append(v, fmt.Sprintf("request %s: stored command unreadable: %v", r.requestID, r.cmdErr))
		}
		if want := order.ID(r.tenant, r.requestID); r.orderID != want {
			v = append(v, fmt.Sprintf("request %s maps to order %s, want the derived id %s", r.requestID, r.orderID, want))
		}
	}
	for iter.Scan(&r.tenant, &op, &reqID, &entityID, &cmdBytes, &r.state, &r.created, &r.lastErr, &token) {
		addRequest()
	}
	if err := iter.Close(); err != nil {
		return rep, fmt.Errorf("read write_requests_by_id: %w", err)
	}
	// orders_by_id.
	orders := map[key]orderRow{}
	iter = s.Query(selectByID).PageSize(1000).IterContext(ctx)
	var (
		o       orderRow
		oid     gocql.UUID
		month   time.Time
		total   *inf.Dec
		version *int64
	)
	for iter.Scan(&o.tenant, &oid, &o.customer, &month, &total, &o.currency, &reqID, &o.created, &version) {
		o.requestID, o.month, o.total = uuid.UUID(reqID), month.Format(time.DateOnly), total.String()
		o.version = order.CreatedVersion
		if version != nil {
			o.version = *version
		}
		version = nil
		orders[key{o.tenant, uuid.UUID(oid)}] = o
		rep.OrdersByID++
	}
	if err := iter.Close(); err != nil {
		return rep, fmt.Errorf("read orders_by_id: %w", err)
	}

	// The scan reads at LOCAL_QUORUM, which can miss a claim whose Paxos
	// commit ran at ANY and has not landed yet (ORDERD_CLAIM_COMMIT=any):
	// every create request an order or an acknowledgement names that the
	// scan did not return is read again, linearizably, before it counts as
	// missing.
	serial := cassandra.Wrap(s).Serial() // LOCAL_SERIAL, or SERIAL under ORDERD_SERIAL_CONSISTENCY=serial
	for k := range unscanned(requests, orders, cfg.Acks) {
		iter := s.Query(selectRequest, k.tenant, createOperation, gocql.UUID(k.id)).Consistency(serial).IterContext(ctx)
		for iter.Scan(&r.tenant, &op, &reqID, &entityID, &cmdBytes, &r.state, &r.created, &r.lastErr, &token) {
			addRequest()
			rep.ReadAgain++
		}
		if err := iter.Close(); err != nil {
			return rep, fmt.Errorf("read request %s again: %w", k.id, err)
		}
	}
	for k, ids := range byOrder {
		if len(ids) > 1 {
			v = append(v, fmt.Sprintf("order %s is claimed by %d requests: %v", k.id, len(ids), ids))
		}
	}

	// orders_by_customer_time (the listing; orders_by_customer, its
	// predecessor, is read by nobody): count rows per order id. A row is
	// keyed by its order's creation time: a second claim time is a second
	// row.
	custRows := map[key][]orderRow{}
	iter = s.Query(selectByCust).PageSize(1000).IterContext(ctx)
	for iter.Scan(&o.tenant, &o.customer, &month, &o.created, &oid, &total, &reqID) {
		o.requestID, o.month, o.total = uuid.UUID(reqID), month.Format(time.DateOnly), total.String()
		custRows[key{o.tenant, uuid.UUID(oid)}] = append(custRows[key{o.tenant, uuid.UUID(oid)}], o)
		rep.OrdersByCustomerTime++
	}
	if err := iter.Close(); err != nil {
		return rep, fmt.Errorf("read orders_by_customer_time: %w", err)
	}

	// Events: count ORDER_CREATED per order and check their ids; note the
	// change events' ids.
	events := map[key][]uuid.UUID{}
	changeEvents := map[uuid.UUID]bool{}
	iter = s.Query(selectEvents).PageSize(1000).IterContext(ctx)
	var (
		tenant, typ string
		evID        gocql.UUID
	)
	for iter.Scan(&tenant, &oid, &evID, &typ) {
		rep.Events++
		if typ == "ORDER_CREATED" {
			events[key{tenant, uuid.UUID(oid)}] = append(events[key{tenant, uuid.UUID(oid)}], uuid.UUID(evID))
		} else {
			changeEvents[uuid.UUID(evID)] = true
		}
	}
	if err := iter.Close(); err != nil {
		return rep, fmt.Errorf("read order_events_by_order: %w", err)
	}

	// A PENDING claim is COMPLETE once its order is recorded (orders_by_id,
	// written last); rows completed before the one-LWT protocol say so.
	for k, r := range requests {
		if r.state != "PENDING" {
			if r.state == "COMPLETE" {
				rep.Complete++
			}
			continue
		}
		if o, ok := orders[key{r.tenant, r.orderID}]; ok && o.requestID == r.requestID {
			r.state = "COMPLETE"
			requests[k] = r
			rep.Complete++
			continue
		}
		rep.Pending++
		if age := now.Sub(r.created); age > cfg.Grace {
			v = append(v, fmt.Sprintf("request %s PENDING for %s (grace %s)", r.requestID, age.Round(time.Second), cfg.Grace))
		}
	}

	// Every COMPLETE request: one order per table, one event, values from its command.
	for _, r := range requests {
		if r.state != "COMPLETE" || r.cmdErr != nil {
			continue
		}
		k := key{r.tenant, r.orderID}
		o, ok := orders[k]
		switch {
		case !ok:
			v = append(v, fmt.Sprintf("COMPLETE request %s has no orders_by_id row (order %s)", r.requestID, r.orderID))
		case o.customer != r.cmd.CustomerID || o.total != r.cmd.Total || o.currency != r.cmd.Currency || o.requestID != r.requestID:
			v = append(v, fmt.Sprintf("order %s (%s %s %s, request %s) does not match request %s's command (%s %s %s)",
				r.orderID, o.customer, o.total, o.currency, o.requestID, r.requestID, r.cmd.CustomerID, r.cmd.Total, r.cmd.Currency))
		case o.month != order.MonthOf(o.created):
			// The order's first write is authoritative: a claim made after
			// an earlier one expired replays it, with its time and month.
			v = append(v, fmt.Sprintf("order %s month %s, want %s from its creation time", r.orderID, o.month, order.MonthOf(o.created)))
		}
		if rows := custRows[k]; len(rows) != 1 {
			v = append(v, fmt.Sprintf("COMPLETE request %s has %d orders_by_customer_time rows, want 1", r.requestID, len(rows)))
		} else if rows[0].customer != r.cmd.CustomerID || rows[0].total != r.cmd.Total || (ok && rows[0].month != o.month) {
			v = append(v, fmt.Sprintf("orders_by_customer_time row of order %s does not match request %s", r.orderID, r.requestID))
		} else if ok && !rows[0].created.Equal(o.created) {
			v = append(v, fmt.Sprintf("orders_by_customer_time lists order %s at %s, want its creation time %s",
				r.orderID, rows[0].created.UTC().Format(time.RFC3339Nano), o.created.UTC().Format(time.RFC3339Nano)))
		}
		if ev := events[k]; len(ev) != 1 || ev[0] != r.requestID {
			v = append(v, fmt.Sprintf("COMPLETE request %s has events %v, want exactly [%s]", r.requestID, ev, r.requestID))
		}
	}
	// Every order has its request, unless that request may have expired.
	for k, o := range orders {
		r, ok := requests[key{k.tenant, o.requestID}]
		switch {
		case !ok && now.Sub(o.created) <= cfg.Retention:
			v = append(v, fmt.Sprintf("order %s has no request %s in the ledger", k.id, o.requestID))
		case !ok: // the request expired by design
		case r.orderID != k.id:
			v = append(v, fmt.Sprintf("order %s names request %s, which maps to order %s", k.id, o.requestID, r.orderID))
		}
		if len(events[k]) > 1 {
			v = append(v, fmt.Sprintf("order %s has %d ORDER_CREATED events", k.id, len(events[k])))
		}
	}
	for k := range custRows {
		if _, ok := orders[k]; !ok {
			if r, ok := requests[key{k.tenant, custRows[k][0].requestID}]; !ok || r.state == "COMPLETE" {
				v = append(v, fmt.Sprintf("orders_by_customer_time has order %s but orders_by_id does not", k.id))
			}
		}
	}
	// Acknowledged outcomes.
	for _, a := range cfg.Acks {
		if a.IsChange() {
			continue // checkVersions
		}
		rep.AcksChecked++
		id, err := uuid.Parse(a.RequestID)
		if err != nil {
			v = append(v, fmt.Sprintf("ack with a bad request id %q", a.RequestID))
			continue
		}
		r, ok := requests[key{a.Tenant, id}]
		if !ok || r.state != "COMPLETE" {
			v = append(v, fmt.Sprintf("acknowledged request %s is %v in the ledger, want COMPLETE", a.RequestID, map[bool]string{true: r.state, false: "missing"}[ok]))
			continue
		}
		o, ok := orders[key{a.Tenant, r.orderID}]
		if !ok || r.orderID.String() != a.OrderID || o.total != a.Total || o.customer != a.CustomerID || o.currency != a.Currency {
			v = append(v, fmt.Sprintf("acknowledged request %s (order %s, %s %s %s) does not match the stored order %s (%s %s %s)",
				a.RequestID, a.OrderID, a.CustomerID, a.Total, a.Currency, r.orderID, o.customer, o.total, o.currency))
		}
	}
	vv, err := checkVersions(ctx, s, cfg, now, versionInputs{orders: orders, changeEvents: changeEvents, requests: changeReqs}, &rep)
	if err != nil {
		return rep, err
	}
	v = append(v, vv...)
	if cfg.CheckDelivered || cfg.ConsumerKeyspace != "" {
		dv, err := checkDelivery(ctx, s, cfg, inScope(requests, cfg.Acks), now, &rep)
		if err != nil {
			return rep, err
		}
		v = append(v, dv...)
	}
	sort.Strings(v)
	rep.Violations = v
	return rep, nil
}

// inScope are the COMPLETE requests the delivery checks look at: the
// acknowledged ones if acks are given, else all.
func inScope(requests map[key]request, acks []Ack) []request {
	var out []request
	if len(acks) == 0 {
		for _, r := range requests {
			if r.state == "COMPLETE" {
				out = append(out, r)
			}
		}
		return out
	}
	for _, a := range acks {
		id, err := uuid.Parse(a.RequestID)
		if err != nil || a.IsChange() {
			continue // reported with the acks above; changes: checkVersions
		}
		if r, ok := requests[key{a.Tenant, id}]; ok && r.state == "COMPLETE" {
			out = append(out, r)
		}
	}
	return out
}

// unscanned is every create request that an order or an acknowledgement
// names and the ledger scan did not return.
func unscanned(requests map[key]request, orders map[key]orderRow, acks []Ack) map[key]bool {
	out := map[key]bool{}
	for _, o := range orders {
		if k := (key{o.tenant, o.requestID}); !hasKey(requests, k) {
			out[k] = true
		}
	}
	for _, a := range acks {
		if a.IsChange() {
			continue
		}
		if id, err := uuid.Parse(a.RequestID); err == nil && !hasKey(requests, key{a.Tenant, id}) {
			out[key{a.Tenant, id}] = true
		}
	}
	return out
}

func hasKey(requests map[key]request, k key) bool {
	_, ok := requests[k]
	return ok
}
