package workflow

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/adapters/outbox/outboxtest"
	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/platform/failpoint"
	"github.com/atlasmart/orderd/internal/stores/versions"
	"github.com/atlasmart/orderd/internal/stores/versions/versionstest"
	"github.com/atlasmart/orderd/ledger"
	"github.com/atlasmart/orderd/ledger/ledgertest"
	"github.com/atlasmart/orderd/projection"
)

// changeFixture is a fixture with the version store and a publisher, and
// one created order.
type changeFixture struct {
	*fixture
	ver   *versionstest.Memory
	pub   *outboxtest.Memory
	order order.Order
}

// anotherOrder creates a second order of the fixture's tenant.
func (f *changeFixture) anotherOrder(t *testing.T) order.Order {
	t.Helper()
	in := baseInput()
	in.RequestID = uuid.NewString()
	res, err := f.svc.CreateOrder(context.Background(), testTenant, in)
	if err != nil {
		t.Fatal(err)
	}
	f.svc.Wait()
	return res.Order
}

func newChangeFixture(t *testing.T, fps *failpoint.Set) *changeFixture {
	t.Helper()
	ver, pub := versionstest.NewMemory(), outboxtest.NewMemory()
	f := newFixture(t, Config{Versions: ver, Publisher: pub}, fps)
	res, err := f.svc.CreateOrder(context.Background(), testTenant, baseInput())
	if err != nil {
		t.Fatalf("CreateOrder: %v", err)
	}
	f.svc.Wait()
	f.clock.Advance(time.Minute)
	return &changeFixture{fixture: f, ver: ver, pub: pub, order: res.Order}
}

func (f *changeFixture) amend(expected int64, note string) order.ChangeInput {
	return order.ChangeInput{Operation: order.OperationAmend, RequestID: uuid.NewString(), OrderID: f.order.ID.String(),
		ExpectedVersion: expected, ShippingNote: note}
}

func (f *changeFixture) cancel(expected int64) order.ChangeInput {
	return order.ChangeInput{Operation: order.OperationCancel, RequestID: uuid.NewString(), OrderID: f.order.ID.String(),
		ExpectedVersion: expected}
}

func (f *changeFixture) change(t *testing.T, in order.ChangeInput) ChangeResult {
	t.Helper()
	res, err := f.svc.ChangeOrder(context.Background(), testTenant, in)
	if err != nil {
		t.Fatalf("ChangeOrder(%s from %d): %v", in.Operation, in.ExpectedVersion, err)
	}
	f.svc.Wait()
	return res
}

// upTo amends the order up to version v.
func (f *changeFixture) upTo(t *testing.T, v int64) {
	t.Helper()
	for e := f.current(t).Version; e < v; e++ {
		f.change(t, f.amend(e, "note "+time.Duration(e).String()))
	}
}

