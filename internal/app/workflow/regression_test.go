package workflow

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/ledger"
	"github.com/atlasmart/orderd/ledger/ledgertest"
)

// Regression tests for workflow defects found in review; each failed on the code
// as it landed (7fe1df1).

// impatientProjector fails a write the way the driver does when the call's
// own context ends mid-write: the context is done and the error is an
// unknown outcome.
type impatientProjector struct {
	Projector
	cancel context.CancelFunc
}

func (p impatientProjector) Write(ctx context.Context, o order.Order) error {
	p.cancel()
	<-ctx.Done()
	return fault.New(fault.ReasonOutcomeUnknown, ctx.Err())
}

// Defect 2: a client whose own deadline ends the attempt has not seen the
// request fail; counting it would let impatient retries use up the
// attempts before the reconciler ever tried.
func TestClientDeadlineIsNotAFailedAttempt(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	f.svc.projector = impatientProjector{Projector: f.proj, cancel: cancel}
	_, err := f.svc.CreateOrder(ctx, testTenant, baseInput())
	wantFault(t, err, fault.OutcomeUnknown)
	rec := onlyRecord(t, f.led)
	if rec.State != ledger.Pending || rec.Attempts != 0 || rec.LastError != "" {
		t.Fatalf("after the client's deadline: state %s, attempts %d, last_error %q; want PENDING, 0, none",
			rec.State, rec.Attempts, rec.LastError)
	}
	if n := len(f.led.Statements(ledger.StmtAttempt)); n != 0 {
		t.Errorf("RecordAttempt called %d times for an attempt the client abandoned", n)
	}
}

// Defect 3: after the ledger row expires, a late retry of the same
// request_id meets the recorded order before any claim: the same intent
// gets the original order back as a replay (its created_at, its month); a
// different command is rejected. Neither claims, and the order is not
// touched.
func TestLateClaimAfterExpiryKeepsTheFirstOrder(t *testing.T) {
	// Without the replay cache: a late retry reaches another instance, or
	// this one after a restart, and meets the expired ledger.
	f := newFixture(t, Config{ReplayCacheSize: -1}, nil)
	first, err := f.svc.CreateOrder(context.Background(), testTenant, baseInput())
	if err != nil {
		t.Fatal(err)
	}
	key := testKey(t)

	// Past the retention, into another month: the row is gone.
	f.clock.Advance(8 * 24 * time.Hour)
	if _, ok := f.led.Record(key); ok {
		t.Fatal("the ledger row outlived its retention")
	}
	other := baseInput()
	other.Total, other.CustomerID = "99.00", "cust-other"
	other.Lines = nil
	_, err = f.svc.CreateOrder(context.Background(), testTenant, other)
	if fe := wantFault(t, err, fault.Conflict); fe.Reason != fault.ReasonRequestIDReused {
		t.Fatalf("reason %s, want REQUEST_ID_REUSED", fe.Reason)
	}
	if rec, ok := f.led.Record(key); ok {
		t.Fatalf("the rejected claim was left in the ledger: %+v", rec)
	}
	got, err := f.proj.Order(context.Background(), first.Order.Tenant, first.Order.ID)
	if err != nil || !reflect.DeepEqual(got, first.Order) {
		t.Fatalf("the order after a rejected late retry:\n  %+v (%v)\nwant it unchanged:\n  %+v", got, err, first.Order)
	}
	if n := len(f.proj.Writes()); n != 1 {
		t.Errorf("the rejected late retry wrote projections (%d orders written, want the first only)", n)
	}

	again, err := f.svc.CreateOrder(context.Background(), testTenant, sameInputOtherSpelling())
	if err != nil {
		t.Fatalf("late retry of the same intent: %v", err)
	}
	if !again.Replayed || again.Outcome != OutcomeReplayed {
		t.Errorf("late retry of the same intent: replayed %v, outcome %s; want a replay", again.Replayed, again.Outcome)
	}
	if !reflect.DeepEqual(again.Order, first.Order) {
		t.Errorf("late retry answered\n  %+v\nwant the first order\n  %+v", again.Order, first.Order)
	}
	if recs, claims := f.led.Records(), f.led.Statements(ledger.StmtClaim); len(recs) != 0 || len(claims) != 1 {
		t.Errorf("late retries claimed: %d claims sent, ledger rows %+v; want only the first claim", len(claims), recs)
	}
	if got, _ := f.proj.Order(context.Background(), first.Order.Tenant, first.Order.ID); !reflect.DeepEqual(got, first.Order) {
		t.Errorf("the late retry rewrote the order: %+v", got)
	}
}

