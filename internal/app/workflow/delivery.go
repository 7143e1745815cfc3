package workflow

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/platform/failpoint"
	"github.com/atlasmart/orderd/ledger"
)

// releaseTimeout bounds one background release.
const releaseTimeout = 5 * time.Second

// delivery owns "publish, then release": an order's event is published, and
// only the broker's acknowledgement lets the due entry that owes it go.
// Every path that delivers runs through it: the handler's background
// delivery after answering (settleLater, which releases the claim's
// entries itself), and the reconciler's (Settle and Redeliver, through
// deliver, whose answer tells the reconciler whether it may remove the
// entry it holds). Anything short of an acknowledgement (a crash, the
// broker down, a timeout) leaves the entry, and the reconciler publishes
// again when it falls due (docs/outbox.md).
type delivery struct {
	publisher  Publisher // nil: delivery is off, nothing is owed
	timeout    time.Duration
	ledger     ledger.Store
	failpoints *failpoint.Set
	warn       func(ctx context.Context, msg string, attrs ...slog.Attr)
	pending    sync.WaitGroup // background deliveries and releases under way
	// slots holds one token per background delivery or release under way
	// (Config.MaxBackground); skipped is told of one not started for
	// want of a slot.
	slots   chan struct{}
	skipped func()
}

// background runs do after the answer, unless Config.MaxBackground are
// under way already: then it starts nothing and says so (false), and the
// claim's due entry, left as it is, lets the reconciler do it.
func (o *delivery) background(do func()) bool {
	select {
	case o.slots <- struct{}{}:
	default:
		o.skipped()
		return false
	}
	o.pending.Go(func() {
		defer func() { <-o.slots }()
		do()
	})
	return true
}

// deliver publishes ev and says what that settles:
//   - ledger.Finished: acknowledged (or delivery is off): the entry may go;
//   - ledger.EventOwed: the broker did not take it (the error, reason
//     DELIVERY_FAILED, says why): the entry must stay;
//   - ledger.Unfinished: a failpoint armed around the publication failed
//     the attempt (counted, as any unfinished attempt).
func (o *delivery) deliver(ctx context.Context, ev order.Event) (ledger.Settled, error) {
	if o.publisher == nil {
		return ledger.Finished, nil
	}
	if err := o.failpoints.Eval(failpoint.BeforePublish); err != nil {
		return ledger.Unfinished, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if err := o.publisher.Publish(ctx, ev); err != nil {
		return ledger.EventOwed, fault.New(fault.ReasonDeliveryFailed, err)
	}
	if err := o.failpoints.Eval(failpoint.AfterPublish); err != nil {
		return ledger.Unfinished, err
	}
	return ledger.Finished, nil
}

// publish is deliver for a caller that owns no entry (Republish).
func (o *delivery) publish(ctx context.Context, ev order.Event) error {
	_, err := o.deliver(ctx, ev)
	return err
}

// settleLater delivers ev and then releases rec's due entry, without
// making the client wait: the request is done once its order is recorded.
// The delivery keeps ctx's values, not its end: the request's trace goes
// into the event's record (and the lines logged here) although the call
// has returned by then.
func (o *delivery) settleLater(ctx context.Context, rec ledger.Record, ev order.Event) {
	ctx = context.WithoutCancel(ctx)
	started := o.background(func() {
		if settled, err := o.deliver(ctx, ev); settled != ledger.Finished {
			o.warn(ctx, "order event not delivered yet; the reconciler will publish it", slog.Any("request_id", rec.RequestID),
				slog.Any("order_id", ev.Order.ID), slog.String("event", ev.Type), slog.Any("error", err))
			return
		}
		o.release(ctx, rec)
	})
	if !started {
		o.warn(ctx, "too many order events being delivered at once; the reconciler will publish this one", slog.Any("request_id", rec.RequestID),
			slog.Any("order_id", ev.Order.ID), slog.String("event", ev.Type), slog.Int("in_flight", cap(o.slots)))
	}
}

// releaseLater removes rec's due entry in the background: for an attempt
// whose claim was never sent (its order was recorded by another), or a
// change whose refusal is recorded (no event is owed). Best effort: an
// entry left behind costs the reconciler one look when it falls due.
func (o *delivery) releaseLater(ctx context.Context, rec ledger.Record) {
	ctx = context.WithoutCancel(ctx)
	o.background(func() { o.release(ctx, rec) })
}

// release removes rec's due entry under its own timeout; ctx (not ended by
// the call's end) carries the call's trace.
func (o *delivery) release(ctx context.Context, rec ledger.Record) {
	ctx, cancel := context.WithTimeout(ctx, releaseTimeout)
	defer cancel()
	if err := o.ledger.Release(ctx, rec); err != nil {
		o.warn(ctx, "could not release a settled request's due entry; the reconciler will", slog.Any("request_id", rec.RequestID), slog.Any("error", err))
	}
}

// wait blocks until every background delivery and release has ended.
func (o *delivery) wait() { o.pending.Wait() }
