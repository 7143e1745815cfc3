// Package invariant checks, from the rows of a keyspace, the promises orderd
// makes (docs/architecture.md): every COMPLETE request has exactly one order in
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
	"slices"
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
func (a Ack) IsChange() bool { return a.Operation != "" && a.Operation != order.OperationCreate }

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
	createOperation = order.OperationCreate
)

// Check reads the keyspace of s and reports every violation. It reads the
// tables once, then holds the rows to each promise in turn; the violations
// are sorted, so the order the promises run in does not show in the report.
func Check(ctx context.Context, s *gocql.Session, cfg Config) (Report, error) {
	cfg = cfg.withDefaults()
	now := cfg.Now()
	var rep Report
	in, err := read(ctx, s, cfg.Acks, &rep)
	if err != nil {
		return rep, err
	}
	in.settle(&rep)
	v := slices.Concat(
		noFailedRequest(in),
		commandsReadable(in),
		orderIDsDerived(in),
		oneRequestPerOrder(in),
		noPendingPastGrace(in, now, cfg.Grace),
		completeHasItsOrder(in),
		completeListedOnce(in),
		completeHasOneEvent(in),
		ordersHaveTheirRequest(in, now, cfg.Retention),
		oneCreatedEventPerOrder(in),
		listedOrdersRecorded(in),
		acknowledgedCreatesStored(in, cfg.Acks, &rep),
	)
	vv, err := checkVersions(ctx, s, cfg, now, versionInputs{orders: in.orders, changeEvents: in.changeEvents, requests: in.changeReqs}, &rep)
	if err != nil {
		return rep, err
	}
	v = append(v, vv...)
	if cfg.CheckDelivered || cfg.ConsumerKeyspace != "" {
		dv, err := checkDelivery(ctx, s, cfg, inScope(in.requests, cfg.Acks), now, &rep)
		if err != nil {
			return rep, err
		}
		v = append(v, dv...)
	}
	sort.Strings(v)
	rep.Violations = v
	return rep, nil
}

func (cfg Config) withDefaults() Config {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Retention == 0 {
		cfg.Retention = 7 * 24 * time.Hour
	}
	return cfg
}

// snapshot is what Check read from the tables, keyed the way the promises
// look rows up.
type snapshot struct {
	requests map[key]request // create requests, by request id
	// byOrder: the ids of the create requests that map to each order, in
	// the order they were read (the order a violation lists them in).
	byOrder map[key][]uuid.UUID
	orders  map[key]orderRow    // orders_by_id, by order id
	listed  map[key][]orderRow  // orders_by_customer_time rows, by order id
	events  map[key][]uuid.UUID // ORDER_CREATED event ids, by order id
	// changeEvents: the ids of every other event (the changes').
	changeEvents map[uuid.UUID]bool
	changeReqs   []changeRequest
}

// read reads the ledger and the read tables into a snapshot. It counts what
// it reads into rep as it goes, so that a read error still returns the
// counts so far.
func read(ctx context.Context, s *gocql.Session, acks []Ack, rep *Report) (*snapshot, error) {
	in := &snapshot{
		requests:     map[key]request{},
		byOrder:      map[key][]uuid.UUID{},
		orders:       map[key]orderRow{},
		listed:       map[key][]orderRow{},
		events:       map[key][]uuid.UUID{},
		changeEvents: map[uuid.UUID]bool{},
	}
	var row ledgerRow
	if err := in.readLedger(ctx, s, &row, rep); err != nil {
		return nil, err
	}
	if err := in.readOrders(ctx, s, rep); err != nil {
		return nil, err
	}
	if err := in.readAgain(ctx, s, &row, acks, rep); err != nil {
		return nil, err
	}
	if err := in.readListing(ctx, s, rep); err != nil {
		return nil, err
	}
	if err := in.readEvents(ctx, s, rep); err != nil {
		return nil, err
	}
	return in, nil
}

// ledgerRow is the scan destination of a write_requests_by_id row.
type ledgerRow struct {
	r               request
	op              string
	reqID, entityID gocql.UUID
	token           gocql.UUID
	cmd             []byte
}

func (l *ledgerRow) dest() []any {
	return []any{&l.r.tenant, &l.op, &l.reqID, &l.entityID, &l.cmd, &l.r.state, &l.r.created, &l.r.lastErr, &l.token}
}