// seedLateConflictingClaim records an order, lets its claim expire (past
// the retention) and claims its request id again with another command: a
// PENDING claim whose finisher finds the id's order carrying another
// command and must withdraw it.
func seedLateConflictingClaim(t *testing.T, f *fixture) ledger.Record {
	t.Helper()
	if _, err := f.svc.CreateOrder(context.Background(), testTenant, baseInput()); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(8 * 24 * time.Hour)
	other := baseInput()
	other.Total = "1.00"
	other.Lines = nil
	rec := recordFor(t, f.svc, other, f.clock.Now(), ledger.Pending)
	rec.ClaimToken = uuid.New()
	if won, _, err := f.led.Claim(context.Background(), rec, nil); err != nil || !won {
		t.Fatalf("seed the late claim: %v %v", won, err)
	}
	return rec
}

// A claim withdrawn by one finisher is answered as a conflict by the
// finishers racing it, never as an error of the cluster.
func TestFinishOfAWithdrawnClaimIsAConflict(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	rec := seedLateConflictingClaim(t, f)
	for i := range 2 { // the first withdraws, the second finds it gone
		_, err := f.svc.Finish(context.Background(), rec)
		if fe := wantFault(t, err, fault.Conflict); fe.Reason != fault.ReasonRequestIDReused {
			t.Fatalf("finisher %d: reason %s, want REQUEST_ID_REUSED", i, fe.Reason)
		}
	}
}

// A finisher whose withdrawal is not applied because the claim changed
// under it answers what the ledger now says, as a fault its callers act on
// (the client retries, the reconciler reschedules or drops the entry),
// never as an unclassified error; it writes nothing and leaves the newer
// row as it is.
func TestFinishWhoseWithdrawalFindsTheClaimChanged(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*ledger.Record)
		reason fault.Reason
	}{
		{"a takeover's newer claim", func(r *ledger.Record) { r.ClaimToken = uuid.New() }, fault.ReasonRequestInProgress},
		{"set aside as FAILED", func(r *ledger.Record) { r.State = ledger.Failed }, fault.ReasonRequestFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Config{}, nil)
			rec := seedLateConflictingClaim(t, f)
			changed := rec
			tc.change(&changed)
			f.led.Put(changed)
			writes := len(f.proj.Writes())

			_, err := f.svc.Finish(context.Background(), rec)

			fe, ok := fault.As(err)
			if !ok || fe.Reason != tc.reason {
				t.Fatalf("Finish = %v (%T), want a %s fault", err, err, tc.reason)
			}
			now, ok := f.led.Record(rec.Key)
			if !ok || now.ClaimToken != changed.ClaimToken || now.State != changed.State {
				t.Errorf("ledger row now %+v (present %v), want the changed row kept", now, ok)
			}
			if n := len(f.proj.Writes()) - writes; n != 0 {
				t.Errorf("%d orders written, want none", n)
			}
		})
	}
}

// A finisher whose withdrawal of a conflicting claim fails, or whose
// outcome stays unknown, answers that failure (retry), not REQUEST_ID_REUSED:
// the claim may still be there, and only a finisher that saw it go may say
// the request id is free of it. Nothing is written; the next finisher
// withdraws it.
func TestFinishWhoseWithdrawalFailsKeepsTheClaim(t *testing.T) {
	for _, tc := range []struct {
		name   string
		faults map[cassandra.Stmt]cassandra.Fault
		kind   fault.Kind
	}{
		{"unavailable", map[cassandra.Stmt]cassandra.Fault{ledger.StmtWithdraw: cassandra.FaultUnavailable}, fault.Unavailable},
		{"timed out, unsettled", map[cassandra.Stmt]cassandra.Fault{ledger.StmtWithdraw: cassandra.FaultTimeout,
			ledger.StmtGet: cassandra.FaultUnavailable}, fault.OutcomeUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Config{}, nil)
			rec := seedLateConflictingClaim(t, f)
			writes := len(f.proj.Writes())
			f.led.SetIntercept(func(st ledgertest.Statement) cassandra.Fault { return tc.faults[st.Name] })

			_, err := f.svc.Finish(context.Background(), rec)
			wantFault(t, err, tc.kind)
			f.led.SetIntercept(nil)
			if now, ok := f.led.Record(rec.Key); !ok || now.ClaimToken != rec.ClaimToken || now.State != ledger.Pending {
				t.Errorf("ledger row now %+v (present %v), want the claim kept", now, ok)
			}
			if n := len(f.proj.Writes()) - writes; n != 0 {
				t.Errorf("%d orders written, want none", n)
			}

			_, err = f.svc.Finish(context.Background(), rec)
			if fault.ReasonOf(err) != fault.ReasonRequestIDReused {
				t.Fatalf("next Finish = %v, want REQUEST_ID_REUSED", err)
			}
			if _, ok := f.led.Record(rec.Key); ok {
				t.Error("the conflicting claim is still in the ledger after the next Finish")
			}
		})
	}
}

