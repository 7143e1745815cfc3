package workflow

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/adapters/outbox"
	"github.com/atlasmart/orderd/internal/adapters/outbox/outboxtest"
	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/platform/failpoint"
	"github.com/atlasmart/orderd/internal/platform/lograte"
	"github.com/atlasmart/orderd/ledger"
	"github.com/atlasmart/orderd/ledger/ledgertest"
	"github.com/atlasmart/orderd/projection"
)

// deliveryFixture is a fixture whose service publishes to an in-memory
// broker, with a short publish timeout.
func deliveryFixture(t *testing.T) (*fixture, *outboxtest.Memory) {
	t.Helper()
	pub := outboxtest.NewMemory()
	f := newFixture(t, Config{Publisher: pub, PublishTimeout: 50 * time.Millisecond, ReplayCacheSize: -1}, nil)
	return f, pub
}

// A new order's event is published once, after the answer, and only its
// acknowledgement releases the due entry.
func TestNewOrderIsPublishedThenReleased(t *testing.T) {
	f, pub := deliveryFixture(t)
	res, err := f.svc.CreateOrder(context.Background(), testTenant, baseInput())
	if err != nil || res.Outcome != OutcomeNew {
		t.Fatalf("CreateOrder = %+v, %v", res, err)
	}
	f.svc.Wait()
	recs := pub.Records()
	if len(recs) != 1 || string(recs[0].Key) != res.Order.ID.String() ||
		outbox.Header(recs[0], outbox.HeaderEventID) != order.EventID(testTenant, order.OperationCreate, res.Order.RequestID).String() {
		t.Fatalf("published %d records (%v), want the order's one event", len(recs), recs)
	}
	if n := len(f.led.Entries(onlyRecord(t, f.led).Key)); n != 0 {
		t.Errorf("due entries after the acknowledgement = %d, want 0", n)
	}

	// A replay answers from the recorded order: nothing published again.
	if _, err := f.svc.CreateOrder(context.Background(), testTenant, baseInput()); err != nil {
		t.Fatal(err)
	}
	f.svc.Wait()
	if n := len(pub.Records()); n != 1 {
		t.Errorf("records after a replay = %d, want still 1", n)
	}
}

// Two tenants that pick one request id get two orders, and their two
// ORDER_CREATED events carry two event ids: a consumer that deduplicates by
// event id (as docs/outbox.md tells it to) applies both. An event id of the
// bare request id made the second a duplicate of the first, so a tenant that
// guessed another's request ids could suppress its events.
func TestTwoTenantsSharingARequestIDPublishTwoEventIDs(t *testing.T) {
	f, pub := deliveryFixture(t)
	in := baseInput()
	a, err := f.svc.CreateOrder(context.Background(), "acme", in)
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.svc.CreateOrder(context.Background(), "globex", in)
	if err != nil {
		t.Fatal(err)
	}
	f.svc.Wait()
	if a.Order.ID == b.Order.ID {
		t.Fatalf("both tenants got order %s", a.Order.ID)
	}
	ids := map[string]string{} // event id -> order id (the record key)
	for _, r := range pub.Records() {
		id := outbox.Header(r, outbox.HeaderEventID)
		if other, ok := ids[id]; ok && other != string(r.Key) {
			t.Fatalf("event id %s carries order %s and order %s", id, other, r.Key)
		}
		ids[id] = string(r.Key)
	}
	if len(ids) != 2 {
		t.Fatalf("event ids published = %v, want one per tenant's order", ids)
	}
	if _, ok := ids[a.Order.RequestID.String()]; ok {
		t.Errorf("an event id is the bare request id %s, which another tenant can share", a.Order.RequestID)
	}
}