// add files the row just scanned: a create request by its id and its
// order, a change request in changeReqs; any other operation's rows (tests
// of the ledger alone) are not orderd's and are skipped.
func (in *snapshot) add(l *ledgerRow, rep *Report) {
	switch l.op {
	case createOperation:
	case order.OperationCancel, order.OperationAmend:
		in.changeReqs = append(in.changeReqs, newChangeRequest(l.r, l.op, uuid.UUID(l.reqID), uuid.UUID(l.entityID), l.cmd))
		return
	default:
		return
	}
	r := l.r
	r.requestID, r.orderID, r.claimToken = uuid.UUID(l.reqID), uuid.UUID(l.entityID), uuid.UUID(l.token)
	r.cmd, r.cmdErr = order.DecodeCommand(l.cmd)
	in.requests[key{r.tenant, r.requestID}] = r
	in.byOrder[key{r.tenant, r.orderID}] = append(in.byOrder[key{r.tenant, r.orderID}], r.requestID)
	rep.Requests++
	if r.state == "FAILED" {
		rep.Failed++
	}
}

func (in *snapshot) readLedger(ctx context.Context, s *gocql.Session, l *ledgerRow, rep *Report) error {
	iter := s.Query(selectRequests).PageSize(1000).IterContext(ctx)
	for iter.Scan(l.dest()...) {
		in.add(l, rep)
	}
	if err := iter.Close(); err != nil {
		return fmt.Errorf("read write_requests_by_id: %w", err)
	}
	return nil
}

func (in *snapshot) readOrders(ctx context.Context, s *gocql.Session, rep *Report) error {
	iter := s.Query(selectByID).PageSize(1000).IterContext(ctx)
	var (
		o          orderRow
		oid, reqID gocql.UUID
		month      time.Time
		total      *inf.Dec
		version    *int64
	)
	for iter.Scan(&o.tenant, &oid, &o.customer, &month, &total, &o.currency, &reqID, &o.created, &version) {
		o.requestID, o.month, o.total = uuid.UUID(reqID), month.Format(time.DateOnly), total.String()
		o.version = order.CreatedVersion
		if version != nil {
			o.version = *version
		}
		version = nil
		in.orders[key{o.tenant, uuid.UUID(oid)}] = o
		rep.OrdersByID++
	}
	if err := iter.Close(); err != nil {
		return fmt.Errorf("read orders_by_id: %w", err)
	}
	return nil
}

// readAgain reads, linearizably, every create request an order or an
// acknowledgement names that the ledger scan did not return. The scan reads
// at LOCAL_QUORUM, which can miss a claim whose Paxos commit ran at ANY and
// has not landed yet (ORDERD_CLAIM_COMMIT=any): such a request must not
// count as missing.
func (in *snapshot) readAgain(ctx context.Context, s *gocql.Session, l *ledgerRow, acks []Ack, rep *Report) error {
	serial := cassandra.Wrap(s).Serial() // LOCAL_SERIAL, or SERIAL under ORDERD_SERIAL_CONSISTENCY=serial
	for k := range unscanned(in.requests, in.orders, acks) {
		iter := s.Query(selectRequest, k.tenant, createOperation, gocql.UUID(k.id)).Consistency(serial).IterContext(ctx)
		for iter.Scan(l.dest()...) {
			in.add(l, rep)
			rep.ReadAgain++
		}
		if err := iter.Close(); err != nil {
			return fmt.Errorf("read request %s again: %w", k.id, err)
		}
	}
	return nil
}

// readListing reads orders_by_customer_time (the listing; orders_by_customer,
// its predecessor, is read by nobody) into rows per order id. A row is keyed
// by its order's creation time: a second claim time is a second row.
func (in *snapshot) readListing(ctx context.Context, s *gocql.Session, rep *Report) error {
	iter := s.Query(selectByCust).PageSize(1000).IterContext(ctx)
	var (
		o          orderRow
		oid, reqID gocql.UUID
		month      time.Time
		total      *inf.Dec
	)
	for iter.Scan(&o.tenant, &o.customer, &month, &o.created, &oid, &total, &reqID) {
		o.requestID, o.month, o.total = uuid.UUID(reqID), month.Format(time.DateOnly), total.String()
		in.listed[key{o.tenant, uuid.UUID(oid)}] = append(in.listed[key{o.tenant, uuid.UUID(oid)}], o)
		rep.OrdersByCustomerTime++
	}
	if err := iter.Close(); err != nil {
		return fmt.Errorf("read orders_by_customer_time: %w", err)
	}
	return nil
}

