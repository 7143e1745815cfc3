package workflow

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/adapters/outbox"
	"github.com/atlasmart/orderd/internal/adapters/outbox/outboxtest"
	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/platform/tracing"
	"github.com/atlasmart/orderd/internal/stores/leases/leasestest"
	"github.com/atlasmart/orderd/ledger"
	"github.com/atlasmart/orderd/reconciler"
)

// An accepted change whose event the broker did not take before the
// claim's retention ended stays owed (owed_order): the reconciler must
// publish it from the order's rows once the broker is back, whatever
// became of the request id since. Here the client reuses the request id,
// after the retention, for a change of another order: that attempt is
// refused REQUEST_ID_REUSED and its claim is COMPLETE in the ledger. The
// owed entry of the first change must still be delivered.
func TestOwedChangeEventSurvivesItsRequestIDBeingReusedAfterRetention(t *testing.T) {
	for _, reuse := range []bool{false, true} {
		name := "request id not reused"
		if reuse {
			name = "request id reused for another order after the retention"
		}
		t.Run(name, func(t *testing.T) {
			f := newChangeFixture(t, nil)
			f.svc.delivery.timeout = 20 * time.Millisecond
			other := f.anotherOrder(t) // for the reuse

			// The amendment is accepted; the broker is down.
			f.pub.SetDown(true)
			amend := f.amend(1, "leave at the door")
			res := f.change(t, amend)
			key := ledger.Key{Tenant: testTenant, Operation: order.OperationAmend, RequestID: uuid.MustParse(amend.RequestID)}
			es := f.led.Entries(key)
			if len(es) != 1 {
				t.Fatalf("entries after the failed publication = %+v, want the claim's", es)
			}
			shard := es[0].Shard

			loop := reconciler.New(reconciler.Config{Now: f.clock.Now, Redeliver: f.svc.Redeliver, InitialLookback: 30 * 24 * time.Hour},
				f.led, f.svc.Settle, leasestest.NewMemoryCoordinator(f.clock.Now), discardLogger())
			f.clock.Advance(time.Minute) // the entry falls due
			if _, err := loop.PassShards(context.Background(), []int{shard}); err != nil {
				t.Fatal(err)
			}
			es = f.led.Entries(key)
			if len(es) != 1 || es[0].Owed != f.order.ID {
				t.Fatalf("entries after the reconciler's failed delivery = %+v, want one owing order %s", es, f.order.ID)
			}

			// The broker stays down past the retention: the claim is gone.
			f.clock.Advance(8 * 24 * time.Hour)
			if _, ok := f.led.Record(key); ok {
				t.Fatal("the claim outlived its retention")
			}
			if reuse {
				again := order.ChangeInput{Operation: order.OperationAmend, RequestID: amend.RequestID,
					OrderID: other.ID.String(), ExpectedVersion: 1, ShippingNote: "other"}
				_, err := f.svc.ChangeOrder(context.Background(), testTenant, again)
				f.svc.Wait()
				if fe := wantFault(t, err, fault.Conflict); fe.Reason != fault.ReasonRequestIDReused {
					t.Fatalf("reuse: %s, want REQUEST_ID_REUSED", fe.Reason)
				}
				if rec, ok := f.led.Record(key); !ok || rec.State != ledger.Complete {
					t.Fatalf("ledger row after the reuse = %+v (%v), want the refused claim, COMPLETE", rec, ok)
				}
			}

			// The broker is back.
			f.pub.SetDown(false)
			before := len(f.pub.Records())
			if _, err := loop.PassShards(context.Background(), []int{shard}); err != nil {
				t.Fatal(err)
			}
			var delivered int
			for _, r := range f.pub.Records()[before:] {
				if outbox.Header(r, outbox.HeaderEventID) == res.Change.ID.String() {
					delivered++
				}
			}
			if delivered != 1 {
				t.Errorf("the owed ORDER_AMENDED event %s was published %d times once the broker was back, want 1; entries left: %+v",
					res.Change.ID, delivered, f.led.Entries(key))
			}
		})
	}
}

// tracedPublisher notes the trace each publication runs in: what kotel
// writes into the record's traceparent header.
type tracedPublisher struct {
	*outboxtest.Memory
	mu     sync.Mutex
	traces []string
}

func (p *tracedPublisher) Publish(ctx context.Context, ev order.Event) error {
	p.mu.Lock()
	p.traces = append(p.traces, tracing.TraceParent(ctx))
	p.mu.Unlock()
	return p.Memory.Publish(ctx, ev)
}