// The broker does not answer: the client still gets its order (delivery is
// not on its path), the due entry stays for the reconciler, and Settle,
// what the reconciler runs, says the event alone is owed (EventOwed, with
// DELIVERY_FAILED) until the broker is back; then it publishes, says
// Finished and leaves the entry to its caller.
func TestUndeliveredEventKeepsTheEntryAndSettleDeliversIt(t *testing.T) {
	f, pub := deliveryFixture(t)
	pub.SetDown(true)
	res, err := f.svc.CreateOrder(context.Background(), testTenant, baseInput())
	if err != nil || res.Outcome != OutcomeNew {
		t.Fatalf("CreateOrder with the broker down = %+v, %v; want the new order", res, err)
	}
	f.svc.Wait()
	rec := onlyRecord(t, f.led)
	if n := len(f.led.Entries(rec.Key)); n != 1 {
		t.Fatalf("due entries with the event undelivered = %d, want 1 (the delivery obligation)", n)
	}

	settled, err := f.svc.Settle(context.Background(), rec)
	fe := wantFault(t, err, fault.Unavailable)
	if settled != ledger.EventOwed || fe.Reason != fault.ReasonDeliveryFailed || !errors.Is(err, outboxtest.ErrBrokerDown) {
		t.Errorf("Settle with the broker down = %s, %v (reason %s), want the event owed, DELIVERY_FAILED caused by the broker",
			settled, err, fe.Reason)
	}
	if n := len(pub.Records()); n != 0 {
		t.Errorf("records acknowledged while down = %d", n)
	}

	pub.SetDown(false)
	if settled, err := f.svc.Settle(context.Background(), rec); settled != ledger.Finished || err != nil {
		t.Fatalf("Settle with the broker back = %s, %v; want finished", settled, err)
	}
	o := res.Order
	if recs := pub.Records(); len(recs) != 1 || string(recs[0].Key) != o.ID.String() {
		t.Errorf("records after Settle = %v, want the order's event", recs)
	}
	f.svc.Wait()
	if n := len(f.led.Entries(rec.Key)); n != 1 {
		t.Errorf("due entries after Settle = %d, want 1 (its caller, the reconciler, removes it)", n)
	}
}

// A duplicate that takes over an abandoned PENDING request publishes the
// event and releases the entry, as the claiming attempt would have.
func TestTakeoverDeliversTheEvent(t *testing.T) {
	f, pub := deliveryFixture(t)
	rec := recordFor(t, f.svc, baseInput(), claimTime.Add(-time.Minute), ledger.Pending)
	if _, _, err := f.led.Claim(context.Background(), rec, nil); err != nil {
		t.Fatal(err)
	}
	res, err := f.svc.CreateOrder(context.Background(), testTenant, baseInput())
	if err != nil || res.Outcome != OutcomeTakeover {
		t.Fatalf("CreateOrder = %+v, %v; want a takeover", res, err)
	}
	f.svc.Wait()
	if recs := pub.Records(); len(recs) != 1 || string(recs[0].Key) != res.Order.ID.String() {
		t.Fatalf("records = %v, want the order's event", recs)
	}
	if n := len(f.led.Entries(rec.Key)); n != 0 {
		t.Errorf("due entries after the takeover's delivery = %d, want 0", n)
	}
}

// Without a publisher the entry goes as soon as the order is recorded.
func TestWithoutPublisherTheEntryGoesOnceRecorded(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	if _, err := f.svc.CreateOrder(context.Background(), testTenant, baseInput()); err != nil {
		t.Fatal(err)
	}
	f.svc.Wait()
	if n := len(f.led.Entries(onlyRecord(t, f.led).Key)); n != 0 {
		t.Errorf("due entries = %d, want 0", n)
	}
	if err := settleErr(f.svc, onlyRecord(t, f.led)); err != nil {
		t.Errorf("Settle without a publisher = %v", err)
	}
}

// With the broker down every new order still gets its answer and keeps its
// due entry (the delivery obligation), but the per-order WARN line is
// written at a bounded rate (lograte), not once per order: the outbox
// metrics count every undelivered event.
func TestBrokerOutageIsLoggedAtABoundedRate(t *testing.T) {
	f, pub := deliveryFixture(t)
	pub.SetDown(true)
	var buf bytes.Buffer
	f.svc.log = slog.New(slog.NewJSONHandler(&buf, nil))
	f.svc.warns = lograte.New[string](func() time.Time { return claimTime }) // no time passes
	const orders = 100
	for range orders {
		in := baseInput()
		in.RequestID = uuid.NewString()
		if res, err := f.svc.CreateOrder(context.Background(), testTenant, in); err != nil || res.Outcome != OutcomeNew {
			t.Fatalf("CreateOrder with the broker down = %+v, %v; want the new order", res, err)
		}
	}
	f.svc.Wait()
	if n := len(f.led.AllEntries()); n != orders {
		t.Errorf("%d due entries, want %d: every undelivered event keeps its entry", n, orders)
	}
	lines := strings.Count(buf.String(), "order event not delivered yet")
	if lines != lograte.Burst {
		t.Errorf("%d log lines for %d undelivered events, want the burst (%d)", lines, orders, lograte.Burst)
	}
}

