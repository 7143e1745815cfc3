package workflow

import (
	"context"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/platform/failpoint"
	"github.com/atlasmart/orderd/ledger"
	"github.com/atlasmart/orderd/ledger/ledgertest"
	"github.com/atlasmart/orderd/projection"
	"github.com/atlasmart/orderd/projection/projectiontest"
)

const testRequestID = "17000000-0000-0000-0000-000000000500"

// claimTime is 01:30:00.123456789 on 1 October in UTC+2, i.e. 30 September
// in UTC: the order's month must be taken in UTC, from the claim time
// truncated to milliseconds.
var claimTime = time.Date(2026, 10, 1, 1, 30, 0, 123456789, time.FixedZone("UTC+2", 2*3600))

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

type fixture struct {
	svc   *Service
	led   *ledgertest.Memory
	proj  *projectiontest.Memory
	clock *fakeClock
}

// useLedger puts l in front of the fixture's ledger: for the requests and
// for the delivery component's releases alike.
func (f *fixture) useLedger(l ledger.Store) {
	f.svc.ledger = l
	f.svc.delivery.ledger = l
}

// newFixture builds a Service on fresh fakes with a fake clock at claimTime
// (the ledger's clock too).
func newFixture(t *testing.T, cfg Config, fps *failpoint.Set) *fixture {
	t.Helper()
	clock := &fakeClock{t: claimTime}
	f := &fixture{led: ledgertest.NewMemory(ledgertest.Config{Now: clock.Now}), proj: projectiontest.NewMemory(), clock: clock}
	f.svc = New(cfg, f.led, f.proj, fps, discardLogger())
	f.svc.now = f.clock.Now
	return f
}

// baseInput is a valid command: total 77.70 EUR over two lines, given in an
// order that is not the canonical one.
func baseInput() order.Input {
	return order.Input{
		RequestID:  testRequestID,
		CustomerID: "cust-42",
		Total:      "77.70",
		Currency:   "eur",
		Lines: []order.LineInput{
			{SKU: "sku-b", Quantity: 1, UnitPrice: "7.7"},
			{SKU: "sku-a", Quantity: 2, UnitPrice: "35"},
		},
	}
}

// otherInput is baseInput's request id with another command: sku-a only.
func otherInput() order.Input {
	in := baseInput()
	in.Total, in.Lines = "70.00", in.Lines[1:]
	return in
}

// sameInputOtherSpelling is baseInput written differently but canonically
// equal: amounts "77.7" and "7.70", upper-case id and currency, lines reversed.
func sameInputOtherSpelling() order.Input {
	return order.Input{
		RequestID:  strings.ToUpper(testRequestID),
		CustomerID: "cust-42",
		Total:      "77.7",
		Currency:   "EUR",
		Lines: []order.LineInput{
			{SKU: "sku-a", Quantity: 2, UnitPrice: "35.00"},
			{SKU: "sku-b", Quantity: 1, UnitPrice: "7.70"},
		},
	}
}

// recordFor builds the ledger row CreateOrder would claim for in.
func recordFor(t *testing.T, svc *Service, in order.Input, createdAt time.Time, state ledger.State) ledger.Record {
	t.Helper()
	id, cmd, err := order.Canonicalize(in)
	if err != nil {
		t.Fatalf("Canonicalize: %v", err)
	}
	key := ledger.Key{Tenant: testTenant, Operation: order.OperationCreate, RequestID: id}
	return ledger.Record{
		Key:         key,
		EntityID:    order.ID(key.Tenant, id),
		Fingerprint: cmd.Fingerprint(),
		Command:     cmd.Encode(),
		State:       state,
		CreatedAt:   createdAt.UTC().Truncate(time.Millisecond),
		ClaimToken:  uuid.New(),
	}
}

// testTenant is the verified tenant every test caller acts for.
const testTenant = "default"

func testKey(t *testing.T) ledger.Key {
	t.Helper()
	return ledger.Key{Tenant: testTenant, Operation: order.OperationCreate, RequestID: uuid.MustParse(testRequestID)}
}

// onlyRecord returns the single record of the ledger.
// requestView is the only request as its client sees it (Service.Request):
// COMPLETE with its order once the order is recorded.
func requestView(t *testing.T, f *fixture) ledger.Record {
	t.Helper()
	rec := onlyRecord(t, f.led)
	view, err := f.svc.Request(context.Background(), testTenant, rec.Operation, rec.RequestID)
	if err != nil {
		t.Fatalf("Request(%s): %v", rec.RequestID, err)
	}
	return view
}

func onlyRecord(t *testing.T, led *ledgertest.Memory) ledger.Record {
	t.Helper()
	all := led.Records()
	if len(all) != 1 {
		t.Fatalf("ledger holds %d records, want 1: %+v", len(all), all)
	}
	return all[0]
}

// wantFault asserts err is a *fault.Error of kind k and returns it.
func wantFault(t *testing.T, err error, k fault.Kind) *fault.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("error = nil, want a %s fault", k)
	}
	fe, ok := fault.As(err)
	if !ok {
		t.Fatalf("error %v (%T) is not a *fault.Error; want kind %s", err, err, k)
	}
	if fe.Kind != k {
		t.Fatalf("error kind = %s (%v), want %s", fe.Kind, err, k)
	}
	return fe
}

func decodeOutcome(t *testing.T, rec ledger.Record) order.Order {
	t.Helper()
	o, err := order.DecodeOutcome(rec.Outcome)
	if err != nil {
		t.Fatalf("recorded outcome %q: %v", rec.Outcome, err)
	}
	return o
}