// current reads the order as GetOrder shows it.
func (f *changeFixture) current(t *testing.T) order.Order {
	t.Helper()
	o, err := f.proj.Order(context.Background(), testTenant, f.order.ID)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func (f *changeFixture) history(t *testing.T) []order.Change {
	t.Helper()
	h, err := f.ver.History(context.Background(), testTenant, f.order.ID, order.MaxVersion)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// wantStale checks err is the recorded stale-version conflict at current.
func wantConflict(t *testing.T, err error, kind fault.Kind, current string) {
	t.Helper()
	fe := wantFault(t, err, kind)
	if fe.Metadata["current_version"] != current {
		t.Errorf("current_version = %q, want %s", fe.Metadata["current_version"], current)
	}
}

func TestChangeAcceptedOnceThenReplayedFromItsReceipt(t *testing.T) {
	f := newChangeFixture(t, nil)
	f.upTo(t, 7)
	in := f.amend(7, "  leave at the back door ")
	res := f.change(t, in)
	if res.Outcome != OutcomeNew || res.Change.Version != 8 || res.Order.Version != 8 || res.Order.ShippingNote != "leave at the back door" {
		t.Fatalf("first attempt = %+v", res)
	}
	if cur := f.current(t); cur.Version != 8 || cur.ShippingNote != "leave at the back door" {
		t.Errorf("order after the change = version %d note %q", cur.Version, cur.ShippingNote)
	}
	// A lost response, then the retry: replayed from the receipt without a claim.
	claims := len(f.led.Statements(ledger.StmtClaim))
	again := f.change(t, in)
	if again.Outcome != OutcomeReplayed || !again.Replayed || again.Change != res.Change || again.Order.Version != 8 {
		t.Errorf("retry = %+v, want the recorded change", again)
	}
	if n := len(f.led.Statements(ledger.StmtClaim)); n != claims {
		t.Errorf("the retry sent %d claims, want none (receipt first)", n-claims)
	}
	// Even after later changes, the retry replays (not stale).
	f.change(t, f.amend(8, "another"))
	late := f.change(t, in)
	if late.Outcome != OutcomeReplayed || late.Order.Version != 8 || late.Order.ShippingNote != "leave at the back door" {
		t.Errorf("retry after a later change = %+v, want the recorded change at version 8", late)
	}
	if n := len(f.history(t)); n != 8 {
		t.Errorf("history holds %d changes, want 8 (versions 2..9)", n)
	}
	// One event per accepted change, with its id and version.
	recs := f.pub.Records()
	if len(recs) != 1+8 {
		t.Fatalf("published %d events, want 9 (created + 8 changes)", len(recs))
	}
}

// changeClaim is the PENDING claim a change attempt for in writes at
// created, as changeOrder writes it.
func changeClaim(t *testing.T, in order.ChangeInput, created time.Time) ledger.Record {
	t.Helper()
	requestID, cmd, err := order.CanonicalizeChange(in)
	if err != nil {
		t.Fatal(err)
	}
	encoded := cmd.Encode()
	return ledger.Record{
		Key:         ledger.Key{Tenant: testTenant, Operation: in.Operation, RequestID: requestID},
		EntityID:    cmd.OrderID,
		Fingerprint: order.ChangeFingerprint(in.Operation, encoded),
		Command:     encoded,
		State:       ledger.Pending,
		CreatedAt:   created.UTC().Truncate(time.Millisecond),
		ClaimToken:  uuid.New(),
	}
}

// A PENDING change request as its client sees it (Request): COMPLETE once
// its accepted change is recorded and projected, completed at the change's
// time; PENDING while it is not, or while it can never be (its order is
// not there, its command cannot be read), or while its refusal's receipt
// is not in the ledger yet; the read's failure if the order cannot be
// read. Reading the view writes nothing.
func TestRequestViewOfAPendingChange(t *testing.T) {
	for _, tc := range []struct {
		name  string
		seed  func(t *testing.T, f *changeFixture) ledger.Record
		state ledger.State
		kind  fault.Kind // the error's kind, or 0
	}{
		{"nothing recorded yet", func(t *testing.T, f *changeFixture) ledger.Record {
			return changeClaim(t, f.amend(1, "x"), f.clock.Now())
		}, ledger.Pending, 0},
		{"accepted and projected", func(t *testing.T, f *changeFixture) ledger.Record {
			rec := changeClaim(t, f.amend(1, "x"), f.clock.Now())
			f.led.Put(rec)
			if err := settleErr(f.svc, rec); err != nil {
				t.Fatalf("Settle: %v", err)
			}
			return rec
		}, ledger.Complete, 0},
		{"refused, its receipt not in the ledger yet", func(t *testing.T, f *changeFixture) ledger.Record {
			// The refusal is recorded with the order; the ledger's
			// receipt (Complete) failed: the row is PENDING until a retry
			// or the reconciler writes it. The change's answer (STALE) is
			// not the request's.
			f.upTo(t, 3)
			in := f.amend(2, "stale")
			f.led.Arm(ledger.StmtComplete, cassandra.FaultUnavailable, 1)
			_, err := f.svc.ChangeOrder(context.Background(), testTenant, in)
			f.svc.Wait()
			wantFault(t, err, fault.Unavailable)
			rec, _ := f.led.Record(ledger.Key{Tenant: testTenant, Operation: in.Operation, RequestID: uuid.MustParse(in.RequestID)})
			return rec
		}, ledger.Pending, 0},
		{"its order is not there", func(t *testing.T, f *changeFixture) ledger.Record {
			in := f.amend(1, "x")
			in.OrderID = uuid.NewString()
			return changeClaim(t, in, f.clock.Now())
		}, ledger.Pending, 0},
		{"its command cannot be read", func(t *testing.T, f *changeFixture) ledger.Record {
			rec := changeClaim(t, f.amend(1, "x"), f.clock.Now())
			rec.Command = []byte("{not json")
			return rec
		}, ledger.Pending, 0},
		{"the order cannot be read", func(t *testing.T, f *changeFixture) ledger.Record {
			rec := changeClaim(t, f.amend(1, "x"), f.clock.Now())
			f.proj.Arm(projection.StmtGetOrder, cassandra.FaultUnavailable, 1)
			return rec
		}, "", fault.Unavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newChangeFixture(t, nil)
			rec := tc.seed(t, f)
			f.led.Put(rec)
			before, writes := f.led.Records(), len(f.proj.Writes())

			view, err := f.svc.Request(context.Background(), testTenant, rec.Operation, rec.RequestID)

			switch {
			case tc.kind != 0:
				wantFault(t, err, tc.kind)
			case err != nil || view.State != tc.state || view.ClaimToken != rec.ClaimToken:
				t.Errorf("Request = %s (claim %s), %v; want %s (claim %s)", view.State, view.ClaimToken, err, tc.state, rec.ClaimToken)
			case tc.state == ledger.Complete && !view.CompletedAt.Equal(rec.CreatedAt):
				t.Errorf("completed_at = %s, want the change's time %s", view.CompletedAt, rec.CreatedAt)
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

// A retry of a change request whose first attempt is still at work waits,
// and answers the change that attempt records meanwhile (replayed, the
// same change and version), with no second version or event.
func TestChangeDuplicateAnswersTheChangeRecordedWhileItWaits(t *testing.T) {
	f := newChangeFixture(t, nil)
	f.svc.cfg.TakeoverAfter, f.svc.cfg.PollInterval = time.Minute, 5*time.Millisecond
	f.svc.now = time.Now
	in := f.amend(1, "gift wrap")
	first := changeClaim(t, in, time.Now())
	f.led.Put(first)

	// The first attempt finishes once the retry has started polling.
	peeked := make(chan struct{})
	var once sync.Once
	f.led.SetIntercept(func(st ledgertest.Statement) cassandra.Fault {
		if st.Name == ledger.StmtGet {
			once.Do(func() { close(peeked) })
		}
		return 0
	})
	settled := make(chan error, 1)
	go func() {
		<-peeked
		settled <- settleErr(f.svc, first)
	}()

	res := f.change(t, in)
	if err := <-settled; err != nil {
		t.Fatalf("the first attempt's Settle: %v", err)
	}
	if res.Outcome != OutcomeReplayed || !res.Replayed || res.Change.Version != 2 || res.Order.ShippingNote != "gift wrap" ||
		res.Change.ID != order.ChangeID(testTenant, in.Operation, first.RequestID) {
		t.Errorf("retry = %+v, want the first attempt's change, replayed", res)
	}
	if h := f.history(t); len(h) != 1 {
		t.Errorf("history = %d changes, want 1", len(h))
	}
	if n := len(f.pub.Records()); n != 2 {
		t.Errorf("published %d events, want 2 (created, the one change)", n)
	}
}

func TestChangeKeyReusedForAnotherChangeIsRefusedAndChangesNothing(t *testing.T) {
	f := newChangeFixture(t, nil)
	in := f.amend(1, "a")
	f.change(t, in)
	other := in
	other.ShippingNote = "b"
	_, err := f.svc.ChangeOrder(context.Background(), testTenant, other)
	wantFault(t, err, fault.Conflict)
	other.ExpectedVersion = 2 // another version too: the ledger's fingerprint catches it
	_, err = f.svc.ChangeOrder(context.Background(), testTenant, other)
	wantFault(t, err, fault.Conflict)
	if cur := f.current(t); cur.Version != 2 || cur.ShippingNote != "a" {
		t.Errorf("order = version %d note %q, want 2 %q", cur.Version, cur.ShippingNote, "a")
	}
}

func TestStaleChangeLeavesAConflictReceiptItsRetriesReplay(t *testing.T) {
	f := newChangeFixture(t, nil)
	f.upTo(t, 3)
	in := f.amend(2, "stale")
	_, err := f.svc.ChangeOrder(context.Background(), testTenant, in)
	f.svc.Wait()
	wantConflict(t, err, fault.Stale, "3")
	rec, ok := f.led.Record(ledger.Key{Tenant: testTenant, Operation: order.OperationAmend, RequestID: uuid.MustParse(in.RequestID)})
	if !ok || rec.State != ledger.Complete {
		t.Fatalf("ledger row = %+v, want COMPLETE (the receipt)", rec)
	}
	if len(f.led.Entries(rec.Key)) != 0 {
		t.Errorf("the conflict's due entry is still there")
	}
	f.upTo(t, 5)
	_, err = f.svc.ChangeOrder(context.Background(), testTenant, in)
	wantConflict(t, err, fault.Stale, "3") // the recorded answer, not a new evaluation
	if cur := f.current(t); cur.Version != 5 || cur.ShippingNote == "stale" {
		t.Errorf("order = %+v", cur)
	}
}

func TestCancelledOrderTakesNoChange(t *testing.T) {
	f := newChangeFixture(t, nil)
	res := f.change(t, f.cancel(1))
	if res.Order.Status != order.StatusCancelled || res.Order.Version != 2 {
		t.Fatalf("cancel = %+v", res)
	}
	_, err := f.svc.ChangeOrder(context.Background(), testTenant, f.amend(2, "too late"))
	wantConflict(t, err, fault.Rejected, "2")
	_, err = f.svc.ChangeOrder(context.Background(), testTenant, f.cancel(2))
	wantConflict(t, err, fault.Rejected, "2")
	// The create's replay is the order as created, whatever changed since.
	created, err := f.svc.CreateOrder(context.Background(), testTenant, baseInput())
	if err != nil || created.Order.Version != 1 || created.Order.Status != order.StatusCreated {
		t.Errorf("CreateOrder replay after the cancel = %+v, %v; want version 1 CREATED", created.Order, err)
	}
}

func TestChangeOfNoOrderOrInvalidLeavesNoReceipt(t *testing.T) {
	f := newChangeFixture(t, nil)
	before := len(f.led.Records())
	in := f.amend(1, "x")
	in.OrderID = uuid.NewString()
	_, err := f.svc.ChangeOrder(context.Background(), testTenant, in)
	wantFault(t, err, fault.NotFound)
	_, err = f.svc.ChangeOrder(context.Background(), "another-tenant", f.amend(1, "x"))
	wantFault(t, err, fault.NotFound)
	bad := f.amend(0, string([]byte{0x07}))
	_, err = f.svc.ChangeOrder(context.Background(), testTenant, bad)
	fe := wantFault(t, err, fault.Invalid)
	if len(fe.Violations) != 2 {
		t.Errorf("violations = %+v, want expected_version and shipping_note", fe.Violations)
	}
	if n := len(f.led.Records()); n != before {
		t.Errorf("ledger rows %d, want %d: nothing claimed", n, before)
	}
	if len(f.history(t)) != 0 {
		t.Error("a version was written")
	}
}

func TestTwoKeysRaceForOneVersion(t *testing.T) {
	f := newChangeFixture(t, nil)
	f.upTo(t, 7)
	a, b := f.amend(7, "a"), f.cancel(7)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, in := range []order.ChangeInput{a, b} {
		wg.Go(func() { _, errs[i] = f.svc.ChangeOrder(context.Background(), testTenant, in) })
	}
	wg.Wait()
	f.svc.Wait()
	if (errs[0] == nil) == (errs[1] == nil) {
		t.Fatalf("errors = %v, want exactly one accepted", errs)
	}
	for _, err := range errs {
		if err != nil {
			wantConflict(t, err, fault.Stale, "8")
		}
	}
	if h := f.history(t); len(h) != 7 {
		t.Errorf("history = %d changes, want 7", len(h))
	}
}

func TestConcurrentIdenticalChangesAcceptOnce(t *testing.T) {
	f := newChangeFixture(t, nil)
	in := f.amend(1, "same")
	var wg sync.WaitGroup
	res := make([]ChangeResult, 4)
	errs := make([]error, 4)
	for i := range res {
		wg.Go(func() { res[i], errs[i] = f.svc.ChangeOrder(context.Background(), testTenant, in) })
	}
	// Some may find the claim young and in progress: let the clock move
	// so that waiting attempts take over.
	wg.Wait()
	f.svc.Wait()
	var ids []uuid.UUID
	for i := range res {
		if errs[i] != nil {
			wantFault(t, errs[i], fault.InProgress)
			continue
		}
		ids = append(ids, res[i].Change.ID)
	}
	for _, id := range ids {
		if id != ids[0] {
			t.Errorf("answers name changes %v, want one", ids)
		}
	}
	if h := f.history(t); len(h) != 1 {
		t.Errorf("history = %d changes, want 1", len(h))
	}
}

func TestChangeFailureBeforeTheVersionCheckIsInvisibleAndARetrySucceeds(t *testing.T) {
	f := newChangeFixture(t, failpointsOrDie(t, failpoint.BeforeVersion+"=error*1"))
	in := f.amend(1, "x")
	_, err := f.svc.ChangeOrder(context.Background(), testTenant, in)
	wantFault(t, err, fault.Unavailable)
	if cur := f.current(t); cur.Version != 1 || len(f.history(t)) != 0 {
		t.Fatalf("order after the failure = version %d, history %d: want nothing visible", cur.Version, len(f.history(t)))
	}
	f.clock.Advance(2 * time.Second) // the claim is old enough to take over
	res := f.change(t, in)
	if res.Outcome != OutcomeTakeover || res.Order.Version != 2 {
		t.Errorf("retry = %+v, want the change done by the retry", res)
	}
}

func TestVersionCheckUnknownOutcomes(t *testing.T) {
	t.Run("lost response: settled as applied", func(t *testing.T) {
		f := newChangeFixture(t, nil)
		f.ver.Arm(versions.StmtApply, cassandra.FaultLoseResponse, 1)
		res := f.change(t, f.amend(1, "x"))
		if res.Outcome != OutcomeNew || res.Order.Version != 2 {
			t.Errorf("result = %+v", res)
		}
	})
	t.Run("unsettled: OUTCOME_UNKNOWN, PENDING; the reconciler's Settle finishes it with one event", func(t *testing.T) {
		f := newChangeFixture(t, nil)
		f.ver.Arm(versions.StmtApply, cassandra.FaultLoseResponse, 1)
		f.ver.Arm(versions.StmtState, cassandra.FaultUnavailable, 1)
		in := f.amend(1, "x")
		_, err := f.svc.ChangeOrder(context.Background(), testTenant, in)
		wantFault(t, err, fault.OutcomeUnknown)
		key := ledger.Key{Tenant: testTenant, Operation: order.OperationAmend, RequestID: uuid.MustParse(in.RequestID)}
		rec, _ := f.led.Record(key)
		if rec.State != ledger.Pending || rec.Attempts != 1 || len(f.led.Entries(key)) == 0 {
			t.Fatalf("ledger = %s attempts %d entries %d; want PENDING, noted, findable", rec.State, rec.Attempts, len(f.led.Entries(key)))
		}
		events := len(f.pub.Records())
		if err := settleErr(f.svc, rec); err != nil {
			t.Fatalf("Settle: %v", err)
		}
		if cur := f.current(t); cur.Version != 2 || cur.ShippingNote != "x" {
			t.Errorf("order after Settle = %+v", cur)
		}
		if n := len(f.pub.Records()) - events; n != 1 {
			t.Errorf("Settle published %d events, want 1", n)
		}
		view, err := f.svc.Request(context.Background(), testTenant, order.OperationAmend, key.RequestID)
		if err != nil || view.State != ledger.Complete {
			t.Errorf("request view = %s, %v; want COMPLETE", view.State, err)
		}
		res := f.change(t, in)
		if !res.Replayed || res.Order.Version != 2 {
			t.Errorf("retry = %+v, want the replayed change", res)
		}
	})
	t.Run("conflict receipt unknown and unsettled: OUTCOME_UNKNOWN; a retry answers the conflict", func(t *testing.T) {
		f := newChangeFixture(t, nil)
		f.upTo(t, 2)
		f.led.Arm(ledger.StmtComplete, cassandra.FaultTimeout, 1)
		f.led.Arm(ledger.StmtGet, cassandra.FaultUnavailable, 3)
		in := f.amend(1, "stale")
		_, err := f.svc.ChangeOrder(context.Background(), testTenant, in)
		wantFault(t, err, fault.OutcomeUnknown)
		f.clock.Advance(2 * time.Second)
		_, err = f.svc.ChangeOrder(context.Background(), testTenant, in)
		wantConflict(t, err, fault.Stale, "2")
	})
	t.Run("Settle of a stale change records its receipt and delivers nothing", func(t *testing.T) {
		f := newChangeFixture(t, failpointsOrDie(t, failpoint.BeforeVersion+"=error*1"))
		in := f.amend(1, "late")
		_, err := f.svc.ChangeOrder(context.Background(), testTenant, in)
		wantFault(t, err, fault.Unavailable)
		f.change(t, f.amend(1, "first")) // another key takes version 2
		key := ledger.Key{Tenant: testTenant, Operation: order.OperationAmend, RequestID: uuid.MustParse(in.RequestID)}
		rec, _ := f.led.Record(key)
		events := len(f.pub.Records())
		if err := settleErr(f.svc, rec); err != nil {
			t.Fatalf("Settle: %v", err)
		}
		if n := len(f.pub.Records()) - events; n != 0 {
			t.Errorf("Settle of a conflict published %d events", n)
		}
		if rec, _ := f.led.Record(key); rec.State != ledger.Complete {
			t.Errorf("ledger = %s, want COMPLETE (the receipt)", rec.State)
		}
	})
}

func failpointsOrDie(t *testing.T, spec string) *failpoint.Set {
	t.Helper()
	fps, err := failpoint.ParseForTest(spec)
	if err != nil {
		t.Fatal(err)
	}
	return fps
}

// A ledger row of an operation this release does not know (a newer
// release's, claimed and maybe partly written by it) is left alone: Settle
// says so (ledger.ErrUnknownOperation, so the reconciler keeps the entry for
// a release that knows it) and writes nothing. Unfinishable, as before, made
// the reconciler set the request aside as FAILED, contradicting what the
// newer release had told its client.
func TestSettleOfAnUnknownOperationActsOnNothing(t *testing.T) {
	f := newChangeFixture(t, nil)
	rec := recordFor(t, f.svc, baseInput(), claimTime, ledger.Pending)
	rec.Operation = "SPLIT_ORDER"
	// The writes of RecordAttempt, MarkFailed, Withdraw, Complete and
	// RemoveEntry (or Release).
	writes := []cassandra.Stmt{ledger.StmtAttempt, ledger.StmtFail, ledger.StmtWithdraw, ledger.StmtComplete, ledger.StmtRemove}
	sent := map[cassandra.Stmt]int{}
	for _, stmt := range writes {
		sent[stmt] = len(f.led.Statements(stmt))
	}
	written := len(f.proj.Writes())
	err := settleErr(f.svc, rec)
	if errors.Is(err, ledger.ErrUnfinishable) || fault.ReasonOf(err) != fault.ReasonOperationUnknown {
		t.Fatalf("Settle of operation %q = %v, want OPERATION_UNKNOWN and never unfinishable", rec.Operation, err)
	}
	if !errors.Is(err, ledger.ErrUnknownOperation) {
		t.Errorf("Settle of operation %q = %v, want it to wrap ledger.ErrUnknownOperation", rec.Operation, err)
	}
	for _, stmt := range writes {
		if n := len(f.led.Statements(stmt)) - sent[stmt]; n != 0 {
			t.Errorf("%d %s statements sent for an unknown operation", n, stmt)
		}
	}
	if n := len(f.proj.Writes()) - written; n != 0 {
		t.Errorf("%d orders written for an unknown operation", n)
	}
}

// completeHook runs before on the row a conflict receipt is about to be
// recorded for: the claim changes between the version check and Complete.
type completeHook struct {
	*ledgertest.Memory
	before func(ledger.Record)
}

func (h completeHook) Complete(ctx context.Context, rec ledger.Record, outcome []byte) (ledger.Record, error) {
	h.before(rec)
	return h.Memory.Complete(ctx, rec, outcome)
}

// A stale change whose claim changed before its conflict receipt was
// recorded is still answered with the conflict the version check decided:
// a conflict is final (versions only grow), so the answer is true whoever
// holds the row now. Nothing is written for it, the row another claim
// holds is left as it is, and a retry is answered the same.
func TestConflictWhoseClaimChangedBeforeItsReceiptIsStillTheAnswer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(f *changeFixture, rec ledger.Record)
		// kept: the row afterwards is the changed one (else there is none).
		kept bool
	}{
		{"the claim expired", func(f *changeFixture, rec ledger.Record) { f.led.Delete(rec.Key) }, false},
		{"a newer claim holds the row", func(f *changeFixture, rec ledger.Record) {
			rec.ClaimToken = uuid.New()
			f.led.Put(rec)
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newChangeFixture(t, nil)
			f.upTo(t, 3)
			events := len(f.pub.Records())
			var changed ledger.Record
			var once sync.Once
			hooked := completeHook{Memory: f.led, before: func(rec ledger.Record) {
				once.Do(func() {
					tc.change(f, rec)
					changed, _ = f.led.Record(rec.Key)
				})
			}}
			f.svc = New(Config{Versions: f.ver, Publisher: f.pub}, hooked, f.proj, nil, discardLogger())
			f.svc.now = f.clock.Now
			in := f.amend(2, "stale")
			key := ledger.Key{Tenant: testTenant, Operation: order.OperationAmend, RequestID: uuid.MustParse(in.RequestID)}

			_, err := f.svc.ChangeOrder(context.Background(), testTenant, in)
			f.svc.Wait()
			wantConflict(t, err, fault.Stale, "3")

			now, ok := f.led.Record(key)
			switch {
			case tc.kept && (!ok || now.ClaimToken != changed.ClaimToken || now.State != ledger.Pending):
				t.Errorf("ledger row = %+v (present %v), want the newer claim's row as it was", now, ok)
			case !tc.kept && ok:
				t.Errorf("ledger row = %+v, want none (the claim expired)", now)
			}
			if cur := f.current(t); cur.Version != 3 || cur.ShippingNote == "stale" {
				t.Errorf("order = version %d note %q, want version 3 untouched", cur.Version, cur.ShippingNote)
			}
			if n := len(f.pub.Records()) - events; n != 0 {
				t.Errorf("published %d events for a conflict, want none", n)
			}

			// The retry is answered from the refusal recorded with the
			// order, before any claim; the reconciler settles a newer claim
			// still PENDING to the same conflict receipt.
			f.clock.Advance(time.Minute)
			claims := len(f.led.Statements(ledger.StmtClaim))
			_, err = f.svc.ChangeOrder(context.Background(), testTenant, in)
			f.svc.Wait()
			wantConflict(t, err, fault.Stale, "3")
			if n := len(f.led.Statements(ledger.StmtClaim)) - claims; n != 0 {
				t.Errorf("the retry sent %d claims, want none (the recorded refusal first)", n)
			}
			if !tc.kept {
				return
			}
			if err := settleErr(f.svc, changed); err != nil {
				t.Fatalf("Settle of the newer claim: %v", err)
			}
			if now, ok := f.led.Record(key); !ok || now.State != ledger.Complete {
				t.Errorf("after Settle: ledger row = %+v (present %v), want its conflict receipt", now, ok)
			} else {
				wantConflict(t, conflictOf(now), fault.Stale, "3")
			}
		})
	}
}

// laggingHistory is a version store whose History misses the newest change
// the first lag times it is read: a LOCAL_QUORUM read reaching replicas the
// change's commit has not reached yet.
type laggingHistory struct {
	*versionstest.Memory
	mu  sync.Mutex
	lag int
}

func (l *laggingHistory) History(ctx context.Context, tenant string, orderID uuid.UUID, upTo int64) ([]order.Change, error) {
	h, err := l.Memory.History(ctx, tenant, orderID, upTo)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil && l.lag > 0 && len(h) > 0 {
		l.lag--
		h = h[:len(h)-1]
	}
	return h, err
}

// An accepted change whose history does not read back whole yet is not
// guessed at: the client is told UNAVAILABLE, the order is not rewritten
// from a history without the change, nothing is published, and the request
// stays PENDING and findable. Its retry and the reconciler's Settle finish
// it from the version already accepted: one version, one event.
func TestAcceptedChangeWhoseHistoryLagsIsFinishedLater(t *testing.T) {
	for _, finisher := range []string{"the retry", "the reconciler"} {
		t.Run(finisher, func(t *testing.T) {
			f := newChangeFixture(t, nil)
			lagging := &laggingHistory{Memory: f.ver, lag: 1}
			f.svc = New(Config{Versions: lagging, Publisher: f.pub}, f.led, f.proj, nil, discardLogger())
			f.svc.now = f.clock.Now
			events := len(f.pub.Records())
			in := f.amend(1, "late read")
			key := ledger.Key{Tenant: testTenant, Operation: order.OperationAmend, RequestID: uuid.MustParse(in.RequestID)}

			_, err := f.svc.ChangeOrder(context.Background(), testTenant, in)
			f.svc.Wait()
			wantFault(t, err, fault.Unavailable)
			if h := f.history(t); len(h) != 1 || h[0].ShippingNote != "late read" {
				t.Fatalf("history = %+v, want the accepted change (version 2)", h)
			}
			if cur := f.current(t); cur.Version != 1 || cur.ShippingNote != "" {
				t.Errorf("order = version %d note %q, want version 1 untouched until the history reads whole", cur.Version, cur.ShippingNote)
			}
			if n := len(f.pub.Records()) - events; n != 0 {
				t.Errorf("published %d events before the order was written, want none", n)
			}
			rec, ok := f.led.Record(key)
			if !ok || rec.State != ledger.Pending || len(f.led.Entries(key)) == 0 {
				t.Fatalf("ledger = %+v (present %v, entries %d), want PENDING and findable", rec, ok, len(f.led.Entries(key)))
			}

			f.clock.Advance(2 * time.Second) // old enough to take over
			if finisher == "the retry" {
				res := f.change(t, in)
				if res.Order.Version != 2 || res.Order.ShippingNote != "late read" {
					t.Errorf("retry = %+v, want the accepted change at version 2", res)
				}
			} else if err := settleErr(f.svc, rec); err != nil {
				t.Fatalf("Settle: %v", err)
			}
			f.svc.Wait()
			if h := f.history(t); len(h) != 1 {
				t.Errorf("history has %d changes, want 1 (the version accepted once)", len(h))
			}
			if cur := f.current(t); cur.Version != 2 || cur.ShippingNote != "late read" {
				t.Errorf("order = version %d note %q, want version 2 %q", cur.Version, cur.ShippingNote, "late read")
			}
			if n := len(f.pub.Records()) - events; n != 1 {
				t.Errorf("published %d events, want 1", n)
			}
			res := f.change(t, in)
			if !res.Replayed || res.Order.Version != 2 {
				t.Errorf("a further retry = %+v, want the change replayed", res)
			}
		})
	}
}

// A claimed change whose order cannot be found (claims are sent only for
// orders that exist; a restore that lost the order row is what leaves one)
// is unfinishable: Settle says so, so the reconciler dead-letters it, and
// no version is taken and nothing is published for it.
func TestSettleOfAChangeOfNoOrderIsUnfinishableAndWritesNothing(t *testing.T) {
	f := newChangeFixture(t, failpointsOrDie(t, failpoint.BeforeVersion+"=error*1"))
	in := f.amend(1, "for no order")
	_, err := f.svc.ChangeOrder(context.Background(), testTenant, in)
	wantFault(t, err, fault.Unavailable)
	key := ledger.Key{Tenant: testTenant, Operation: order.OperationAmend, RequestID: uuid.MustParse(in.RequestID)}
	rec, ok := f.led.Record(key)
	if !ok || rec.State != ledger.Pending {
		t.Fatalf("ledger = %+v (present %v), want the PENDING claim", rec, ok)
	}
	cmd, err := order.DecodeChangeCommand(rec.Command)
	if err != nil {
		t.Fatal(err)
	}
	missing := uuid.New()
	cmd.OrderID = missing
	rec.Command = cmd.Encode()
	events := len(f.pub.Records())

	err = settleErr(f.svc, rec)
	if !errors.Is(err, ledger.ErrUnfinishable) || fault.KindOf(err) == fault.NotFound {
		t.Fatalf("Settle = %v, want ErrUnfinishable (not NotFound, which the reconciler would retry)", err)
	}
	for _, id := range []uuid.UUID{missing, f.order.ID} {
		if h, _ := f.ver.History(context.Background(), testTenant, id, order.MaxVersion); len(h) != 0 {
			t.Errorf("order %s has %d changes, want none", id, len(h))
		}
	}
	if n := len(f.pub.Records()) - events; n != 0 {
		t.Errorf("published %d events, want none", n)
	}
}

// A change claim whose stored command no finisher can read (damaged at
// rest, or written by a version whose encoding this one cannot read) is
// unfinishable, for the reconciler to set aside: nothing of it can have
// been applied, and nothing is written or published.
func TestSettleOfAnUnreadableChangeCommandIsUnfinishableAndWritesNothing(t *testing.T) {
	f := newChangeFixture(t, nil)
	rec := changeClaim(t, f.amend(1, "x"), f.clock.Now())
	rec.Command = []byte("{not json")
	f.led.Put(rec)
	events := len(f.pub.Records())

	err := settleErr(f.svc, rec)
	if !errors.Is(err, ledger.ErrUnfinishable) || fault.ReasonOf(err) != fault.ReasonCommandUnreadable {
		t.Fatalf("Settle = %v, want ErrUnfinishable with COMMAND_UNREADABLE", err)
	}
	if h := f.history(t); len(h) != 0 {
		t.Errorf("the order has %d changes, want none", len(h))
	}
	if cur := f.current(t); cur.Version != 1 {
		t.Errorf("order at version %d, want 1", cur.Version)
	}
	if n := len(f.pub.Records()) - events; n != 0 {
		t.Errorf("published %d events, want none", n)
	}
}

// A process whose clock is too far from the cluster's sends no claim: a
// new order or change is refused CLOCK_SKEWED (Unavailable: retry, another
// instance may answer) with nothing claimed, while a request already
// recorded is still answered. Its claim and due entry would be dated by
// that clock, and the reconciler's decisions rest on the two being close.
func TestSkewedClockSendsNoClaim(t *testing.T) {
	f := newChangeFixture(t, nil)
	skewed := fault.New(fault.ReasonClockSkewed, errors.New("this clock is 90s off the cluster's"))
	f.svc.cfg.Clock = func() error { return skewed }
	claimsBefore := len(f.led.Records())

	in := baseInput()
	in.RequestID = uuid.NewString()
	if _, err := f.svc.CreateOrder(context.Background(), testTenant, in); fault.ReasonOf(err) != fault.ReasonClockSkewed || fault.KindOf(err) != fault.Unavailable {
		t.Errorf("new CreateOrder with a skewed clock = %v, want CLOCK_SKEWED (Unavailable)", err)
	}
	if _, err := f.svc.ChangeOrder(context.Background(), testTenant, f.amend(1, "leave at the door")); fault.ReasonOf(err) != fault.ReasonClockSkewed {
		t.Errorf("new AmendOrder with a skewed clock = %v, want CLOCK_SKEWED", err)
	}
	f.svc.Wait()
	if n := len(f.led.Records()) - claimsBefore; n != 0 {
		t.Errorf("%d requests claimed with a skewed clock, want none", n)
	}

	// The order created before is recorded: its duplicate is answered.
	res, err := f.svc.CreateOrder(context.Background(), testTenant, baseInput())
	if err != nil || !res.Replayed || res.Order.ID != f.order.ID {
		t.Errorf("duplicate of a recorded order with a skewed clock = %+v, %v; want the order replayed", res, err)
	}

	f.svc.cfg.Clock = func() error { return nil }
	if _, err := f.svc.CreateOrder(context.Background(), testTenant, in); err != nil {
		t.Errorf("CreateOrder once the clock is back = %v", err)
	}
}

// While a live reconciler of an older release does not finish changes, no
// change claim is sent: AmendOrder and CancelOrder are refused
// OPERATION_NOT_ENABLED (Unavailable: retry once the rollout completes)
// with nothing claimed, a change already recorded is still answered, and
// CreateOrder, which every release finishes, never asks.
func TestChangeNotEnabledSendsNoClaim(t *testing.T) {
	f := newChangeFixture(t, nil)
	done := f.amend(1, "before the rollback")
	if _, err := f.svc.ChangeOrder(context.Background(), testTenant, done); err != nil {
		t.Fatal(err)
	}
	f.svc.Wait()
	var asked []string
	f.svc.cfg.Enabled = func(_ context.Context, op string) error {
		asked = append(asked, op)
		return fault.New(fault.ReasonOperationNotEnabled, errors.New("1 of 2 live reconciler instances do not say they finish it"))
	}
	claimsBefore := len(f.led.Records())

	for _, in := range []order.ChangeInput{f.amend(2, "after the rollback"), f.cancel(2)} {
		_, err := f.svc.ChangeOrder(context.Background(), testTenant, in)
		if fault.ReasonOf(err) != fault.ReasonOperationNotEnabled || fault.KindOf(err) != fault.Unavailable {
			t.Errorf("%s while not enabled = %v, want OPERATION_NOT_ENABLED (Unavailable)", in.Operation, err)
		}
	}
	f.svc.Wait()
	if n := len(f.led.Records()) - claimsBefore; n != 0 {
		t.Errorf("%d change requests claimed while not enabled, want none", n)
	}
	if got := f.order; got.Version != 1 {
		t.Fatalf("fixture order at version %d", got.Version)
	}
	if res, err := f.svc.ChangeOrder(context.Background(), testTenant, done); err != nil || !res.Replayed || res.Change.Version != 2 {
		t.Errorf("the recorded change again = %+v, %v; want it replayed at version 2", res, err)
	}

	in := baseInput()
	in.RequestID = uuid.NewString()
	if _, err := f.svc.CreateOrder(context.Background(), testTenant, in); err != nil {
		t.Errorf("CreateOrder while changes are not enabled = %v", err)
	}
	for _, op := range asked {
		if op == order.OperationCreate {
			t.Errorf("CreateOrder asked whether %s is enabled", op)
		}
	}
}

// Every operation this release says it finishes (what its reconcilers'
// heartbeats advertise) is one Settle knows.
func TestSettleKnowsEveryOperationItAdvertises(t *testing.T) {
	f := newChangeFixture(t, nil)
	for _, op := range Operations() {
		rec := recordFor(t, f.svc, baseInput(), claimTime, ledger.Pending)
		rec.Operation = op
		if err := settleErr(f.svc, rec); errors.Is(err, ledger.ErrUnknownOperation) {
			t.Errorf("Settle of advertised operation %s = %v", op, err)
		}
	}
}

// A restore of tables from snapshots taken moments apart can leave the
// order's history (order_versions) behind its row (orders_by_id): here the
// row shows version 3 and the history lost the change that made it.
// Decided on that history, a change from version 3 (what GetOrder shows)
// was refused STALE at version 2 for good, and a stale change from
// version 2 was accepted as a second version 3. The history is rebuilt
// first, from the lost change's event row and its request's claim, exactly
// as it was; then each is decided as without the restore.
func TestAHistoryARestoreLeftBehindTheOrderIsRebuiltBeforeAnyDecision(t *testing.T) {
	restored := func(t *testing.T) (*changeFixture, []order.Change) {
		f := newChangeFixture(t, nil)
		f.upTo(t, 3)
		before := f.history(t)
		f.ver.RollBack(testTenant, f.order.ID, 2)
		return f, before
	}
	t.Run("a change from the version the order shows is accepted", func(t *testing.T) {
		f, before := restored(t)
		res := f.change(t, f.cancel(3))
		if res.Change.Version != 4 {
			t.Errorf("the cancel made version %d, want 4", res.Change.Version)
		}
		if got := f.history(t); len(got) != 3 || !reflect.DeepEqual(got[:2], before) {
			t.Errorf("history = %+v, want the two changes before the restore, as they were, then the cancel", got)
		}
		if cur := f.current(t); cur.Version != 4 || cur.Status != order.StatusCancelled {
			t.Errorf("order = %+v, want version 4, cancelled", cur)
		}
	})
	t.Run("a change from the version before is stale", func(t *testing.T) {
		f, before := restored(t)
		_, err := f.svc.ChangeOrder(context.Background(), testTenant, f.cancel(2))
		f.svc.Wait()
		wantConflict(t, err, fault.Stale, "3")
		if got := f.history(t); !reflect.DeepEqual(got, before) {
			t.Errorf("history = %+v, want it as before the restore", got)
		}
	})
	t.Run("a retry of the lost change itself is answered its acceptance", func(t *testing.T) {
		f, before := restored(t)
		lost := before[1]
		in := order.ChangeInput{Operation: lost.Operation, RequestID: lost.RequestID.String(), OrderID: f.order.ID.String(),
			ExpectedVersion: 2, ShippingNote: lost.ShippingNote}
		f.clock.Advance(time.Minute) // its claim is old: the retry finishes it
		res := f.change(t, in)
		if res.Change != lost || res.Order.Version != 3 {
			t.Errorf("retry = %+v, want the lost change as it was, the order at version 3", res)
		}
		if got := f.history(t); !reflect.DeepEqual(got, before) {
			t.Errorf("history = %+v, want it as before the restore", got)
		}
	})
	t.Run("the lost change's claim gone too: nothing decided, the order unchanged", func(t *testing.T) {
		f, before := restored(t)
		lost := before[1]
		f.led.Delete(ledger.Key{Tenant: testTenant, Operation: lost.Operation, RequestID: lost.RequestID})
		in := f.cancel(3)
		_, err := f.svc.ChangeOrder(context.Background(), testTenant, in)
		f.svc.Wait()
		if fe := wantFault(t, err, fault.Unavailable); fe.Reason != fault.ReasonHistoryBehind {
			t.Errorf("reason = %s, want %s", fe.Reason, fault.ReasonHistoryBehind)
		}
		if got := f.history(t); !reflect.DeepEqual(got, before[:1]) {
			t.Errorf("history = %+v, want it as the restore left it", got)
		}
		if _, ok, _ := f.ver.Lookup(context.Background(), testTenant, f.order.ID, order.ChangeID(testTenant, in.Operation, uuid.MustParse(in.RequestID))); ok {
			t.Error("an outcome was recorded for the change")
		}
		if cur := f.current(t); cur.Version != 3 {
			t.Errorf("order = %+v, want version 3 as it was", cur)
		}
	})
}

// Redeliver publishes, from the order's rows alone, exactly the record an
// earlier attempt published for a request: the created event and a
// change's event, same key, same headers, same bytes.
func TestRedeliverPublishesTheEventAsItWasFirstPublished(t *testing.T) {
	f := newChangeFixture(t, nil)
	in := f.amend(1, "back door")
	f.change(t, in)
	f.change(t, f.cancel(2))
	first := f.pub.Records()
	if len(first) != 3 {
		t.Fatalf("records published = %d, want 3 (created, amended, cancelled)", len(first))
	}
	for i, key := range []ledger.Key{
		{Tenant: testTenant, Operation: order.OperationCreate, RequestID: f.order.RequestID},
		{Tenant: testTenant, Operation: in.Operation, RequestID: uuid.MustParse(in.RequestID)},
	} {
		if settled, err := f.svc.Redeliver(context.Background(), key, f.order.ID); err != nil || settled != ledger.Finished {
			t.Fatalf("Redeliver(%s): %v", key.Operation, err)
		}
		recs := f.pub.Records()
		got := recs[len(recs)-1]
		if !bytes.Equal(got.Key, first[i].Key) || !bytes.Equal(got.Value, first[i].Value) || !reflect.DeepEqual(got.Headers, first[i].Headers) {
			t.Errorf("Redeliver(%s) published\n%s %s\nwant\n%s %s", key.Operation, got.Key, got.Value, first[i].Key, first[i].Value)
		}
	}
	other := ledger.Key{Tenant: testTenant, Operation: order.OperationCancel, RequestID: uuid.New()}
	if settled, err := f.svc.Redeliver(context.Background(), other, f.order.ID); err == nil || settled != ledger.Unfinished {
		t.Error("Redeliver of a request that made no event of the order = nil, want an error")
	}
}

// A change id is derived from the tenant, the operation and the request
// id, without the order. Once the ledger forgot a change request, the same
// request id sent for another order of the tenant was accepted there under
// the first change's id (its event sharing that id: a consumer that
// deduplicates by event id drops it). The request id is bound to its first
// order for good, and the reuse is refused with nothing changed.
func TestAChangeRequestIDReusedForAnotherOrderIsRefused(t *testing.T) {
	f := newChangeFixture(t, nil)
	other := f.anotherOrder(t)
	first := f.amend(1, "back door")
	f.change(t, first)
	rid := uuid.MustParse(first.RequestID)
	f.led.Delete(ledger.Key{Tenant: testTenant, Operation: first.Operation, RequestID: rid}) // past its retention

	published := len(f.pub.Records())
	reuse := first
	reuse.OrderID = other.ID.String()
	_, err := f.svc.ChangeOrder(context.Background(), testTenant, reuse)
	f.svc.Wait()
	if fe := wantFault(t, err, fault.Conflict); fe.Reason != fault.ReasonRequestIDReused {
		t.Errorf("reason = %s, want %s", fe.Reason, fault.ReasonRequestIDReused)
	}
	if h, _ := f.ver.History(context.Background(), testTenant, other.ID, order.MaxVersion); len(h) != 0 {
		t.Errorf("the other order's history = %+v, want none", h)
	}
	if o, _ := f.proj.Order(context.Background(), testTenant, other.ID); o.Version != 1 || o.ShippingNote != "" {
		t.Errorf("the other order = %+v, want it unchanged at version 1", o)
	}
	if n := len(f.pub.Records()); n != published {
		t.Errorf("%d events published for the refused reuse, want none", n-published)
	}
	// The same request id for its own order is still answered as before.
	res, err := f.svc.ChangeOrder(context.Background(), testTenant, first)
	if err != nil || !res.Replayed || res.Change.Version != 2 {
		t.Errorf("the first change again = %+v, %v; want it replayed at version 2", res, err)
	}
	// The refused reuse sent again finds its own claim COMPLETE (its refusal
	// is in the ledger only: the other order's partition records nothing),
	// and the same reuse with yet another note finds that claim another
	// command's: REQUEST_ID_REUSED both, nothing changed.
	again := reuse
	again.ShippingNote = "side door"
	for _, in := range []order.ChangeInput{reuse, again} {
		_, err := f.svc.ChangeOrder(context.Background(), testTenant, in)
		f.svc.Wait()
		if fe := wantFault(t, err, fault.Conflict); fe.Reason != fault.ReasonRequestIDReused {
			t.Errorf("the reuse (note %q) sent again: reason %s, want %s", in.ShippingNote, fe.Reason, fault.ReasonRequestIDReused)
		}
	}
	if o, _ := f.proj.Order(context.Background(), testTenant, other.ID); o.Version != 1 || o.ShippingNote != "" {
		t.Errorf("the other order after the reuse's retries = %+v, want it unchanged at version 1", o)
	}
	if n := len(f.pub.Records()); n != published {
		t.Errorf("%d events published for the reuse's retries, want none", n-published)
	}
}

// A change request id sent with another change while its first claim is
// still PENDING and undecided (its version check failed, so nothing is
// recorded under its change id): REQUEST_ID_REUSED, the claim and the
// order as they were, and the first change, retried, still accepted.
func TestChangeRequestIDReusedWhileItsClaimIsUndecided(t *testing.T) {
	f := newChangeFixture(t, nil)
	first := f.amend(1, "back door")
	f.ver.Arm(versions.StmtApply, cassandra.FaultUnavailable, 1)
	_, err := f.svc.ChangeOrder(context.Background(), testTenant, first)
	f.svc.Wait()
	wantFault(t, err, fault.Unavailable)
	key := ledger.Key{Tenant: testTenant, Operation: first.Operation, RequestID: uuid.MustParse(first.RequestID)}
	claim, ok := f.led.Record(key)
	if !ok || claim.State != ledger.Pending {
		t.Fatalf("the first change's claim = %+v (%v), want PENDING", claim, ok)
	}

	other := first
	other.ShippingNote = "side door"
	_, err = f.svc.ChangeOrder(context.Background(), testTenant, other)
	f.svc.Wait()
	if fe := wantFault(t, err, fault.Conflict); fe.Reason != fault.ReasonRequestIDReused {
		t.Errorf("reason = %s, want %s", fe.Reason, fault.ReasonRequestIDReused)
	}
	if rec, _ := f.led.Record(key); rec.State != ledger.Pending || rec.Fingerprint != claim.Fingerprint || rec.ClaimToken != claim.ClaimToken {
		t.Errorf("the claim after the reuse = %+v, want the first's as it was", rec)
	}
	if h := f.history(t); len(h) != 0 {
		t.Errorf("history after the reuse = %+v, want none", h)
	}

	f.clock.Advance(2 * time.Second) // the claim is old enough to take over
	res, err := f.svc.ChangeOrder(context.Background(), testTenant, first)
	f.svc.Wait()
	if err != nil || res.Change.Version != 2 || f.current(t).ShippingNote != "back door" {
		t.Errorf("the first change retried = %+v, %v (order note %q), want it accepted at version 2", res, err, f.current(t).ShippingNote)
	}
}

// The binding's read or write failing ends the attempt before the version
// check: nothing is decided, and the retry (same request id) is accepted.
func TestChangeWhoseBindingFailsDecidesNothing(t *testing.T) {
	for _, stmt := range []cassandra.Stmt{versions.StmtBound, versions.StmtBind} {
		t.Run(string(stmt), func(t *testing.T) {
			f := newChangeFixture(t, nil)
			in := f.amend(1, "back door")
			f.ver.Arm(stmt, cassandra.FaultUnavailable, 1)
			_, err := f.svc.ChangeOrder(context.Background(), testTenant, in)
			f.svc.Wait()
			wantFault(t, err, fault.Unavailable)
			if h := f.history(t); len(h) != 0 {
				t.Fatalf("history after the failed attempt = %+v, want none", h)
			}
			f.clock.Advance(time.Minute) // the retry takes the claim over
			if res := f.change(t, in); res.Change.Version != 2 {
				t.Errorf("retry = %+v, want version 2", res)
			}
		})
	}
}