// Settle says what it made of a request, so that the reconciler need not
// read it from an error's reason: a request whose work failed is
// Unfinished; a failpoint armed around the publication is an unfinished
// attempt as well (not the broker's refusal: the reconciler always counted
// it so); only the broker's refusal is EventOwed.
func TestSettleSaysWhatItMadeOfTheRequest(t *testing.T) {
	f, _ := deliveryFixture(t)
	rec := recordFor(t, f.svc, baseInput(), claimTime, ledger.Pending)
	f.led.Put(rec)
	f.proj.Arm(projection.StmtGetOrder, cassandra.FaultUnavailable, 1)
	if settled, err := f.svc.Settle(context.Background(), rec); settled != ledger.Unfinished || fault.KindOf(err) != fault.Unavailable {
		t.Errorf("Settle whose order read fails = %s, %v; want unfinished, UNAVAILABLE", settled, err)
	}

	for _, point := range []string{"before-publish", "after-publish"} {
		fps, err := failpoint.ParseForTest(point + "=error*1")
		if err != nil {
			t.Fatal(err)
		}
		g := newFixture(t, Config{Publisher: outboxtest.NewMemory(), ReplayCacheSize: -1}, fps)
		rec := recordFor(t, g.svc, baseInput(), claimTime, ledger.Pending)
		g.led.Put(rec)
		settled, err := g.svc.Settle(context.Background(), rec)
		if settled != ledger.Unfinished || fault.ReasonOf(err) != fault.ReasonClusterUnavailable {
			t.Errorf("Settle with %s armed = %s, %v; want unfinished, CLUSTER_UNAVAILABLE", point, settled, err)
		}
		if settled, err := g.svc.Settle(context.Background(), rec); settled != ledger.Finished || err != nil {
			t.Errorf("Settle once %s is spent = %s, %v; want finished", point, settled, err)
		}
	}
}