func TestCreateOrderAcceptOnce(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	res, err := f.svc.CreateOrder(context.Background(), testTenant, baseInput())
	if err != nil {
		t.Fatalf("CreateOrder: %v", err)
	}
	if res.Replayed {
		t.Error("Replayed = true on the first attempt")
	}

	reqID := uuid.MustParse(testRequestID)
	wantCreated := time.Date(2026, 9, 30, 23, 30, 0, 123000000, time.UTC)
	want := order.Order{
		ID:         order.ID("default", reqID),
		Tenant:     testTenant,
		CustomerID: "cust-42",
		Month:      "2026-09-01",
		Status:     order.StatusCreated,
		Total:      "77.70",
		Currency:   "EUR",
		RequestID:  reqID,
		CreatedAt:  wantCreated,
		Lines: []order.Line{
			{SKU: "sku-a", Quantity: 2, UnitPrice: "35.00"},
			{SKU: "sku-b", Quantity: 1, UnitPrice: "7.70"},
		},
		Version:   1,
		UpdatedAt: wantCreated,
	}
	if !res.Order.CreatedAt.Equal(wantCreated) {
		t.Errorf("CreatedAt = %s, want %s", res.Order.CreatedAt, wantCreated)
	}
	if !reflect.DeepEqual(res.Order, want) {
		t.Errorf("order =\n  %+v\nwant\n  %+v", res.Order, want)
	}

	if raw := onlyRecord(t, f.led); raw.State != ledger.Pending || raw.Outcome != nil {
		t.Errorf("ledger row %s with outcome %q: want the claim left PENDING, the outcome recorded as the order", raw.State, raw.Outcome)
	}
	rec := requestView(t, f)
	if rec.Key != testKey(t) {
		t.Errorf("record key = %+v, want %+v", rec.Key, testKey(t))
	}
	if rec.State != ledger.Complete {
		t.Errorf("record state = %s, want COMPLETE", rec.State)
	}
	if rec.Attempts != 0 || rec.LastError != "" {
		t.Errorf("record attempts = %d, last_error = %q; want 0 (no attempt failed) and empty", rec.Attempts, rec.LastError)
	}
	if rec.EntityID != want.ID {
		t.Errorf("record entity id = %s, want %s", rec.EntityID, want.ID)
	}
	if !rec.CreatedAt.Equal(wantCreated) || !rec.CompletedAt.Equal(wantCreated) {
		t.Errorf("record created_at = %s, completed_at = %s; want both %s", rec.CreatedAt, rec.CompletedAt, wantCreated)
	}
	if got := decodeOutcome(t, rec); !reflect.DeepEqual(got, res.Order) {
		t.Errorf("recorded outcome =\n  %+v\nreturned order\n  %+v", got, res.Order)
	}
	_, cmd, _ := order.Canonicalize(baseInput())
	if rec.Fingerprint != cmd.Fingerprint() {
		t.Errorf("record fingerprint = %s, want %s", rec.Fingerprint, cmd.Fingerprint())
	}
	if stored, err := order.DecodeCommand(rec.Command); err != nil || !reflect.DeepEqual(stored, cmd) {
		t.Errorf("stored command = %+v (%v), want %+v", stored, err, cmd)
	}

	writes := f.proj.Writes()
	if len(writes) != 1 {
		t.Fatalf("projection writes = %d, want 1", len(writes))
	}
	if !reflect.DeepEqual(writes[0], res.Order) {
		t.Errorf("projected order =\n  %+v\nreturned order\n  %+v", writes[0], res.Order)
	}
}

func TestCreateOrderSameRequestIsReplayed(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	first, err := f.svc.CreateOrder(context.Background(), testTenant, baseInput())
	if err != nil {
		t.Fatalf("first CreateOrder: %v", err)
	}
	before := onlyRecord(t, f.led)

	f.clock.Advance(time.Hour) // a replay must not take anything from the clock
	for _, in := range []order.Input{baseInput(), sameInputOtherSpelling()} {
		again, err := f.svc.CreateOrder(context.Background(), testTenant, in)
		if err != nil {
			t.Fatalf("retry CreateOrder(%+v): %v", in, err)
		}
		if !again.Replayed {
			t.Errorf("retry (%s %s): Replayed = false, want true", in.Total, in.Currency)
		}
		if !reflect.DeepEqual(again.Order, first.Order) {
			t.Errorf("retry order =\n  %+v\nfirst order\n  %+v", again.Order, first.Order)
		}
	}
	if got := f.proj.Creations(); got != 1 {
		t.Errorf("creations sent = %d, want 1 (replays must not write)", got)
	}
	if after := onlyRecord(t, f.led); !reflect.DeepEqual(after, before) {
		t.Errorf("record changed by a replay:\n  %+v\nwas\n  %+v", after, before)
	}
}

func TestCreateOrderRequestIDReused(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	if _, err := f.svc.CreateOrder(context.Background(), testTenant, baseInput()); err != nil {
		t.Fatalf("first CreateOrder: %v", err)
	}
	before := onlyRecord(t, f.led)

	in := baseInput()
	in.Total = "77.71"
	in.Lines = nil
	res, err := f.svc.CreateOrder(context.Background(), testTenant, in)
	fe := wantFault(t, err, fault.Conflict)
	if fe.Reason != "REQUEST_ID_REUSED" {
		t.Errorf("reason = %q, want REQUEST_ID_REUSED", fe.Reason)
	}
	if !reflect.DeepEqual(res, Result{}) {
		t.Errorf("result = %+v, want zero", res)
	}
	if after := onlyRecord(t, f.led); !reflect.DeepEqual(after, before) {
		t.Errorf("record changed by a conflicting request:\n  %+v\nwas\n  %+v", after, before)
	}
	if got := f.proj.Creations(); got != 1 {
		t.Errorf("creations sent = %d, want 1 (the first request only)", got)
	}
}

func TestCreateOrderInvalidInput(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	in := baseInput()
	in.RequestID = "not-a-uuid"
	in.Total = "-1"
	_, err := f.svc.CreateOrder(context.Background(), testTenant, in)
	fe := wantFault(t, err, fault.Invalid)
	fields := map[string]bool{}
	for _, v := range fe.Violations {
		fields[v.Field] = true
	}
	if !fields["request_id"] || !fields["total"] {
		t.Errorf("violations %+v: want request_id and total", fe.Violations)
	}
	if n := len(f.led.Records()); n != 0 {
		t.Errorf("ledger holds %d records, want 0", n)
	}
	if st := f.led.Statements(""); len(st) != 0 {
		t.Errorf("ledger statements sent for invalid input: %+v, want none (no claim)", st)
	}
	if got := f.proj.Creations(); got != 0 {
		t.Errorf("creations sent = %d, want 0", got)
	}
}

