package invariant

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/stores/versions"
)

// The version checks (docs/changes.md): every changed order's
// history (order_versions) has one change per version from 2 to its
// current version, no gap and no change twice, nothing after a cancel;
// no change in two orders' histories;
// every change id's recorded outcome agrees with the history (accepted:
// its version's row names it; refused: no row does);
// the read tables and the consumer show the current version once the last
// change is older than the grace; every change request is settled within
// the grace; every acknowledged change holds the version it was answered.

type changeRequest struct {
	tenant, operation, state string
	requestID, orderID       uuid.UUID
	cmd                      order.ChangeCommand
	cmdErr                   error
	created                  time.Time
}

func newChangeRequest(r request, op string, requestID, orderID uuid.UUID, cmd []byte) changeRequest {
	c := changeRequest{tenant: r.tenant, operation: op, state: r.state, requestID: requestID, orderID: orderID, created: r.created}
	c.cmd, c.cmdErr = order.DecodeChangeCommand(cmd)
	return c
}

// versionInputs are the rows Check read already that the version checks use.
type versionInputs struct {
	orders       map[key]orderRow
	changeEvents map[uuid.UUID]bool // event ids of change events
	requests     []changeRequest
}

type historyRow struct {
	version   int64
	changeID  uuid.UUID
	status    string
	changedAt time.Time
}

type history struct {
	current int64 // the static current_version
	status  string
	rows    []historyRow
	// records are the outcomes recorded by change id (change_outcomes,
	// undecodable ones as a zero Record); nil for a partition with none.
	records map[uuid.UUID]versions.Record
}

const selectVersions = `SELECT tenant, order_id, version, current_version, status, change_id, new_status, changed_at,
	change_outcomes FROM order_versions`

func readHistories(ctx context.Context, s *gocql.Session) (map[key]*history, error) {
	out := map[key]*history{}
	iter := s.Query(selectVersions).PageSize(1000).IterContext(ctx)
	var (
		tenant        string
		oid, changeID gocql.UUID
		version, cur  *int64
		status, next  *string
		changedAt     time.Time
		outcomes      map[gocql.UUID]string
	)
	for iter.Scan(&tenant, &oid, &version, &cur, &status, &changeID, &next, &changedAt, &outcomes) {
		k := key{tenant, uuid.UUID(oid)}
		h := out[k]
		if h == nil {
			h = &history{}
			out[k] = h
		}
		if h.records == nil && len(outcomes) > 0 {
			h.records = make(map[uuid.UUID]versions.Record, len(outcomes))
			for id, enc := range outcomes {
				r, _ := versions.DecodeRecord(enc)
				h.records[uuid.UUID(id)] = r
			}
		}
		if cur != nil {
			h.current = *cur
		}
		if status != nil {
			h.status = *status
		}
		if version != nil {
			row := historyRow{version: *version, changeID: uuid.UUID(changeID), changedAt: changedAt}
			if next != nil {
				row.status = *next
			}
			h.rows = append(h.rows, row)
		}
		version, cur, status, next, outcomes = nil, nil, nil, nil, nil
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("read order_versions: %w", err)
	}
	for _, h := range out {
		slices.SortFunc(h.rows, func(a, b historyRow) int { return int(a.version - b.version) })
	}
	return out, nil
}

func checkVersions(ctx context.Context, s *gocql.Session, cfg Config, now time.Time, in versionInputs, rep *Report) ([]string, error) {
	histories, err := readHistories(ctx, s)
	if err != nil {
		return nil, err
	}
	var consumer map[uuid.UUID]int64
	if cfg.ConsumerKeyspace != "" {
		if _, consumer, err = consumerRows(ctx, s, cfg.ConsumerKeyspace); err != nil {
			return nil, err
		}
	}
	// The consumer sees one topic: with acks, hold it to the acknowledged
	// orders only (other orders of the keyspace may publish elsewhere).
	if len(cfg.Acks) > 0 && consumer != nil {
		acked := map[uuid.UUID]int64{}
		for _, a := range cfg.Acks {
			if id, err := uuid.Parse(a.OrderID); err == nil {
				acked[id] = consumer[id]
			}
		}
		consumer = acked
	}
	var v []string
	for k, h := range histories {
		rep.OrdersChanged++
		rep.Changes += len(h.rows)
		v = append(v, checkHistory(k, h, in, consumer, cfg, now)...)
	}
	v = append(v, changesOfTwoOrders(histories)...)
	for k, o := range in.orders {
		if o.version > order.CreatedVersion && histories[k] == nil {
			v = append(v, historyBehind(k, o.version, order.CreatedVersion))
		}
	}
	for _, r := range in.requests {
		rep.ChangeRequests++
		v = append(v, checkChangeRequest(r, histories, in, cfg, now)...)
	}
	for _, a := range cfg.Acks {
		if !a.IsChange() {
			continue
		}
		rep.ChangeAcksChecked++
		oid, err1 := uuid.Parse(a.OrderID)
		cid, err2 := uuid.Parse(a.ChangeID)
		h := histories[key{a.Tenant, oid}]
		if err1 != nil || err2 != nil || h == nil || a.Version < 2 || a.Version-2 >= int64(len(h.rows)) ||
			h.rows[a.Version-2].changeID != cid {
			v = append(v, fmt.Sprintf("acknowledged change %s (request %s) of order %s at version %d is not that version's change",
				a.ChangeID, a.RequestID, a.OrderID, a.Version))
		}
	}
	return v, nil
}

