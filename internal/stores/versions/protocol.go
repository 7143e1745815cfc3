package versions

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/platform/lwt"
)

// Versions is the Store: its protocol on a Table, which is Cassandra in
// production (NewCassandraStore).
type Versions struct{ t Table }

var _ Store = (*Versions)(nil)

// New returns the Store on t.
func New(t Table) *Versions { return &Versions{t: t} }

// awaits reports whether an order in st awaits ch: ch's change id has no
// outcome and the order is at ch's expected version and open, so ch did not
// apply and may be sent again.
func (st State) awaits(ch order.Change) bool {
	return st.Record == nil && st.Current == ch.Version-1 && st.Status != order.StatusCancelled
}

// SettleAttempts bounds the sends of an LWT whose outcome was unknown and
// settled as not applied.
const SettleAttempts = 3

// ErrHistoryBehind: the order's history is behind the version its row
// showed (HistoryBehind says how far); nothing was decided or written.
var ErrHistoryBehind = fault.New(fault.ReasonHistoryBehind, errors.New("versions: the history is behind the order's row"))

// HistoryBehind is ErrHistoryBehind for one order: its history is at
// Current, its row showed Shown.
type HistoryBehind struct {
	Current, Shown int64
}

func (e *HistoryBehind) Error() string {
	return fmt.Sprintf("the order's version history is at version %d, its row shows version %d: the history is behind (a restore?)",
		e.Current, e.Shown)
}

func (e *HistoryBehind) Unwrap() error { return ErrHistoryBehind }

// Apply implements Store. An outcome that is unknown (a timeout, a lost
// response) is never guessed: a serial read decides; if the order still
// awaits the change, or its refusal is still unrecorded, the LWT is sent
// again (bounded).
//
// shown is the version the order's row showed the caller (orders_by_id):
// a floor under the history, since a version is projected only after its
// change was accepted here. Two rules follow from it, both for a history
// that a restore left behind its order row (never the case otherwise):
//
//   - once the row shows ch's version or later, the version LWT is not
//     sent: it could only apply on such a history, making a version a
//     second time. The order's state is read instead, and ch is decided
//     from it (its record, or stale);
//   - a history found behind the row decides nothing: not a refusal (the
//     change the client was answered may be the one it lost), not an
//     acceptance. The answer is ErrHistoryBehind, until it is rebuilt.
func (v *Versions) Apply(ctx context.Context, ch order.Change, shown int64) (Decision, error) {
	if shown >= ch.Version {
		st, err := v.t.ReadState(ctx, ch)
		if err != nil {
			return Decision{}, err
		}
		return earlier(decide(ctx, v.t, ch, st, shown))
	}
	res, err := lwt.Do(ctx, lwt.Write[State]{
		Op: fmt.Sprintf("version check of change %s", ch.ID),
		Send: func(ctx context.Context) (bool, State, error) {
			st, applied, err := v.t.ApplyOnce(ctx, ch)
			return applied, st, err
		},
		Read: func(ctx context.Context) (State, error) { return v.t.ReadState(ctx, ch) },
		// A read never shows the change applied on its own: decide reads
		// its record (or its version's row) from the state.
		Awaits: func(st State) bool { return st.awaits(ch) },
		Sends:  SettleAttempts,
	})
	switch {
	case err != nil:
		return Decision{}, err
	case res.Applied:
		return Decision{Accepted: true}, nil
	case res.Settled:
		return decide(ctx, v.t, ch, res.State, shown)
	}
	return earlier(decide(ctx, v.t, ch, res.State, shown))
}

// earlier marks an acceptance as an earlier attempt's (Decision.Earlier).
func earlier(d Decision, err error) (Decision, error) {
	d.Earlier = d.Accepted
	return d, err
}