func TestCreateOrderProjectionFailsOnceThenRetryCompletes(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	f.proj.FailNext(1)

	_, err := f.svc.CreateOrder(context.Background(), testTenant, baseInput())
	wantFault(t, err, fault.Unavailable)

	rec := onlyRecord(t, f.led)
	if rec.State != ledger.Pending {
		t.Fatalf("record state = %s after a failed projection, want PENDING", rec.State)
	}
	_, cmd, _ := order.Canonicalize(baseInput())
	if stored, err := order.DecodeCommand(rec.Command); err != nil || !reflect.DeepEqual(stored, cmd) {
		t.Errorf("stored command = %+v (%v), want %+v", stored, err, cmd)
	}
	if rec.Attempts != 1 {
		t.Errorf("attempts = %d, want 1 (the failed attempt)", rec.Attempts)
	}
	if rec.LastError != string(fault.ReasonClusterUnavailable) {
		t.Errorf("last_error = %q, want the failure's stable reason %s", rec.LastError, fault.ReasonClusterUnavailable)
	}
	if rec.Outcome != nil || !rec.CompletedAt.IsZero() {
		t.Errorf("pending record has outcome %q / completed_at %s", rec.Outcome, rec.CompletedAt)
	}

	// The retry comes after the takeover age: it finishes the request.
	f.clock.Advance(f.svc.cfg.TakeoverAfter + time.Millisecond)
	res, err := f.svc.CreateOrder(context.Background(), testTenant, sameInputOtherSpelling())
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if !res.Replayed {
		t.Error("retry: Replayed = false, want true (the request was claimed earlier)")
	}
	rec = requestView(t, f)
	if rec.State != ledger.Complete {
		t.Fatalf("request state = %s after the retry, want COMPLETE", rec.State)
	}
	if got := decodeOutcome(t, rec); !reflect.DeepEqual(got, res.Order) {
		t.Errorf("recorded outcome =\n  %+v\nreturned\n  %+v", got, res.Order)
	}
	if res.Order.Month != "2026-09-01" || !res.Order.CreatedAt.Equal(claimTime.Truncate(time.Millisecond)) {
		t.Errorf("order month/created_at = %s/%s: want the claim time, not the retry's", res.Order.Month, res.Order.CreatedAt)
	}

	if got := f.proj.Creations(); got != 2 {
		t.Errorf("creations sent = %d, want 2 (one failed, one good)", got)
	}
	writes := f.proj.Writes()
	if len(writes) != 1 || !reflect.DeepEqual(writes[0], res.Order) {
		t.Errorf("projected orders = %+v, want just %+v", writes, res.Order)
	}
}

// A takeover (a retry of a request whose first attempt stopped after its
// claim) that fails to write the order answers the failure, notes the
// attempt on the ledger and leaves the request PENDING; the next retry
// takes over again and creates the one order.
func TestTakeoverThatFailsIsNotedAndTheNextCompletesIt(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	seeded := recordFor(t, f.svc, baseInput(), claimTime, ledger.Pending)
	f.led.Put(seeded)
	f.clock.Advance(f.svc.cfg.TakeoverAfter + time.Millisecond)
	f.proj.Arm(projection.StmtOrdersByID, cassandra.FaultUnavailable, 1) // the recorded outcome's write

	_, err := f.svc.CreateOrder(context.Background(), testTenant, sameInputOtherSpelling())
	wantFault(t, err, fault.Unavailable)
	rec := onlyRecord(t, f.led)
	if rec.State != ledger.Pending || rec.Attempts != 1 || rec.LastError != string(fault.ReasonClusterUnavailable) {
		t.Fatalf("after the failed takeover: %s, attempts %d, last_error %q; want PENDING, 1, %s",
			rec.State, rec.Attempts, rec.LastError, fault.ReasonClusterUnavailable)
	}
	if rec.ClaimToken != seeded.ClaimToken {
		t.Errorf("claim token %s, want the first attempt's %s", rec.ClaimToken, seeded.ClaimToken)
	}
	if view := requestView(t, f); view.State != ledger.Pending {
		t.Fatalf("request seen as %s, want PENDING: its order is not recorded", view.State)
	}

	res, err := f.svc.CreateOrder(context.Background(), testTenant, baseInput())
	if err != nil || res.Outcome != OutcomeTakeover {
		t.Fatalf("next retry = %+v, %v; want a takeover", res, err)
	}
	if view := requestView(t, f); view.State != ledger.Complete || !reflect.DeepEqual(decodeOutcome(t, view), res.Order) {
		t.Errorf("request = %s %+v, want COMPLETE with the answer's order %+v", view.State, view.Outcome, res.Order)
	}
	if writes := f.proj.Writes(); len(writes) != 1 || !reflect.DeepEqual(writes[0], res.Order) {
		t.Errorf("orders recorded = %+v, want just %+v", writes, res.Order)
	}
}