// changesOfTwoOrders: a change id (one change request of one tenant)
// makes a version of one order only. The same id in two orders' histories
// is a request id reused for another order and accepted there, which the
// binding of a change request to its order (change_requests) refuses.
func changesOfTwoOrders(histories map[key]*history) []string {
	orders := map[uuid.UUID][]string{}
	for k, h := range histories {
		for _, r := range h.rows {
			if id := k.id.String(); !slices.Contains(orders[r.changeID], id) {
				orders[r.changeID] = append(orders[r.changeID], id)
			}
		}
	}
	var v []string
	for id, ids := range orders {
		if len(ids) > 1 {
			slices.Sort(ids)
			v = append(v, fmt.Sprintf("change %s made versions of %d orders (%s): a change request is bound to one order",
				id, len(ids), strings.Join(ids, ", ")))
		}
	}
	slices.Sort(v)
	return v
}

// historyBehind is the violation of an order whose row shows a version its
// history lacks: never so in operation (a version is projected only once
// accepted), it is what a restore can leave.
func historyBehind(k key, shown, history int64) string {
	return fmt.Sprintf("order %s: orders_by_id shows version %d, its history only %d: the history is behind, as a restore can leave it "+
		"(the order's next change, or a retry of a change it lost, rebuilds it first)", k.id, shown, history)
}

// checkHistory holds one order's history to its invariants.
func checkHistory(k key, h *history, in versionInputs, consumer map[uuid.UUID]int64, cfg Config, now time.Time) []string {
	var v []string
	seen := map[uuid.UUID]int64{}
	for i, r := range h.rows {
		if want := int64(i) + 2; r.version != want {
			v = append(v, fmt.Sprintf("order %s: history has version %d where %d belongs (a gap)", k.id, r.version, want))
			break
		}
		if at, dup := seen[r.changeID]; dup {
			v = append(v, fmt.Sprintf("order %s: change %s made versions %d and %d", k.id, r.changeID, at, r.version))
		}
		seen[r.changeID] = r.version
		if i > 0 && h.rows[i-1].status == order.StatusCancelled {
			v = append(v, fmt.Sprintf("order %s: version %d follows a cancel", k.id, r.version))
		}
	}
	v = append(v, checkRecords(k, h)...)
	if len(h.rows) == 0 {
		if len(h.records) > 0 && h.current == 0 {
			return v // refusals of an order never changed
		}
		return append(v, fmt.Sprintf("order %s: order_versions has a partition without a change", k.id))
	}
	last := h.rows[len(h.rows)-1]
	if h.current != last.version || h.status != last.status {
		v = append(v, fmt.Sprintf("order %s: current version %d %s, but its newest change made %d %s", k.id, h.current, h.status, last.version, last.status))
	}
	o, ok := in.orders[k]
	if !ok {
		return append(v, fmt.Sprintf("order %s has changes but no orders_by_id row", k.id))
	}
	if now.Sub(last.changedAt) <= cfg.Grace {
		return v // its projections and its event may still be on their way
	}
	switch {
	case o.version > last.version:
		v = append(v, historyBehind(k, o.version, last.version))
	case o.version != last.version:
		v = append(v, fmt.Sprintf("order %s: orders_by_id shows version %d, its history %d", k.id, o.version, last.version))
	}
	for _, r := range h.rows {
		if !in.changeEvents[r.changeID] {
			v = append(v, fmt.Sprintf("order %s: version %d's change %s has no event row", k.id, r.version, r.changeID))
		}
	}
	if seen, inScope := consumer[k.id]; inScope && seen != last.version {
		v = append(v, fmt.Sprintf("order %s: the consumer's view is at version %d, the order at %d", k.id, seen, last.version))
	}
	return v
}

// checkRecords: every change id's recorded outcome agrees with the
// history. A row with no record is a change accepted before migration
// 0006, which recorded none.
func checkRecords(k key, h *history) []string {
	var v []string
	made := map[uuid.UUID]int64{}
	for _, r := range h.rows {
		made[r.changeID] = r.version
	}
	for id, r := range h.records {
		at, accepted := made[id]
		switch {
		case r.Fingerprint == "":
			v = append(v, fmt.Sprintf("order %s: change %s has an unreadable recorded outcome", k.id, id))
		case r.Accepted() && at != r.Version:
			v = append(v, fmt.Sprintf("order %s: change %s is recorded accepted at version %d, but its history has it at %d (0: nowhere)", k.id, id, r.Version, at))
		case !r.Accepted() && accepted:
			v = append(v, fmt.Sprintf("order %s: change %s is recorded refused (%s), but it made version %d", k.id, id, r.Reason, at))
		}
	}
	return v
}

// checkChangeRequest: a change request older than the grace is settled:
// its change is recorded (history and orders_by_id), or its conflict is
// (COMPLETE); never FAILED or unreadable.
func checkChangeRequest(r changeRequest, histories map[key]*history, in versionInputs, cfg Config, now time.Time) []string {
	switch {
	case r.cmdErr != nil:
		return []string{fmt.Sprintf("change request %s: stored command unreadable: %v", r.requestID, r.cmdErr)}
	case r.state == "FAILED":
		return []string{fmt.Sprintf("change request %s FAILED", r.requestID)}
	case r.state != "PENDING" || now.Sub(r.created) <= cfg.Grace:
		return nil
	}
	k := key{r.tenant, r.orderID}
	made := r.cmd.ExpectedVersion + 1
	h := histories[k]
	if h != nil && made-2 < int64(len(h.rows)) && h.rows[made-2].changeID == order.ChangeID(r.tenant, r.operation, r.requestID) &&
		in.orders[k].version >= made {
		return nil
	}
	return []string{fmt.Sprintf("change request %s PENDING for %s (grace %s)", r.requestID, now.Sub(r.created).Round(time.Second), cfg.Grace)}
}