// decide settles a change that the order in st did not take now: its
// recorded outcome if it has one; accepted if its version's row names it
// (accepted by a version that wrote no record); else refused, and the
// refusal recorded. A history behind shown decides nothing (Apply).
func decide(ctx context.Context, t Table, ch order.Change, st State, shown int64) (Decision, error) {
	if st.Current < shown {
		return Decision{}, &HistoryBehind{Current: st.Current, Shown: shown}
	}
	if st.Record != nil {
		return fromRecord(ch, *st.Record), nil
	}
	if st.Current >= ch.Version {
		made, err := t.ReadChanges(ctx, ch.Tenant, ch.OrderID, ch.Version, ch.Version)
		if err != nil {
			return Decision{}, err
		}
		if len(made) == 1 && made[0].ID == ch.ID {
			return fromRecord(ch, Record{Fingerprint: made[0].Fingerprint, Version: made[0].Version}), nil
		}
	}
	out := order.ChangeOutcome{Reason: fault.ReasonStaleVersion, CurrentVersion: st.Current}
	if st.Current == ch.Version-1 && st.Status == order.StatusCancelled {
		out.Reason = fault.ReasonOrderCancelled
	}
	return refuse(ctx, t, ch, out)
}

// refuse records ch's refusal out under its change id, unless an outcome
// is recorded there first (by another finisher of ch, which may have
// accepted it since): then that outcome is the decision.
func refuse(ctx context.Context, t Table, ch order.Change, out order.ChangeOutcome) (Decision, error) {
	r := Record{Fingerprint: ch.Fingerprint, Reason: out.Reason, CurrentVersion: out.CurrentVersion}
	res, err := lwt.Do(ctx, lwt.Write[State]{
		Op: fmt.Sprintf("recording the refusal of change %s", ch.ID),
		Send: func(ctx context.Context) (bool, State, error) {
			st, applied, err := t.RefuseOnce(ctx, ch, r)
			return applied, st, err
		},
		Read: func(ctx context.Context) (State, error) { return t.ReadState(ctx, ch) },
		// An outcome recorded under the change id decides (below), whoever
		// recorded it; none yet: the refusal may be sent again.
		Awaits: func(st State) bool { return st.Record == nil },
		Sends:  SettleAttempts,
	})
	switch {
	case err != nil:
		return Decision{}, err
	case res.Applied:
		return Decision{Refusal: out}, nil
	case res.State.Record == nil:
		return Decision{}, fault.New(fault.ReasonInternal,
			fmt.Errorf("change %s: the refusal was not applied and no outcome is recorded", ch.ID))
	}
	return fromRecord(ch, *res.State.Record), nil
}

// fromRecord is the decision for ch that its change id's record makes. A
// record of another fingerprint is another command's: the request id was
// reused. The same fingerprint means the same expected version, so an
// accepted record holds ch's own version.
func fromRecord(ch order.Change, r Record) Decision {
	switch {
	case r.Fingerprint != ch.Fingerprint:
		return Decision{Refusal: order.ChangeOutcome{Reason: fault.ReasonRequestIDReused}}
	case r.Accepted():
		return Decision{Accepted: true}
	}
	return Decision{Refusal: r.Refusal()}
}

// History implements Store.
func (v *Versions) History(ctx context.Context, tenant string, orderID uuid.UUID, upTo int64) ([]order.Change, error) {
	return v.t.ReadChanges(ctx, tenant, orderID, order.CreatedVersion+1, upTo)
}

// Lookup implements Store: the record, else the row of a change accepted
// by a version that wrote no record (before migration 0006).
func (v *Versions) Lookup(ctx context.Context, tenant string, orderID, changeID uuid.UUID) (Record, bool, error) {
	recorded, row, err := v.t.ReadOutcome(ctx, tenant, orderID, changeID)
	switch {
	case err != nil:
		return Record{}, false, err
	case recorded != nil:
		return *recorded, true, nil
	case row != nil:
		return *row, true, nil
	}
	return Record{}, false, nil
}

// Bind implements Store.
func (v *Versions) Bind(ctx context.Context, tenant, operation string, requestID, orderID uuid.UUID) error {
	return v.t.Bind(ctx, tenant, operation, requestID, orderID)
}

// Bound implements Store.
func (v *Versions) Bound(ctx context.Context, tenant, operation string, requestID uuid.UUID) (uuid.UUID, bool, error) {
	return v.t.Bound(ctx, tenant, operation, requestID)
}