// A failure after the order is recorded (every row written, the due entry
// not yet released) leaves the request PENDING in the ledger; a retry is
// answered from the recorded order without writing again, and a finisher
// (the reconciler) rewrites exactly the same order.
func TestFailureAfterTheOrderIsRecordedIsAnsweredFromIt(t *testing.T) {
	fps, err := failpoint.ParseForTest("before-release=error")
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, Config{}, fps)
	_, err = f.svc.CreateOrder(context.Background(), testTenant, baseInput())
	wantFault(t, err, fault.Unavailable)
	rec := onlyRecord(t, f.led)
	if rec.State != ledger.Pending || rec.Attempts != 1 || rec.LastError != string(fault.ReasonOf(err)) {
		t.Errorf("record after the failure = %s, attempts %d, last_error %q; want PENDING, 1, the failure's reason %s",
			rec.State, rec.Attempts, rec.LastError, fault.ReasonOf(err))
	}
	if len(f.led.Entries(rec.Key)) != 1 {
		t.Errorf("due entries = %d, want the claim's, kept for the reconciler", len(f.led.Entries(rec.Key)))
	}

	res, err := f.svc.CreateOrder(context.Background(), testTenant, baseInput())
	if err != nil || !res.Replayed || res.Outcome != OutcomeReplayed {
		t.Fatalf("retry: %+v, %v; want a replay of the recorded order", res, err)
	}
	writes := f.proj.Writes()
	if len(writes) != 1 || !reflect.DeepEqual(writes[0], res.Order) {
		t.Fatalf("projected %+v, answered %+v; want the one recorded order", writes, res.Order)
	}
	if view := requestView(t, f); view.State != ledger.Complete {
		t.Errorf("request state = %s, want COMPLETE", view.State)
	}

	f.svc.failpoints = nil
	o, err := f.svc.Finish(context.Background(), onlyRecord(t, f.led))
	if err != nil || !reflect.DeepEqual(o, res.Order) {
		t.Fatalf("Finish = %+v, %v; want the recorded order", o, err)
	}
	if writes := f.proj.Writes(); len(writes) != 2 || !reflect.DeepEqual(writes[1], res.Order) {
		t.Errorf("Finish projected %+v, want the same order again", writes)
	}
	f.svc.Wait()
	if n := len(f.led.Entries(rec.Key)); n != 1 {
		t.Errorf("due entries after Finish = %d, want 1 (Finish leaves the entry to its caller)", n)
	}
}

func TestCreateOrderAfterClaimFailureLeavesPendingForTakeover(t *testing.T) {
	fps, err := failpoint.ParseForTest("after-claim=error")
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, Config{}, fps)
	_, err = f.svc.CreateOrder(context.Background(), testTenant, baseInput())
	wantFault(t, err, fault.Unavailable)
	if rec := onlyRecord(t, f.led); rec.State != ledger.Pending || rec.Attempts != 0 {
		t.Errorf("record = %s, attempts %d; want PENDING, 0 (the claim's attempt is not noted as failed)", rec.State, rec.Attempts)
	}
	if got := f.proj.Creations(); got != 0 {
		t.Errorf("creations sent = %d, want 0", got)
	}

	f.clock.Advance(2 * time.Second)
	res, err := f.svc.CreateOrder(context.Background(), testTenant, baseInput())
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if !res.Replayed || requestView(t, f).State != ledger.Complete || len(f.proj.Writes()) != 1 {
		t.Errorf("retry: replayed %v, state %s, writes %d; want true, COMPLETE, 1",
			res.Replayed, requestView(t, f).State, len(f.proj.Writes()))
	}
}

// The claim not applied because an earlier attempt with another command
// holds it, before that attempt recorded its order: REQUEST_ID_REUSED at
// once (no waiting, no takeover, however old the claim), nothing written,
// the earlier claim unchanged and this attempt's due entry removed.
func TestConflictingCommandWhileTheFirstIsPendingIsRejected(t *testing.T) {
	for _, age := range []time.Duration{time.Second, time.Hour} { // young; past TakeoverAfter
		t.Run(age.String(), func(t *testing.T) {
			f := newFixture(t, Config{}, nil)
			seeded := recordFor(t, f.svc, baseInput(), claimTime.Add(-age), ledger.Pending)
			f.led.Put(seeded)
			other := baseInput()
			other.Total = "1.00"
			other.Lines = nil

			_, err := f.svc.CreateOrder(context.Background(), testTenant, other)

			if fe := wantFault(t, err, fault.Conflict); fe.Reason != fault.ReasonRequestIDReused {
				t.Fatalf("reason %s, want REQUEST_ID_REUSED", fe.Reason)
			}
			if rec := onlyRecord(t, f.led); !reflect.DeepEqual(rec, seeded) {
				t.Errorf("record changed:\n  %+v\nwas\n  %+v", rec, seeded)
			}
			if got := f.proj.Creations(); got != 0 {
				t.Errorf("projection writes = %d, want 0", got)
			}
			if es := f.led.AllEntries(); len(es) != 0 {
				t.Errorf("due entries left: %+v, want none (the seeded claim has none; the rejected attempt's is removed)", es)
			}
		})
	}
}

func TestDuplicateOfYoungPendingIsInProgress(t *testing.T) {
	// Real clock: the wait is bounded by the context's deadline.
	f := newFixture(t, Config{}, nil)
	f.svc.now = time.Now
	seeded := recordFor(t, f.svc, baseInput(), time.Now(), ledger.Pending)
	f.led.Put(seeded)

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	res, err := f.svc.CreateOrder(ctx, testTenant, baseInput())
	elapsed := time.Since(start)
	fe := wantFault(t, err, fault.InProgress)
	if fe.Reason != "REQUEST_IN_PROGRESS" {
		t.Errorf("reason = %q, want REQUEST_IN_PROGRESS", fe.Reason)
	}
	if fe.RetryAfter <= 0 {
		t.Errorf("RetryAfter = %s, want > 0", fe.RetryAfter)
	}
	if elapsed >= 300*time.Millisecond {
		t.Errorf("answered after %s, past the caller's deadline", elapsed)
	}
	if res.Replayed || !reflect.DeepEqual(res.Order, order.Order{}) {
		t.Errorf("result = %+v, want zero", res)
	}
	if got := f.proj.Creations(); got != 0 {
		t.Errorf("creations sent = %d, want 0", got)
	}
	if rec := onlyRecord(t, f.led); !reflect.DeepEqual(rec, seeded) {
		t.Errorf("record changed:\n  %+v\nwas\n  %+v", rec, seeded)
	}
}