// readEvents files the ORDER_CREATED event ids by order and notes the
// change events' ids.
func (in *snapshot) readEvents(ctx context.Context, s *gocql.Session, rep *Report) error {
	iter := s.Query(selectEvents).PageSize(1000).IterContext(ctx)
	var (
		tenant, typ string
		oid, evID   gocql.UUID
	)
	for iter.Scan(&tenant, &oid, &evID, &typ) {
		rep.Events++
		if typ == "ORDER_CREATED" {
			in.events[key{tenant, uuid.UUID(oid)}] = append(in.events[key{tenant, uuid.UUID(oid)}], uuid.UUID(evID))
		} else {
			in.changeEvents[uuid.UUID(evID)] = true
		}
	}
	if err := iter.Close(); err != nil {
		return fmt.Errorf("read order_events_by_order: %w", err)
	}
	return nil
}

// settle marks COMPLETE every PENDING claim whose order is recorded
// (orders_by_id is written last), and counts the COMPLETE and the still
// PENDING requests. Rows completed before the one-LWT protocol say
// COMPLETE themselves.
func (in *snapshot) settle(rep *Report) {
	for k, r := range in.requests {
		if r.state != "PENDING" {
			if r.state == "COMPLETE" {
				rep.Complete++
			}
			continue
		}
		if o, ok := in.orders[key{r.tenant, r.orderID}]; ok && o.requestID == r.requestID {
			r.state = "COMPLETE"
			in.requests[k] = r
			rep.Complete++
			continue
		}
		rep.Pending++
	}
}

// noFailedRequest: no create request is FAILED.
func noFailedRequest(in *snapshot) []string {
	var v []string
	for _, r := range in.requests {
		if r.state == "FAILED" {
			v = append(v, fmt.Sprintf("request %s FAILED: %s", r.requestID, r.lastErr))
		}
	}
	return v
}

// commandsReadable: every create request's stored command decodes.
func commandsReadable(in *snapshot) []string {
	var v []string
	for _, r := range in.requests {
		if r.cmdErr != nil {
			v = append(v, fmt.Sprintf("request %s: stored command unreadable: %v", r.requestID, r.cmdErr))
		}
	}
	return v
}

// orderIDsDerived: every create request maps to the order id derived from
// its tenant and request id.
func orderIDsDerived(in *snapshot) []string {
	var v []string
	for _, r := range in.requests {
		if want := order.ID(r.tenant, r.requestID); r.orderID != want {
			v = append(v, fmt.Sprintf("request %s maps to order %s, want the derived id %s", r.requestID, r.orderID, want))
		}
	}
	return v
}

// oneRequestPerOrder: no two create requests map to one order.
func oneRequestPerOrder(in *snapshot) []string {
	var v []string
	for k, ids := range in.byOrder {
		if len(ids) > 1 {
			v = append(v, fmt.Sprintf("order %s is claimed by %d requests: %v", k.id, len(ids), ids))
		}
	}
	return v
}

// noPendingPastGrace: no create request stays PENDING longer than the
// grace (a claim whose order is recorded counts as COMPLETE: settle).
func noPendingPastGrace(in *snapshot, now time.Time, grace time.Duration) []string {
	var v []string
	for _, r := range in.requests {
		if r.state != "PENDING" {
			continue
		}
		if age := now.Sub(r.created); age > grace {
			v = append(v, fmt.Sprintf("request %s PENDING for %s (grace %s)", r.requestID, age.Round(time.Second), grace))
		}
	}
	return v
}

// completeRequests are the COMPLETE requests whose command is readable: the
// ones whose order can be compared with what was asked.
func completeRequests(in *snapshot) []request {
	var out []request
	for _, r := range in.requests {
		if r.state == "COMPLETE" && r.cmdErr == nil {
			out = append(out, r)
		}
	}
	return out
}

// completeHasItsOrder: every COMPLETE request has its orders_by_id row,
// with the customer, total and currency of its command, naming it, in the
// month of the order's creation time.
func completeHasItsOrder(in *snapshot) []string {
	var v []string
	for _, r := range completeRequests(in) {
		o, ok := in.orders[key{r.tenant, r.orderID}]
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
	}
	return v
}

