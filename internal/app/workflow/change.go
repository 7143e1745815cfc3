package workflow

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/platform/failpoint"
	"github.com/atlasmart/orderd/internal/platform/tracing"
	"github.com/atlasmart/orderd/internal/stores/versions"
	"github.com/atlasmart/orderd/ledger"
	"github.com/atlasmart/orderd/projection"
)

// The change workflow (docs/changes.md): CancelOrder and
// AmendOrder, each with a request id (an idempotency key scoped by tenant
// and operation) and an expected version (a precondition on the order).
//
//  1. Receipt first: the order (it must exist: else NOT_FOUND, nothing
//     written) and the outcome recorded with it for this request's change
//     id. A refusal is answered again; an accepted change the order shows
//     is replayed (no Paxos round), whatever the order's version is now;
//     either of another command is REQUEST_ID_REUSED. The record outlives
//     the ledger: it is kept with the order.
//  2. Claim the request in the ledger (the claim LWT, as for CreateOrder).
//     A duplicate of a claimed request gets the recorded answer, waits, or
//     takes over (await), exactly as CreateOrder's duplicates do.
//  3. finishChange: the version check, an LWT on the order's
//     order_versions partition (internal/stores/versions), decides; accepted →
//     project the change (plain writes ordered by version) and answer;
//     not accepted → the refusal the version check recorded with the
//     order is also recorded as a conflict receipt in the ledger
//     (COMPLETE with the reason and the version found) and answered.
//  4. After the answer, publish the change's event and release the due
//     entry (delivery.go), as for CreateOrder; the reconciler finishes a
//     change a crash left half done (Settle).

// Versions is the order's authoritative version (versions.Store).
type Versions interface {
	Apply(ctx context.Context, c order.Change, shown int64) (versions.Decision, error)
	History(ctx context.Context, tenant string, orderID uuid.UUID, upTo int64) ([]order.Change, error)
	Lookup(ctx context.Context, tenant string, orderID, changeID uuid.UUID) (versions.Record, bool, error)
	Bind(ctx context.Context, tenant, operation string, requestID, orderID uuid.UUID) error
	Bound(ctx context.Context, tenant, operation string, requestID uuid.UUID) (uuid.UUID, bool, error)
}

// ChangeResult is the answer to one accepted CancelOrder or AmendOrder.
type ChangeResult struct {
	Change order.Change
	// Order is the order as the change left it (at Change.Version).
	Order order.Order
	// Replayed: an earlier attempt of the same request was accepted; this
	// is its recorded outcome.
	Replayed bool
	Outcome  Outcome
	// acceptedEarlier: finishChange found the change accepted by an
	// earlier attempt (versions.Decision.Earlier).
	acceptedEarlier bool
}

// ChangeOrder runs one attempt of a CancelOrder or AmendOrder command
// (in.Operation). Errors are *fault.Error: Invalid or NotFound (nothing
// written, no receipt), Conflict (the request id is bound to another
// change), Stale or Rejected (the recorded conflict: nothing changed),
// InProgress, Failed, Unavailable or OutcomeUnknown (retry with the same
// request id).
func (s *Service) ChangeOrder(ctx context.Context, tenant string, in order.ChangeInput) (ChangeResult, error) {
	res, err := s.changeOrder(ctx, tenant, in)
	outcome := res.Outcome
	if err != nil {
		outcome = OutcomeOf(err)
	}
	s.cfg.Observer.ChangeOutcome(in.Operation, outcome)
	return res, err
}