// A duplicate whose client goes away while it waits (its context
// cancelled, no deadline) stops waiting at once: REQUEST_IN_PROGRESS with a
// retry hint, nothing written, no failed attempt noted.
func TestDuplicateWhoseClientGoesAwayStopsWaiting(t *testing.T) {
	f := newFixture(t, Config{TakeoverAfter: time.Minute, MaxWait: time.Minute, PollInterval: 50 * time.Millisecond}, nil)
	f.svc.now = time.Now
	seeded := recordFor(t, f.svc, baseInput(), time.Now(), ledger.Pending)
	f.led.Put(seeded)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(20*time.Millisecond, cancel)
	start := time.Now()
	_, err := f.svc.CreateOrder(ctx, testTenant, baseInput())
	elapsed := time.Since(start)
	fe := wantFault(t, err, fault.InProgress)
	if fe.Reason != fault.ReasonRequestInProgress || fe.RetryAfter <= 0 {
		t.Errorf("fault = %s (retry after %s), want REQUEST_IN_PROGRESS with a retry hint", fe.Reason, fe.RetryAfter)
	}
	if elapsed >= 10*time.Second {
		t.Errorf("answered after %s, want soon after the client went away", elapsed)
	}
	if got := f.proj.Creations(); got != 0 {
		t.Errorf("creations sent = %d, want 0", got)
	}
	if rec := onlyRecord(t, f.led); !reflect.DeepEqual(rec, seeded) {
		t.Errorf("record changed:\n  %+v\nwas\n  %+v", rec, seeded)
	}
}

// quorumMisses is a ledger whose LOCAL_QUORUM reads do not see the claim
// yet, as when its Paxos commit ran at ANY and has not landed on a quorum
// (ledger.Config.ClaimCommitAny).
type quorumMisses struct {
	*ledgertest.Memory
	peeks atomic.Int64
}

func (q *quorumMisses) Peek(context.Context, ledger.Key) (ledger.Record, error) {
	q.peeks.Add(1)
	return ledger.Record{}, ledger.ErrNotFound
}

// A duplicate waiting on a claim its quorum reads cannot see yet confirms
// "not found" linearizably and goes on waiting: REQUEST_IN_PROGRESS, never
// REQUEST_NOT_FOUND for a request that exists.
func TestDuplicateWaitingOnAClaimAQuorumReadMisses(t *testing.T) {
	f := newFixture(t, Config{TakeoverAfter: time.Minute, PollInterval: 5 * time.Millisecond, MaxWait: 200 * time.Millisecond}, nil)
	f.svc.now = time.Now
	misses := &quorumMisses{Memory: f.led}
	f.useLedger(misses)
	seeded := recordFor(t, f.svc, baseInput(), time.Now(), ledger.Pending)
	f.led.Put(seeded)

	_, err := f.svc.CreateOrder(context.Background(), testTenant, baseInput()) // waits up to MaxWait

	if fe := wantFault(t, err, fault.InProgress); fe.Reason != fault.ReasonRequestInProgress {
		t.Fatalf("reason %s, want REQUEST_IN_PROGRESS", fe.Reason)
	}
	if misses.peeks.Load() == 0 {
		t.Fatal("the duplicate never polled the ledger: the test shows nothing")
	}
	if rec := onlyRecord(t, f.led); !reflect.DeepEqual(rec, seeded) {
		t.Errorf("record changed:\n  %+v\nwas\n  %+v", rec, seeded)
	}
}

func TestDuplicateWaitsUpToMaxWaitThenInProgress(t *testing.T) {
	f := newFixture(t, Config{TakeoverAfter: time.Minute, MaxWait: 150 * time.Millisecond, PollInterval: 10 * time.Millisecond}, nil)
	f.svc.now = time.Now
	seeded := recordFor(t, f.svc, baseInput(), time.Now(), ledger.Pending)
	f.led.Put(seeded)

	start := time.Now()
	_, err := f.svc.CreateOrder(context.Background(), testTenant, baseInput())
	elapsed := time.Since(start)
	fe := wantFault(t, err, fault.InProgress)
	if fe.Reason != "REQUEST_IN_PROGRESS" || fe.RetryAfter != time.Minute {
		t.Errorf("reason %q, retry after %s; want REQUEST_IN_PROGRESS, 1m", fe.Reason, fe.RetryAfter)
	}
	if !slices.ContainsFunc(f.led.Statements(ledger.StmtGet), func(st ledgertest.Statement) bool { return !st.Serial }) {
		t.Error("the duplicate never re-read the request while waiting (no Peek)")
	}
	if elapsed > 2*time.Second {
		t.Errorf("waited %s with MaxWait 150ms", elapsed)
	}
	if got := f.proj.Creations(); got != 0 {
		t.Errorf("creations sent = %d, want 0", got)
	}
}

func TestDuplicateReturnsOrderCompletedWhileWaiting(t *testing.T) {
	f := newFixture(t, Config{TakeoverAfter: time.Minute, PollInterval: 5 * time.Millisecond}, nil)
	f.svc.now = time.Now
	seeded := recordFor(t, f.svc, baseInput(), time.Now(), ledger.Pending)
	f.led.Put(seeded)

	// The attempt that claimed the request finishes it once the duplicate
	// has started polling.
	peeked := make(chan struct{})
	var once sync.Once
	f.led.SetIntercept(func(st ledgertest.Statement) cassandra.Fault {
		if st.Name == ledger.StmtGet { // the duplicate's first Peek
			once.Do(func() { close(peeked) })
		}
		return 0
	})
	type finished struct {
		o   order.Order
		err error
	}
	done := make(chan finished, 1)
	go func() {
		<-peeked
		o, err := f.svc.Finish(context.Background(), seeded)
		done <- finished{o, err}
	}()

	// No deadline: the wait is bounded by MaxWait (5 s).
	res, err := f.svc.CreateOrder(context.Background(), testTenant, baseInput())
	if err != nil {
		t.Fatalf("duplicate: %v", err)
	}
	orig := <-done
	if orig.err != nil {
		t.Fatalf("original attempt's Finish: %v", orig.err)
	}
	if !res.Replayed {
		t.Error("Replayed = false, want true")
	}
	rec := requestView(t, f)
	if rec.State != ledger.Complete {
		t.Fatalf("record state = %s, want COMPLETE", rec.State)
	}
	recorded := decodeOutcome(t, rec)
	if !reflect.DeepEqual(res.Order, recorded) || !reflect.DeepEqual(orig.o, recorded) {
		t.Errorf("duplicate got %+v, original got %+v, recorded %+v", res.Order, orig.o, recorded)
	}
	if got := f.proj.Creations(); got != 1 {
		t.Errorf("creations sent = %d, want 1 (the original attempt only)", got)
	}
}