// Settle (the reconciler's step) whose read of the order row fails writes
// nothing and delivers nothing: the request id may already have an order,
// here one with another command, and taking the failed read for "no order"
// would overwrite it. Once the read answers, the claim is withdrawn and the
// order stays as it was.
func TestSettleWhoseOrderRowReadFailsWritesNothing(t *testing.T) {
	f, pub := deliveryFixture(t)
	rec := recordFor(t, f.svc, baseInput(), claimTime, ledger.Pending)
	f.led.Put(rec)
	_, otherCmd, err := order.Canonicalize(otherInput())
	if err != nil {
		t.Fatal(err)
	}
	first := order.New(testTenant, rec.RequestID, otherCmd, claimTime.Add(-time.Hour).Truncate(time.Millisecond))
	if err := f.proj.Write(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	f.proj.Arm(projection.StmtGetOrder, cassandra.FaultUnavailable, 1)

	wantFault(t, settleErr(f.svc, rec), fault.Unavailable)
	if n := f.proj.Creations(); n != 1 {
		t.Errorf("projection writes = %d, want only the first order's", n)
	}
	if n := len(pub.Records()); n != 0 {
		t.Errorf("events published = %d, want 0", n)
	}
	if now := onlyRecord(t, f.led); !reflect.DeepEqual(now, rec) {
		t.Errorf("claim changed:\n  %+v\nwas\n  %+v", now, rec)
	}

	err = settleErr(f.svc, rec)
	if fault.ReasonOf(err) != fault.ReasonRequestIDReused {
		t.Fatalf("Settle once the read answers = %v, want REQUEST_ID_REUSED", err)
	}
	if got, err := f.proj.Order(context.Background(), testTenant, rec.EntityID); err != nil || !reflect.DeepEqual(got, first) {
		t.Errorf("order row = %+v, %v; want the first order %+v", got, err, first)
	}
	if _, ok := f.led.Record(rec.Key); ok {
		t.Error("the conflicting claim is still in the ledger, want it withdrawn")
	}
}

// The ledger failing after the answer, or under a failed attempt, costs
// the client nothing it can see, and what was left undone is named in a
// WARN line and left as state the reconciler works from: a release that
// fails keeps the due entry; a failed attempt the ledger cannot note keeps
// the request PENDING with its attempts as they were.
func TestLedgerWritesThatFailAroundTheAnswerAreLoggedAndLeaveState(t *testing.T) {
	failing := func(f *fixture, stmt cassandra.Stmt) *bytes.Buffer {
		var buf bytes.Buffer
		f.svc.log = slog.New(slog.NewJSONHandler(&buf, nil))
		f.led.SetIntercept(func(st ledgertest.Statement) cassandra.Fault {
			if st.Name == stmt {
				return cassandra.FaultUnavailable
			}
			return 0
		})
		return &buf
	}
	t.Run("release of the due entry", func(t *testing.T) {
		f := newFixture(t, Config{}, nil)
		log := failing(f, ledger.StmtRemove)
		res, err := f.svc.CreateOrder(context.Background(), testTenant, baseInput())
		if err != nil || res.Outcome != OutcomeNew {
			t.Fatalf("CreateOrder = %+v, %v; want the new order", res, err)
		}
		f.svc.Wait()
		if n := len(f.led.Entries(onlyRecord(t, f.led).Key)); n != 1 {
			t.Errorf("due entries = %d, want 1: left for the reconciler", n)
		}
		if !strings.Contains(log.String(), "could not release a settled request's due entry; the reconciler will") {
			t.Errorf("log = %s, want the release's WARN line", log)
		}
	})
	t.Run("note of a failed attempt", func(t *testing.T) {
		f := newFixture(t, Config{}, nil)
		log := failing(f, ledger.StmtAttempt)
		f.proj.FailNext(1)
		_, err := f.svc.CreateOrder(context.Background(), testTenant, baseInput())
		wantFault(t, err, fault.Unavailable)
		if rec := onlyRecord(t, f.led); rec.State != ledger.Pending || rec.Attempts != 0 {
			t.Errorf("request %s with %d attempts, want PENDING with 0", rec.State, rec.Attempts)
		}
		if !strings.Contains(log.String(), "could not record a failed attempt") {
			t.Errorf("log = %s, want the note's WARN line", log)
		}
	})
}

// Republish publishes an order's whole story again, each event exactly as
// it was first published (same id, same bytes), in version order: what a
// consumer lacks it applies, what it has it drops as a duplicate. Nothing
// is written to the database.
func TestRepublishPublishesEveryEventOfAnOrderAsFirstPublished(t *testing.T) {
	f := newChangeFixture(t, nil)
	f.change(t, f.amend(1, "second"))
	f.change(t, f.amend(2, "third"))
	first := f.pub.Records()
	if len(first) != 3 {
		t.Fatalf("published %d events for a created and twice amended order, want 3", len(first))
	}
	writes := len(f.proj.Writes())

	n, err := f.svc.Republish(context.Background(), f.current(t))
	if err != nil || n != 3 {
		t.Fatalf("Republish = %d, %v; want 3 events", n, err)
	}
	again := f.pub.Records()[len(first):]
	if len(again) != 3 {
		t.Fatalf("republished %d records, want 3", len(again))
	}
	for i, r := range again {
		if outbox.Header(r, outbox.HeaderEventID) != outbox.Header(first[i], outbox.HeaderEventID) || !bytes.Equal(r.Value, first[i].Value) {
			t.Errorf("republished event %d = %s %x, want as first published: %s %x", i,
				outbox.Header(r, outbox.HeaderEventID), r.Value, outbox.Header(first[i], outbox.HeaderEventID), first[i].Value)
		}
	}
	if n := len(f.proj.Writes()) - writes; n != 0 {
		t.Errorf("Republish wrote %d orders", n)
	}

	f.pub.SetDown(true)
	f.svc.delivery.timeout = 50 * time.Millisecond
	if n, err := f.svc.Republish(context.Background(), f.current(t)); err == nil || n != 0 {
		t.Errorf("Republish with the broker down = %d, %v; want the failure of the first event", n, err)
	}
}

// heldPublisher holds every publication until released (or its context
// ends), then acknowledges it: a broker that has stopped answering.
type heldPublisher struct {
	*outboxtest.Memory
	release chan struct{}
}

func (p heldPublisher) Publish(ctx context.Context, ev order.Event) error {
	select {
	case <-p.release:
		return p.Memory.Publish(ctx, ev)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// While a broker that stopped answering holds Config.MaxBackground
// deliveries, an order answered meanwhile starts no more: it is counted
// skipped, its entry left for the reconciler, and what runs after the
// answers stays bounded however many orders come.
func TestBackgroundDeliveriesAreBounded(t *testing.T) {
	pub := heldPublisher{Memory: outboxtest.NewMemory(), release: make(chan struct{})}
	obs := &fakeObserver{}
	f := newFixture(t, Config{Publisher: pub, PublishTimeout: time.Minute, ReplayCacheSize: -1, MaxBackground: 3, Observer: obs}, nil)
	var ids []uuid.UUID
	for range 5 {
		in := baseInput()
		in.RequestID = uuid.NewString()
		res, err := f.svc.CreateOrder(context.Background(), testTenant, in)
		if err != nil || res.Outcome != OutcomeNew {
			t.Fatalf("CreateOrder = %+v, %v", res, err)
		}
		ids = append(ids, res.Order.RequestID)
	}
	obs.mu.Lock()
	skipped := obs.skipped
	obs.mu.Unlock()
	if skipped != 2 {
		t.Errorf("deliveries skipped = %d, want 2 (5 orders, 3 in flight at most)", skipped)
	}
	close(pub.release)
	f.svc.Wait()
	if n := len(pub.Records()); n != 3 {
		t.Errorf("events published after the answers = %d, want the 3 started", n)
	}
	owed := 0
	for _, id := range ids {
		if len(f.led.Entries(ledger.Key{Tenant: testTenant, Operation: order.OperationCreate, RequestID: id})) > 0 {
			owed++
		}
	}
	if owed != 2 {
		t.Errorf("orders whose due entry is left for the reconciler = %d, want the 2 skipped", owed)
	}
}