func (s *Service) changeOrder(ctx context.Context, tenant string, in order.ChangeInput) (ChangeResult, error) {
	if tenant == "" {
		return ChangeResult{}, fault.New(fault.ReasonInternal, errors.New("no tenant: the caller's identity was not established"))
	}
	if s.cfg.Versions == nil {
		return ChangeResult{}, fault.New(fault.ReasonInternal, errors.New("order changes are not configured (workflow.Config.Versions)"))
	}
	requestID, cmd, err := order.CanonicalizeChange(in)
	if err != nil {
		return ChangeResult{}, err
	}
	if err := s.admit(Admission.Attempt, tenant); err != nil {
		return ChangeResult{}, err
	}
	if err := s.failpoints.Eval(failpoint.BeforeClaim); err != nil {
		return ChangeResult{}, err
	}
	encoded := cmd.Encode()
	claim := ledger.Record{
		Key:         ledger.Key{Tenant: tenant, Operation: in.Operation, RequestID: requestID},
		EntityID:    cmd.OrderID,
		Fingerprint: order.ChangeFingerprint(in.Operation, encoded),
		Command:     encoded,
		CreatedAt:   s.now().UTC().Truncate(time.Millisecond),
		ClaimToken:  uuid.New(),
		TraceParent: tracing.TraceParent(ctx),
	}
	var (
		prior    ChangeResult
		base     order.Order // the order as the check read it
		done     bool
		checkErr error
	)
	won, cur, err := s.ledger.Claim(ctx, claim, func(ctx context.Context) error {
		prior, base, done, checkErr = s.changeRecorded(ctx, claim.Key, claim.Fingerprint, cmd)
		if done {
			return errRecorded
		}
		if checkErr == nil {
			checkErr = s.mayClaim(ctx, in.Operation)
		}
		return checkErr
	})
	if done || checkErr != nil {
		s.delivery.releaseLater(ctx, claim)
	}
	switch {
	case done:
		return prior, nil
	case err != nil:
		return ChangeResult{}, err
	}
	if !won {
		if cur.Fingerprint != claim.Fingerprint {
			return ChangeResult{}, fault.New(fault.ReasonRequestIDReused, nil)
		}
		s.cfg.Observer.RetryAge(max(0, claim.CreatedAt.Sub(cur.CreatedAt)))
		return s.duplicateChange(ctx, cur, cmd)
	}
	if err := s.failpoints.Eval(failpoint.AfterClaim); err != nil {
		return ChangeResult{}, err
	}
	res, err := s.finishChange(ctx, cur, base)
	outcome := OutcomeNew
	if res.acceptedEarlier {
		// A claim won after the retention forgot an earlier attempt's,
		// whose change the version check had accepted: a replay.
		outcome = OutcomeReplayed
	}
	return s.settleChange(ctx, cur, res, err, outcome)
}

// settleChange ends an attempt that ran finishChange for rec: a failure
// is noted on the ledger; an accepted change's event is published and its
// entry released after the answer; a recorded conflict has no event, so
// its entry goes at once.
func (s *Service) settleChange(ctx context.Context, rec ledger.Record, res ChangeResult, err error, outcome Outcome) (ChangeResult, error) {
	s.note(ctx, rec, err)
	switch {
	case receipt(err):
		s.delivery.releaseLater(ctx, rec)
		return ChangeResult{}, err
	case err != nil:
		return ChangeResult{}, err
	}
	s.delivery.settleLater(ctx, rec, order.ChangedEvent(res.Order, res.Change))
	res.Outcome, res.Replayed = outcome, outcome != OutcomeNew
	return res, nil
}

// receipt: err is a change's recorded conflict (its request is done).
func receipt(err error) bool {
	k := fault.KindOf(err)
	return err != nil && (k == fault.Stale || k == fault.Rejected || fault.ReasonOf(err) == fault.ReasonRequestIDReused)
}

// changeRecorded looks up a change request's recorded outcome before
// anything is claimed (the receipt before the version, so
// a retry of an accepted change replays instead of failing as stale). It
// reads the order (NOT_FOUND ends the call: no receipt for a change of no
// order) and the outcome recorded with it under the request's change id,
// which outlives the ledger's receipts: a refusal is the answer again (an
// error of kind Stale or Rejected); an accepted change is, once the order's
// rows show it; a record of another command is REQUEST_ID_REUSED. No record:
// the request goes on to its claim.
// It also returns the order it read, for the attempt that goes on to do the
// work (its creation values never change).
func (s *Service) changeRecorded(ctx context.Context, key ledger.Key, fingerprint string, cmd order.ChangeCommand) (ChangeResult, order.Order, bool, error) {
	base, err := s.projector.Order(ctx, key.Tenant, cmd.OrderID)
	if err != nil {
		return ChangeResult{}, order.Order{}, false, err // NotFound: no such order (of this tenant)
	}
	rec, found, err := s.cfg.Versions.Lookup(ctx, key.Tenant, cmd.OrderID, order.ChangeID(key.Tenant, key.Operation, key.RequestID))
	switch {
	case err != nil:
		return ChangeResult{}, base, false, err
	case !found:
		return ChangeResult{}, base, false, nil
	case rec.Fingerprint != fingerprint:
		return ChangeResult{}, base, false, fault.New(fault.ReasonRequestIDReused, nil)
	case !rec.Accepted():
		return ChangeResult{}, base, false, conflict(rec.Refusal())
	case base.Version < rec.Version:
		return ChangeResult{}, base, false, nil // not (wholly) projected: the claim's finisher does it
	}
	hist, err := s.cfg.Versions.History(ctx, key.Tenant, cmd.OrderID, rec.Version)
	if err != nil {
		return ChangeResult{}, base, false, err
	}
	if len(hist) == 0 || hist[len(hist)-1].Version != rec.Version {
		return ChangeResult{}, base, false, nil // the history does not read back whole yet: claim
	}
	c := hist[len(hist)-1]
	return ChangeResult{Change: c, Order: base.At(hist), Replayed: true, Outcome: OutcomeReplayed}, base, true, nil
}