func TestConcurrentIdenticalCreateOrder(t *testing.T) {
	f := newFixture(t, Config{PollInterval: 5 * time.Millisecond}, nil)
	f.svc.now = time.Now

	const n = 32
	results := make([]Result, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := baseInput()
			if i%2 == 1 {
				in = sameInputOtherSpelling()
			}
			<-start
			results[i], errs[i] = f.svc.CreateOrder(context.Background(), testTenant, in)
		}()
	}
	close(start)
	wg.Wait()

	fresh := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		if !results[i].Replayed {
			fresh++
		}
		if !reflect.DeepEqual(results[i].Order, results[0].Order) {
			t.Errorf("call %d order =\n  %+v\ncall 0 order\n  %+v", i, results[i].Order, results[0].Order)
		}
	}
	if fresh != 1 {
		t.Errorf("%d calls answered Replayed=false, want exactly 1", fresh)
	}
	rec := requestView(t, f)
	if rec.State != ledger.Complete {
		t.Errorf("record state = %s, want COMPLETE", rec.State)
	}
	if got := decodeOutcome(t, rec); !reflect.DeepEqual(got, results[0].Order) {
		t.Errorf("recorded outcome %+v, answered %+v", got, results[0].Order)
	}
	writes := f.proj.Writes()
	if len(writes) == 0 {
		t.Fatal("no projection write")
	}
	for i, w := range writes {
		if !reflect.DeepEqual(w, results[0].Order) {
			t.Errorf("projection write %d =\n  %+v\nwant\n  %+v", i, w, results[0].Order)
		}
	}
	if len(writes) > 1 {
		t.Logf("%d projection writes (takeover happened)", len(writes))
	}
}

func TestCreateOrderClaimErrorIsReturned(t *testing.T) {
	for _, tc := range []struct {
		kind   fault.Kind
		reason fault.Reason
		arm    func(l *ledgertest.Memory)
	}{
		// The claim's entry is refused: definitely nothing written.
		{fault.Unavailable, fault.ReasonClusterUnavailable, func(l *ledgertest.Memory) {
			l.Arm(ledger.StmtEnqueue, cassandra.FaultUnavailable, 1)
		}},
		// The claim times out and no read can settle it.
		{fault.OutcomeUnknown, fault.ReasonOutcomeUnknown, func(l *ledgertest.Memory) {
			l.Arm(ledger.StmtClaim, cassandra.FaultTimeout, 1)
			l.Arm(ledger.StmtGet, cassandra.FaultUnavailable, 3)
		}},
	} {
		t.Run(tc.kind.String(), func(t *testing.T) {
			f := newFixture(t, Config{}, nil)
			tc.arm(f.led)
			res, err := f.svc.CreateOrder(context.Background(), testTenant, baseInput())
			fe := wantFault(t, err, tc.kind)
			if fe.Reason != tc.reason {
				t.Errorf("reason = %s, want the store's %s", fe.Reason, tc.reason)
			}
			if !reflect.DeepEqual(res, Result{}) {
				t.Errorf("result = %+v, want zero", res)
			}
			if got := f.proj.Creations(); got != 0 {
				t.Errorf("creations sent = %d, want 0", got)
			}
			if n := len(f.led.Records()); n != 0 {
				t.Errorf("ledger holds %d records, want 0", n)
			}
		})
	}
}

func TestCreateOrderPeekErrorWhileWaitingIsReturned(t *testing.T) {
	f := newFixture(t, Config{TakeoverAfter: time.Minute, PollInterval: time.Millisecond}, nil)
	f.svc.now = time.Now
	f.led.Put(recordFor(t, f.svc, baseInput(), time.Now(), ledger.Pending))
	f.led.Arm(ledger.StmtGet, cassandra.FaultUnavailable, 1) // the claim reads nothing: the first read is the Peek
	_, err := f.svc.CreateOrder(context.Background(), testTenant, baseInput())
	wantFault(t, err, fault.Unavailable)
	if got := f.proj.Creations(); got != 0 {
		t.Errorf("creations sent = %d, want 0", got)
	}
}

func TestFinishOnCompleteRecordReturnsOutcomeWithoutWriting(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	rec := recordFor(t, f.svc, baseInput(), claimTime, ledger.Complete)
	_, cmd, _ := order.Canonicalize(baseInput())
	recorded := order.New("default", rec.RequestID, cmd, rec.CreatedAt)
	rec.Outcome = recorded.EncodeOutcome()
	rec.CompletedAt = rec.CreatedAt.Add(time.Second)
	f.led.Put(rec)

	got, err := f.svc.Finish(context.Background(), rec)
	if err != nil {
		t.Fatalf("Finish: %v", err)
	}
	if !reflect.DeepEqual(got, decodeOutcome(t, rec)) {
		t.Errorf("Finish = %+v, want the recorded %+v", got, recorded)
	}
	if got := f.proj.Creations(); got != 0 {
		t.Errorf("creations sent = %d, want 0", got)
	}
	if n := len(f.led.Statements(ledger.StmtComplete)) + len(f.led.Statements(ledger.StmtAttempt)); n != 0 {
		t.Errorf("ledger written %d times, want 0", n)
	}
	if after := onlyRecord(t, f.led); !reflect.DeepEqual(after, rec) {
		t.Errorf("record changed:\n  %+v\nwas\n  %+v", after, rec)
	}
}