// Model finding 2 (model/README.md): a dead letter must never contradict
// rows. These failed before the fix (the winner built its order from the
// command in memory; Finish decoded before it read the order row).

// unreadableClaims stores every claim with a command no finisher can read,
// as bytes damaged at rest or a version whose encoding another cannot read
// would leave it.
type unreadableClaims struct{ *ledgertest.Memory }

func (u unreadableClaims) Claim(ctx context.Context, rec ledger.Record, check func(context.Context) error) (bool, ledger.Record, error) {
	rec.Command = []byte("{not json")
	return u.Memory.Claim(ctx, rec, check)
}

func TestWinnerWritesNothingFinishersCannotRead(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	f.useLedger(unreadableClaims{f.led})
	_, err := f.svc.CreateOrder(context.Background(), testTenant, baseInput())
	if e := wantFault(t, err, fault.Internal); e.Reason != fault.ReasonCommandUnreadable {
		t.Fatalf("CreateOrder reason = %s, want %s", e.Reason, fault.ReasonCommandUnreadable)
	}
	if w := f.proj.Writes(); len(w) != 0 {
		t.Fatalf("the winner wrote %d orders from a command finishers cannot read", len(w))
	}
	// So the finisher's dead letter contradicts nothing.
	rec := onlyRecord(t, f.led)
	if _, err := f.svc.Finish(context.Background(), rec); !errors.Is(err, ledger.ErrUnfinishable) {
		t.Fatalf("Finish = %v, want ErrUnfinishable", err)
	}
}

func TestFinishNeverSetsAsideARecordedOrder(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	rec := recordFor(t, f.svc, baseInput(), claimTime, ledger.Pending)
	cmd, err := order.DecodeCommand(rec.Command)
	if err != nil {
		t.Fatal(err)
	}
	written := order.New(rec.Tenant, rec.RequestID, cmd, rec.CreatedAt)
	if err := f.proj.Write(context.Background(), written); err != nil {
		t.Fatal(err)
	}
	rec.Command = []byte("{not json") // unreadable now; its order was recorded
	f.led.Put(rec)

	got, err := f.svc.Finish(context.Background(), rec)
	if err != nil {
		t.Fatalf("Finish of a request whose order is recorded = %v, want its order", err)
	}
	if !reflect.DeepEqual(got, written) {
		t.Errorf("Finish = %+v, want the recorded order %+v", got, written)
	}
	if now := onlyRecord(t, f.led); now.State != ledger.Pending {
		t.Errorf("request is %s, want still PENDING (COMPLETE by its order)", now.State)
	}
}

func TestFinishWithdrawsAnUnreadableClaimOfAnotherOrder(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	earlier := recordFor(t, f.svc, baseInput(), claimTime.Add(-time.Hour), ledger.Pending)
	cmd, err := order.DecodeCommand(earlier.Command)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.proj.Write(context.Background(), order.New(earlier.Tenant, earlier.RequestID, cmd, earlier.CreatedAt)); err != nil {
		t.Fatal(err)
	}
	rec := recordFor(t, f.svc, baseInput(), claimTime, ledger.Pending) // a later claim of the same id
	rec.Command = []byte("{not json")
	f.led.Put(rec)

	_, err = f.svc.Finish(context.Background(), rec)
	wantFault(t, err, fault.Conflict)
	if _, ok := f.led.Record(rec.Key); ok {
		t.Error("the later claim is still in the ledger, want it withdrawn")
	}
	if n := len(f.proj.Writes()); n != 1 {
		t.Errorf("%d orders written, want only the earlier one", n)
	}
}