// duplicateChange answers an attempt of a change request that an earlier
// attempt claimed: its recorded conflict, its recorded acceptance once the
// order shows it, or, once the claim is old enough, the work done here.
func (s *Service) duplicateChange(ctx context.Context, cur ledger.Record, cmd order.ChangeCommand) (ChangeResult, error) {
	var res ChangeResult
	err := s.await(ctx, cur, pendingRequest{
		completed: func(rec ledger.Record) error { return conflictOf(rec) },
		takeover: func(ctx context.Context, rec ledger.Record) error {
			r, err := s.finishChange(ctx, rec, order.Order{})
			res, err = s.settleChange(ctx, rec, r, err, OutcomeTakeover)
			return err
		},
		recorded: func(ctx context.Context) (bool, error) {
			r, _, done, err := s.changeRecorded(ctx, cur.Key, cur.Fingerprint, cmd)
			res = r
			return done, err
		},
	})
	if err != nil {
		return ChangeResult{}, err
	}
	return res, nil
}

// conflictOf is the recorded conflict of a COMPLETE change request.
func conflictOf(rec ledger.Record) error {
	out, err := order.DecodeChangeOutcome(rec.Outcome)
	if err != nil {
		return fault.New(fault.ReasonInternal, fmt.Errorf("request %s: %w", rec.RequestID, err))
	}
	return conflict(out)
}

// conflict is the client's answer for a recorded conflict receipt: a
// version conflict says the order's version it was decided at.
func conflict(out order.ChangeOutcome) error {
	e := fault.New(out.Reason, nil)
	if out.Reason != fault.ReasonRequestIDReused {
		e.Metadata = map[string]string{"current_version": strconv.FormatInt(out.CurrentVersion, 10)}
	}
	return e
}