// A request a version before the one-LWT protocol completed in the ledger
// (COMPLETE with its outcome, during a rolling upgrade) whose order row
// this attempt's read did not see yet (the older version wrote it after
// that read, then completed the request before this attempt's claim): the
// duplicate answers the ledger's recorded outcome, writes nothing, and a
// duplicate with another payload is refused.
func TestDuplicateOfARequestCompletedInTheLedgerByAnOlderVersion(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	rec := recordFor(t, f.svc, baseInput(), claimTime, ledger.Complete)
	_, cmd, _ := order.Canonicalize(baseInput())
	rec.Outcome = order.New(testTenant, rec.RequestID, cmd, rec.CreatedAt).EncodeOutcome()
	rec.CompletedAt = rec.CreatedAt.Add(time.Second)
	f.led.Put(rec)
	f.clock.Advance(time.Hour) // old enough to take over, were it PENDING

	res, err := f.svc.CreateOrder(context.Background(), testTenant, sameInputOtherSpelling())
	if err != nil {
		t.Fatalf("duplicate: %v", err)
	}
	if want := (Result{Order: decodeOutcome(t, rec), Replayed: true, Outcome: OutcomeReplayed}); !reflect.DeepEqual(res, want) {
		t.Errorf("duplicate = %+v, want the recorded outcome %+v", res, want)
	}
	if _, err := f.svc.CreateOrder(context.Background(), testTenant, otherInput()); fault.ReasonOf(err) != fault.ReasonRequestIDReused {
		t.Errorf("another payload = %v, want REQUEST_ID_REUSED", err)
	}
	if got := f.proj.Creations(); got != 0 {
		t.Errorf("creations sent = %d, want 0", got)
	}
	if after := onlyRecord(t, f.led); !reflect.DeepEqual(after, rec) {
		t.Errorf("record changed:\n  %+v\nwas\n  %+v", after, rec)
	}
}

func TestDuplicateOfFailedRequest(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	rec := recordFor(t, f.svc, baseInput(), claimTime, ledger.Failed)
	rec.Attempts = 5
	rec.LastError = "driver text: 127.0.0.3 timed out" // what must never reach a client
	f.led.Put(rec)

	f.clock.Advance(time.Hour) // old enough to take over, were it PENDING
	res, err := f.svc.CreateOrder(context.Background(), testTenant, sameInputOtherSpelling())
	fe := wantFault(t, err, fault.Failed)
	if fe.Reason != "REQUEST_FAILED" {
		t.Errorf("reason = %q, want REQUEST_FAILED", fe.Reason)
	}
	if strings.Contains(err.Error(), rec.LastError) {
		t.Errorf("error %q carries the request's last_error: clients get a stable reason only", err)
	}
	if !reflect.DeepEqual(res, Result{}) {
		t.Errorf("result = %+v, want zero", res)
	}
	if got := f.proj.Creations(); got != 0 {
		t.Errorf("creations sent = %d, want 0", got)
	}
	if after := onlyRecord(t, f.led); !reflect.DeepEqual(after, rec) {
		t.Errorf("record changed:\n  %+v\nwas\n  %+v", after, rec)
	}
}

func TestRequest(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	id := uuid.MustParse(testRequestID)
	_, err := f.svc.Request(context.Background(), testTenant, order.OperationCreate, id)
	fe := wantFault(t, err, fault.NotFound)
	if fe.Reason != "REQUEST_NOT_FOUND" {
		t.Errorf("reason = %q, want REQUEST_NOT_FOUND", fe.Reason)
	}

	res, err := f.svc.CreateOrder(context.Background(), testTenant, baseInput())
	if err != nil {
		t.Fatal(err)
	}
	rec, err := f.svc.Request(context.Background(), testTenant, order.OperationCreate, id)
	if err != nil {
		t.Fatalf("Request: %v", err)
	}
	if rec.State != ledger.Complete || rec.EntityID != res.Order.ID {
		t.Errorf("Request = %s / %s, want COMPLETE / %s", rec.State, rec.EntityID, res.Order.ID)
	}
}

// GetRequest's view of a PENDING row is what its client would see, and
// reading it changes nothing: a claim whose order id already has another
// order (about to be withdrawn) stays PENDING, not COMPLETE with that
// other order; an unreadable command stays PENDING; an order row that
// cannot be read is an error, never a guess.
func TestRequestViewOfAPendingRow(t *testing.T) {
	for _, tc := range []struct {
		name string
		seed func(t *testing.T, f *fixture) ledger.Record
		// kind is the error's kind, or 0 for a PENDING view.
		kind fault.Kind
	}{
		{"nothing recorded yet", func(t *testing.T, f *fixture) ledger.Record {
			rec := recordFor(t, f.svc, baseInput(), f.clock.Now(), ledger.Pending)
			f.led.Put(rec)
			return rec
		}, 0},
		{"its order id has another order", seedLateConflictingClaim, 0},
		{"its command cannot be read", func(t *testing.T, f *fixture) ledger.Record {
			rec := recordFor(t, f.svc, baseInput(), f.clock.Now(), ledger.Pending)
			rec.Command = []byte("not a command")
			f.led.Put(rec)
			return rec
		}, 0},
		{"the order row cannot be read", func(t *testing.T, f *fixture) ledger.Record {
			rec := recordFor(t, f.svc, baseInput(), f.clock.Now(), ledger.Pending)
			f.led.Put(rec)
			f.proj.Arm(projection.StmtGetOrder, cassandra.FaultUnavailable, 1)
			return rec
		}, fault.Unavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Config{}, nil)
			rec := tc.seed(t, f)
			before, writes := f.led.Records(), len(f.proj.Writes())

			view, err := f.svc.Request(context.Background(), testTenant, order.OperationCreate, rec.RequestID)

			if tc.kind != 0 {
				wantFault(t, err, tc.kind)
			} else if err != nil || view.State != ledger.Pending || view.ClaimToken != rec.ClaimToken || len(view.Outcome) != 0 {
				t.Errorf("Request = %s (claim %s, outcome %q), %v; want the PENDING claim %s", view.State, view.ClaimToken, view.Outcome, err, rec.ClaimToken)
			}
			if after := f.led.Records(); !reflect.DeepEqual(after, before) {
				t.Errorf("reading the view changed the ledger:\n  %+v\nwas\n  %+v", after, before)
			}
			if n := len(f.proj.Writes()) - writes; n != 0 {
				t.Errorf("reading the view wrote %d orders", n)
			}
		})
	}
}