// docs/architecture.md, "Trace context across the broker": the record of
// an event carries the trace context of the call that claimed its request,
// whoever publishes it and however late, as long as its claim lives. An
// event the broker refused once is owed (owed_order) and later attempts,
// while the claim still lives, publish it through Redeliver: they must
// still run in the claim's trace.
func TestOwedEventRepublishedWhileItsClaimLivesKeepsTheCallsTrace(t *testing.T) {
	pub := &tracedPublisher{Memory: outboxtest.NewMemory()}
	f := newFixture(t, Config{Publisher: pub, PublishTimeout: 20 * time.Millisecond, ReplayCacheSize: -1}, nil)
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	ctx := tracing.WithTraceParent(context.Background(), "00-"+traceID+"-00f067aa0ba902b7-01")

	pub.SetDown(true)
	if _, err := f.svc.CreateOrder(ctx, testTenant, baseInput()); err != nil {
		t.Fatal(err)
	}
	f.svc.Wait()
	rec := onlyRecord(t, f.led)
	if !strings.Contains(rec.TraceParent, traceID) {
		t.Fatalf("claim's traceparent = %q, want the call's", rec.TraceParent)
	}
	shard := f.led.Entries(rec.Key)[0].Shard
	loop := reconciler.New(reconciler.Config{Now: f.clock.Now, Redeliver: f.svc.Redeliver},
		f.led, f.svc.Settle, leasestest.NewMemoryCoordinator(f.clock.Now), discardLogger())

	f.clock.Advance(time.Minute) // due: Settle publishes, the broker refuses, the entry owes the event
	if _, err := loop.PassShards(context.Background(), []int{shard}); err != nil {
		t.Fatal(err)
	}
	if es := f.led.Entries(rec.Key); len(es) != 1 || es[0].Owed == ([16]byte{}) {
		t.Fatalf("entries = %+v, want one owing the event", es)
	}
	pub.SetDown(false)
	f.clock.Advance(10 * time.Minute) // due again; the claim lives (7 days)
	if _, ok := f.led.Record(rec.Key); !ok {
		t.Fatal("the claim is gone")
	}
	if _, err := loop.PassShards(context.Background(), []int{shard}); err != nil {
		t.Fatal(err)
	}
	if n := len(pub.Records()); n != 1 {
		t.Fatalf("acknowledged records = %d, want the owed event", n)
	}
	for i, tp := range pub.traces {
		t.Logf("publication %d ran in trace %q", i+1, tp)
	}
	last := pub.traces[len(pub.traces)-1]
	if !strings.Contains(last, traceID) {
		t.Errorf("the acknowledged publication (reconciler, claim still live) ran in trace %q, want the claiming call's %s", last, traceID)
	}
}

// An instance running with delivery off (ORDERD_DELIVERY=false) beside one
// that delivers never settles as done an event the other owes: its
// reconciler leaves the owed entry owed, both while the claim lives and
// after, and the delivering instance publishes it once the broker is back.
func TestAnInstanceWithDeliveryOffLeavesAnOwedEventOwed(t *testing.T) {
	pub := outboxtest.NewMemory()
	f := newFixture(t, Config{Publisher: pub, PublishTimeout: 20 * time.Millisecond, ReplayCacheSize: -1}, nil)
	pub.SetDown(true)
	res, err := f.svc.CreateOrder(context.Background(), testTenant, baseInput())
	if err != nil {
		t.Fatal(err)
	}
	f.svc.Wait()
	key := onlyRecord(t, f.led).Key
	shard := f.led.Entries(key)[0].Shard
	loopOf := func(svc *Service) *reconciler.Loop {
		return reconciler.New(reconciler.Config{Now: f.clock.Now, Redeliver: svc.Redeliver, InitialLookback: 30 * 24 * time.Hour},
			f.led, svc.Settle, leasestest.NewMemoryCoordinator(f.clock.Now), discardLogger())
	}
	pass := func(l *reconciler.Loop) {
		t.Helper()
		if _, err := l.PassShards(context.Background(), []int{shard}); err != nil {
			t.Fatal(err)
		}
	}
	on := loopOf(f.svc)
	f.clock.Advance(time.Minute)
	pass(on)
	if es := f.led.Entries(key); len(es) != 1 || es[0].Owed != res.Order.ID {
		t.Fatalf("entries after the delivering instance's failed attempt = %+v, want one owing order %s", es, res.Order.ID)
	}

	offSvc := New(Config{ReplayCacheSize: -1}, f.led, f.proj, nil, discardLogger())
	offSvc.now = f.clock.Now
	off := loopOf(offSvc)
	for _, after := range []time.Duration{10 * time.Minute, 8 * 24 * time.Hour} { // the claim alive, then gone
		f.clock.Advance(after)
		pass(off)
		if es := f.led.Entries(key); len(es) != 1 || es[0].Owed != res.Order.ID {
			t.Fatalf("entries after a pass of the instance with delivery off (+%s) = %+v, want the owed entry kept", after, es)
		}
	}

	pub.SetDown(false)
	f.clock.Advance(10 * time.Minute)
	pass(on)
	var delivered int
	for _, r := range pub.Records() {
		if outbox.Header(r, outbox.HeaderEventID) == order.CreatedEvent(res.Order).ID.String() {
			delivered++
		}
	}
	if delivered != 1 || len(f.led.Entries(key)) != 0 {
		t.Errorf("the owed event published %d times once the broker was back (want 1); entries left %+v", delivered, f.led.Entries(key))
	}
}