// finishChange does the work of a claimed change request from its ledger
// row alone: it is safe to run any number of times, concurrently, by
// anyone (the handler, a takeover, the reconciler). It returns the
// accepted change and the order as it left it, or the recorded conflict
// (an error of kind Stale or Rejected). It does not note failures,
// publish or release (settleChange and Settle do).
//
// known is the order if the caller read it already (the attempt that
// claimed, in its receipt check): its creation values never change, and
// the change's state comes from the history. Zero: it is read here.
func (s *Service) finishChange(ctx context.Context, rec ledger.Record, known order.Order) (ChangeResult, error) {
	if rec.State == ledger.Complete {
		return ChangeResult{}, conflictOf(rec)
	}
	cmd, err := order.DecodeChangeCommand(rec.Command)
	if err != nil {
		return ChangeResult{}, fault.New(fault.ReasonCommandUnreadable,
			fmt.Errorf("request %s: %w: %w", rec.RequestID, ledger.ErrUnfinishable, err))
	}
	base := known
	if base.ID != cmd.OrderID {
		if base, err = s.readOrder(ctx, rec, cmd.OrderID); err != nil {
			return ChangeResult{}, err
		}
	}
	if err := s.bindRequest(ctx, rec, cmd.OrderID); err != nil {
		return ChangeResult{}, err
	}
	c := order.NewChange(rec.Tenant, rec.Operation, rec.RequestID, rec.Fingerprint, cmd, rec.CreatedAt)
	if err := s.failpoints.Eval(failpoint.BeforeVersion); err != nil {
		return ChangeResult{}, err
	}
	d, err := s.decide(ctx, c, base.Version)
	if err != nil {
		return ChangeResult{}, err
	}
	if !d.Accepted {
		return ChangeResult{}, s.recordConflict(ctx, rec, d)
	}
	if err := s.failpoints.Eval(failpoint.AfterVersion); err != nil {
		return ChangeResult{}, err
	}
	hist, err := s.cfg.Versions.History(ctx, rec.Tenant, cmd.OrderID, c.Version)
	if err != nil {
		return ChangeResult{}, err
	}
	if len(hist) == 0 || hist[len(hist)-1].ID != c.ID || int64(len(hist)) != c.Version-order.CreatedVersion {
		return ChangeResult{}, fault.New(fault.ReasonClusterUnavailable,
			fmt.Errorf("order %s: the history up to version %d does not read back whole yet", cmd.OrderID, c.Version))
	}
	// The change as its version row holds it: accepted by an earlier claim
	// of the same request (one that died after the version check), it
	// carries that claim's time, and every finisher must project and
	// publish the same values under the same write times.
	c = hist[len(hist)-1]
	// Every accepted change the order row does not show yet is projected,
	// in version order, this one last (always: a replay rewrites its rows
	// as they were): an earlier change whose finisher died after its
	// version check would otherwise stay unprojected behind this one, and
	// the order row would show this version without that change's cells
	// (an amendment's note under a later cancel). Each write is idempotent,
	// at its own version's timestamp.
	o := base.AsCreated()
	for _, h := range hist {
		o = o.Apply(h)
		if h.Version > base.Version || h.ID == c.ID {
			if err := s.projector.WriteChange(ctx, o, h); err != nil {
				return ChangeResult{}, err
			}
		}
	}
	return ChangeResult{Change: c, Order: o, acceptedEarlier: d.Earlier}, nil
}

// bindRequest binds rec's request id to the order its change is for, for
// as long as the keyspace (change_requests), before its version check; a
// request id already bound to another order is refused REQUEST_ID_REUSED,
// recorded as rec's receipt. A change id is derived from the tenant, the
// operation and the request id, without the order, and change_outcomes
// lives in one order's partition: without the binding, the request id
// reused for another order once the ledger forgot it would be accepted
// there under the same change id, its event sharing an id with the first
// change's. A read, then a plain write: while the ledger holds the
// request's claim no other order can take the id, and the binding is
// written long before that claim expires (the retention).
func (s *Service) bindRequest(ctx context.Context, rec ledger.Record, orderID uuid.UUID) error {
	bound, ok, err := s.cfg.Versions.Bound(ctx, rec.Tenant, rec.Operation, rec.RequestID)
	switch {
	case err != nil:
		return err
	case ok && bound != orderID:
		return s.recordConflict(ctx, rec, versions.Decision{Refusal: order.ChangeOutcome{Reason: fault.ReasonRequestIDReused}})
	case ok:
		return nil
	}
	return s.cfg.Versions.Bind(ctx, rec.Tenant, rec.Operation, rec.RequestID, orderID)
}

// decide is the version check of c, against an order whose row showed
// version shown. A history that a restore left behind the order's row is
// rebuilt first (rebuildHistory), then c is decided on it.
func (s *Service) decide(ctx context.Context, c order.Change, shown int64) (versions.Decision, error) {
	d, err := s.cfg.Versions.Apply(ctx, c, shown)
	var behind *versions.HistoryBehind
	if !errors.As(err, &behind) {
		return d, err
	}
	if err := s.rebuildHistory(ctx, c.Tenant, c.OrderID, behind); err != nil {
		return versions.Decision{}, err
	}
	return s.cfg.Versions.Apply(ctx, c, shown)
}