// blockedRelease holds every Release until its channel is closed.
type blockedRelease struct {
	*ledgertest.Memory
	open    chan struct{}
	started chan struct{}
}

func (b blockedRelease) Release(ctx context.Context, rec ledger.Record) error {
	close(b.started)
	<-b.open
	return b.Memory.Release(ctx, rec)
}

// A new order is answered once its order is recorded; the due entry is
// released in the background, and Wait waits for it.
func TestAnswerDoesNotWaitForTheRelease(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	led := blockedRelease{Memory: f.led, open: make(chan struct{}), started: make(chan struct{})}
	f.useLedger(led)
	res, err := f.svc.CreateOrder(context.Background(), testTenant, baseInput())
	if err != nil || res.Outcome != OutcomeNew {
		t.Fatalf("CreateOrder = %+v, %v; want a new order while the release is held", res, err)
	}
	<-led.started
	key := onlyRecord(t, f.led).Key
	if n := len(f.led.Entries(key)); n != 1 {
		t.Fatalf("due entries while the release is held = %d, want 1", n)
	}
	waited := make(chan struct{})
	go func() { f.svc.Wait(); close(waited) }()
	select {
	case <-waited:
		t.Fatal("Wait returned while a release was under way")
	case <-time.After(50 * time.Millisecond):
	}
	close(led.open)
	<-waited
	if n := len(f.led.Entries(key)); n != 0 {
		t.Errorf("due entries after Wait = %d, want 0", n)
	}
}

// The read of the recorded outcome runs alongside the write of the claim's
// due entry. Whenever it ends the attempt (a replay, a conflict, a failed
// read) the claim is never sent and the entry it may have written is
// released: no claim, no live entry, nothing for the reconciler.
func TestRecordedOutcomeReadEndsTheAttemptBeforeItsClaim(t *testing.T) {
	cases := []struct {
		name string
		in   func() order.Input
		arm  func(f *fixture)
		want func(t *testing.T, res Result, err error)
	}{
		{"recorded: replayed", sameInputOtherSpelling, func(*fixture) {}, func(t *testing.T, res Result, err error) {
			if err != nil || !res.Replayed || res.Outcome != OutcomeReplayed {
				t.Errorf("replay = %+v, %v; want replayed", res, err)
			}
		}},
		{"another command: REQUEST_ID_REUSED", func() order.Input { in := baseInput(); in.Total = "1.00"; in.Lines = nil; return in },
			func(*fixture) {}, func(t *testing.T, _ Result, err error) { wantFault(t, err, fault.Conflict) }},
		{"read fails: UNAVAILABLE", baseInput, func(f *fixture) {
			f.proj.Arm(projection.StmtGetOrder, cassandra.FaultUnavailable, 1)
		}, func(t *testing.T, _ Result, err error) { wantFault(t, err, fault.Unavailable) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, Config{ReplayCacheSize: -1}, nil)
			if _, err := f.svc.CreateOrder(context.Background(), testTenant, baseInput()); err != nil {
				t.Fatal(err)
			}
			f.svc.Wait()
			claims := len(f.led.Statements(ledger.StmtClaim))
			enqueued := len(f.led.Statements(ledger.StmtEnqueue))
			c.arm(f)

			res, err := f.svc.CreateOrder(context.Background(), testTenant, c.in())
			c.want(t, res, err)
			f.svc.Wait()
			if n := len(f.led.Statements(ledger.StmtClaim)); n != claims {
				t.Errorf("%d claims sent by the second attempt, want none", n-claims)
			}
			if n := len(f.led.Statements(ledger.StmtEnqueue)); n != enqueued+1 {
				t.Errorf("%d entries written by the second attempt, want 1 (alongside the read)", n-enqueued)
			}
			if live := f.led.AllEntries(); len(live) != 0 {
				t.Errorf("live due entries left: %+v; want every one released", live)
			}
		})
	}
}

// One request id under two tenants is two independent requests: each gets
// its own order, and neither tenant can read the other's request.
func TestOneRequestIDUnderTwoTenantsIsTwoRequests(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	ctx := context.Background()
	a, err := f.svc.CreateOrder(ctx, "acme", baseInput())
	if err != nil {
		t.Fatalf("acme: %v", err)
	}
	other := baseInput()
	other.Total, other.Lines[0].UnitPrice = "99.00", "99.00"
	other.Lines = other.Lines[:1]
	other.Lines[0].Quantity = 1
	b, err := f.svc.CreateOrder(ctx, "globex", other)
	if err != nil {
		t.Fatalf("globex, same request id, other payload: %v (want a new order, not a conflict)", err)
	}
	if a.Replayed || b.Replayed || a.Order.ID == b.Order.ID || a.Order.Tenant != "acme" || b.Order.Tenant != "globex" {
		t.Errorf("orders %+v and %+v: want two new orders, one per tenant", a.Order, b.Order)
	}
	if _, err := f.svc.Request(ctx, "initech", order.OperationCreate, uuid.MustParse(testRequestID)); fault.KindOf(err) != fault.NotFound {
		t.Errorf("a third tenant reading the request id: %v, want NotFound", err)
	}
	if _, err := f.svc.CreateOrder(ctx, "", baseInput()); fault.KindOf(err) != fault.Internal {
		t.Errorf("no tenant: %v, want Internal (nothing done)", err)
	}
}