// completeListedOnce: every COMPLETE request's order has exactly one
// orders_by_customer_time row, with its command's customer and total and,
// where the orders_by_id row exists, that row's month and creation time.
func completeListedOnce(in *snapshot) []string {
	var v []string
	for _, r := range completeRequests(in) {
		k := key{r.tenant, r.orderID}
		o, ok := in.orders[k]
		if rows := in.listed[k]; len(rows) != 1 {
			v = append(v, fmt.Sprintf("COMPLETE request %s has %d orders_by_customer_time rows, want 1", r.requestID, len(rows)))
		} else if rows[0].customer != r.cmd.CustomerID || rows[0].total != r.cmd.Total || (ok && rows[0].month != o.month) {
			v = append(v, fmt.Sprintf("orders_by_customer_time row of order %s does not match request %s", r.orderID, r.requestID))
		} else if ok && !rows[0].created.Equal(o.created) {
			v = append(v, fmt.Sprintf("orders_by_customer_time lists order %s at %s, want its creation time %s",
				r.orderID, rows[0].created.UTC().Format(time.RFC3339Nano), o.created.UTC().Format(time.RFC3339Nano)))
		}
	}
	return v
}

// completeHasOneEvent: every COMPLETE request's order has exactly one
// ORDER_CREATED event, whose id is the request id.
func completeHasOneEvent(in *snapshot) []string {
	var v []string
	for _, r := range completeRequests(in) {
		if ev := in.events[key{r.tenant, r.orderID}]; len(ev) != 1 || ev[0] != r.requestID {
			v = append(v, fmt.Sprintf("COMPLETE request %s has events %v, want exactly [%s]", r.requestID, ev, r.requestID))
		}
	}
	return v
}

// ordersHaveTheirRequest: every order younger than the retention has the
// request it names in the ledger (an older one's may have expired, by
// design), and a request that is there maps back to the order.
func ordersHaveTheirRequest(in *snapshot, now time.Time, retention time.Duration) []string {
	var v []string
	for k, o := range in.orders {
		r, ok := in.requests[key{k.tenant, o.requestID}]
		switch {
		case !ok && now.Sub(o.created) <= retention:
			v = append(v, fmt.Sprintf("order %s has no request %s in the ledger", k.id, o.requestID))
		case !ok: // the request expired by design
		case r.orderID != k.id:
			v = append(v, fmt.Sprintf("order %s names request %s, which maps to order %s", k.id, o.requestID, r.orderID))
		}
	}
	return v
}

// oneCreatedEventPerOrder: no order in orders_by_id has more than one
// ORDER_CREATED event.
func oneCreatedEventPerOrder(in *snapshot) []string {
	var v []string
	for k := range in.orders {
		if len(in.events[k]) > 1 {
			v = append(v, fmt.Sprintf("order %s has %d ORDER_CREATED events", k.id, len(in.events[k])))
		}
	}
	return v
}

// listedOrdersRecorded: every order orders_by_customer_time lists is in
// orders_by_id, unless its request is still unfinished (the listing is
// written before orders_by_id).
func listedOrdersRecorded(in *snapshot) []string {
	var v []string
	for k, rows := range in.listed {
		if _, ok := in.orders[k]; !ok {
			if r, ok := in.requests[key{k.tenant, rows[0].requestID}]; !ok || r.state == "COMPLETE" {
				v = append(v, fmt.Sprintf("orders_by_customer_time has order %s but orders_by_id does not", k.id))
			}
		}
	}
	return v
}

// acknowledgedCreatesStored: every acknowledged create has a COMPLETE
// request whose order is stored with the acknowledged id, customer, total
// and currency. It counts the acks it checks into rep; the acknowledged
// changes are checkVersions'.
func acknowledgedCreatesStored(in *snapshot, acks []Ack, rep *Report) []string {
	var v []string
	for _, a := range acks {
		if a.IsChange() {
			continue
		}
		rep.AcksChecked++
		id, err := uuid.Parse(a.RequestID)
		if err != nil {
			v = append(v, fmt.Sprintf("ack with a bad request id %q", a.RequestID))
			continue
		}
		r, ok := in.requests[key{a.Tenant, id}]
		if !ok || r.state != "COMPLETE" {
			v = append(v, fmt.Sprintf("acknowledged request %s is %v in the ledger, want COMPLETE", a.RequestID, map[bool]string{true: r.state, false: "missing"}[ok]))
			continue
		}
		o, ok := in.orders[key{a.Tenant, r.orderID}]
		if !ok || r.orderID.String() != a.OrderID || o.total != a.Total || o.customer != a.CustomerID || o.currency != a.Currency {
			v = append(v, fmt.Sprintf("acknowledged request %s (order %s, %s %s %s) does not match the stored order %s (%s %s %s)",
				a.RequestID, a.OrderID, a.CustomerID, a.Total, a.Currency, r.orderID, o.customer, o.total, o.currency))
		}
	}
	return v
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