// rebuildHistory makes again, in version order, the accepted changes that
// an order's row shows and its history lost (a restore of tables from
// snapshots taken moments apart can leave order_versions behind
// orders_by_id). Each is made exactly as it first was: its event row names
// it (change id, operation, version, request id, time) and its request's
// claim in the ledger holds its command and fingerprint, so order.NewChange
// gives the same change, and the version check records it as it did then.
// A change whose event row or claim is gone cannot be made again: the
// error says which, and no change of the order is decided until an
// operator restores it.
func (s *Service) rebuildHistory(ctx context.Context, tenant string, orderID uuid.UUID, behind *versions.HistoryBehind) error {
	events, err := s.projector.ChangeEvents(ctx, tenant, orderID)
	if err != nil {
		return err
	}
	byVersion := make(map[int64]projection.ChangeEvent, len(events))
	for _, ev := range events {
		byVersion[ev.Version] = ev
	}
	for v := behind.Current + 1; v <= behind.Shown; v++ {
		c, err := s.lostChange(ctx, tenant, orderID, v, byVersion)
		if err != nil {
			return fmt.Errorf("order %s: %w: %w", orderID, behind, err)
		}
		d, err := s.cfg.Versions.Apply(ctx, c, v-1)
		if err != nil {
			return err
		}
		if !d.Accepted {
			return fault.New(fault.ReasonHistoryBehind, fmt.Errorf("order %s: %w: the change that made version %d (%s) was refused again: %+v",
				orderID, behind, v, c.ID, d.Refusal))
		}
		s.log.WarnContext(ctx, "rebuilt a change the order's version history had lost", "tenant", tenant, "order_id", orderID,
			"version", v, "change_id", c.ID, "request_id", c.RequestID)
	}
	return nil
}

// lostChange is the change that made version v of the order, as its event
// row and its request's claim record it.
func (s *Service) lostChange(ctx context.Context, tenant string, orderID uuid.UUID, v int64, events map[int64]projection.ChangeEvent) (order.Change, error) {
	ev, ok := events[v]
	if !ok {
		return order.Change{}, fmt.Errorf("no event row of version %d", v)
	}
	rec, err := ledger.Read(ctx, s.ledger, ledger.Key{Tenant: tenant, Operation: ev.Operation, RequestID: ev.RequestID})
	if errors.Is(err, ledger.ErrNotFound) {
		return order.Change{}, fmt.Errorf("the claim of request %s, which made version %d, is gone from the ledger", ev.RequestID, v)
	}
	if err != nil {
		return order.Change{}, err
	}
	cmd, err := order.DecodeChangeCommand(rec.Command)
	if err != nil {
		return order.Change{}, fmt.Errorf("request %s, which made version %d: %w", ev.RequestID, v, err)
	}
	c := order.NewChange(tenant, ev.Operation, ev.RequestID, rec.Fingerprint, cmd, ev.At)
	if c.ID != ev.ID || c.Version != v || c.OrderID != orderID {
		return order.Change{}, fmt.Errorf("request %s's claim makes change %s of order %s to version %d, not the event row's %s to version %d",
			ev.RequestID, c.ID, c.OrderID, c.Version, ev.ID, v)
	}
	return c, nil
}

// recordConflict records the refusal the version check decided (and
// recorded with the order) as rec's outcome in the ledger too (Complete:
// its retries within the retention replay it from there) and returns it.
// A refusal is final: it is recorded once under the change id, so
// whoever decides it for this claim decides the same; if another finisher
// completed the claim first, its receipt is the answer.
func (s *Service) recordConflict(ctx context.Context, rec ledger.Record, d versions.Decision) error {
	out := d.Refusal
	done, err := s.ledger.Complete(ctx, rec, out.Encode())
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		return conflict(out) // the claim expired: the answer is true all the same
	case err != nil:
		return err
	case done.State == ledger.Complete && done.ClaimToken == rec.ClaimToken:
		return conflictOf(done)
	}
	return conflict(out)
}

// readOrder reads the order a claimed change is for.
func (s *Service) readOrder(ctx context.Context, rec ledger.Record, id uuid.UUID) (order.Order, error) {
	o, err := s.projector.Order(ctx, rec.Tenant, id)
	if fault.KindOf(err) == fault.NotFound {
		// Claims are sent only for orders that exist, and orders are never
		// deleted: nothing of this change can have been written.
		return order.Order{}, fault.New(fault.ReasonCommandUnreadable,
			fmt.Errorf("request %s: %w: order %s not found", rec.RequestID, ledger.ErrUnfinishable, id))
	}
	return o, err
}
