package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/ledger"
	"github.com/atlasmart/orderd/ledger/ledgertest"
)

// The fake the unit tests of workflow, reconciler and grpcapi run on must
// answer as the real store does: the same suite runs against
// ledger.Ledger in e2e/contract_ledger_test.go.
func TestMemoryContract(t *testing.T) {
	ledgertest.Run(t, func(t *testing.T) ledgertest.Subject {
		m := ledgertest.NewMemory(ledgertest.Config{})
		return ledgertest.Subject{Store: m.Ledger, Arm: m.Arm, Before: m.Before, Pending: m.Pending, Now: m.Now,
			Legacy: func(_ context.Context, rec ledger.Record) error { m.Put(rec); return nil }}
	})
}

// A clock a test moves by hand.
var t0 = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

func newMemory(retention time.Duration) *ledgertest.Memory {
	return ledgertest.NewMemory(ledgertest.Config{
		Config: ledger.Config{Retention: retention},
		Now:    func() time.Time { return t0 },
	})
}

func claimAt(t *testing.T, m *ledgertest.Memory, created time.Time) ledger.Record {
	t.Helper()
	rec := ledger.Record{
		Key:         ledger.Key{Tenant: "t", Operation: "CreateOrder", RequestID: uuid.New()},
		EntityID:    uuid.New(),
		Fingerprint: "sha256:v1:x",
		Command:     []byte(`{"v":1}`),
		CreatedAt:   created,
		ClaimToken:  uuid.New(),
	}
	won, _, err := m.Claim(context.Background(), rec, nil)
	if err != nil || !won {
		t.Fatalf("Claim = %v, %v", won, err)
	}
	return rec
}

// Rows and entries live until the claim's expiry instant, whoever writes
// them later and whenever: every write carries the time left until then.
func TestMemoryExpiresRowsAndEntriesAtTheClaimsExpiry(t *testing.T) {
	ctx := context.Background()
	m := newMemory(10 * time.Minute)
	rec := claimAt(t, m, t0)
	entry := m.ClaimEntry(rec)

	m.Advance(9 * time.Minute)
	if err := m.RecordAttempt(ctx, rec, "R"); err != nil {
		t.Fatal(err)
	}
	cur, err := m.Get(ctx, rec.Key)
	if err != nil || cur.Attempts != 1 {
		t.Fatalf("Get after the attempt = %+v, %v", cur, err)
	}
	if err := m.Reschedule(ctx, entry, m.Now().Add(5*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if es := m.Entries(rec.Key); len(es) != 1 {
		t.Fatalf("entries = %+v, want the rescheduled one", es)
	}

	m.Advance(time.Minute - time.Millisecond) // 1 ms before the expiry instant
	if _, ok := m.Record(rec.Key); !ok {
		t.Fatal("row gone before its expiry instant")
	}
	m.Advance(time.Millisecond)
	if _, err := m.Get(ctx, rec.Key); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("Get at the expiry instant = %v, want ErrNotFound", err)
	}
	if es := m.AllEntries(); len(es) != 0 {
		t.Errorf("entries at the expiry instant = %+v, want none (an entry lives no longer than its request)", es)
	}
	// The request id is free again.
	again := claimAt(t, m, m.Now())
	_ = again
}

// A finisher holding the record of an expired claim cannot touch the claim
// made afresh under the same request id.
func TestMemoryStaleClaimAfterExpiry(t *testing.T) {
	ctx := context.Background()
	m := newMemory(time.Hour)
	old := claimAt(t, m, t0)
	m.Advance(time.Hour)
	fresh := old
	fresh.ClaimToken, fresh.CreatedAt = uuid.New(), m.Now()
	if won, _, err := m.Claim(ctx, fresh, nil); err != nil || !won {
		t.Fatalf("Claim after expiry = %v, %v; want won", won, err)
	}
	got, err := m.MarkFailed(ctx, old, "STALE")
	if err != nil || got.State != ledger.Pending || got.ClaimToken != fresh.ClaimToken {
		t.Fatalf("MarkFailed of the expired claim = %s/%s, %v; want the fresh claim, PENDING", got.State, got.ClaimToken, err)
	}
}

// Put refuses what the store could never hold, rather than seeding a row
// Get would fail on.
func TestMemoryPutRefusesImpossibleRows(t *testing.T) {
	m := newMemory(time.Hour)
	for name, rec := range map[string]ledger.Record{
		"no state":       {Key: ledger.Key{RequestID: uuid.New()}, Fingerprint: "f", CreatedAt: t0},
		"no fingerprint": {Key: ledger.Key{RequestID: uuid.New()}, State: ledger.Pending, CreatedAt: t0},
		"expired":        {Key: ledger.Key{RequestID: uuid.New()}, State: ledger.Pending, Fingerprint: "f", CreatedAt: t0.Add(-time.Hour)},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("Put of a record with %s did not panic", name)
				}
			}()
			m.Put(rec)
		})
	}
}

// SetIntercept fails the statements of one request alone; armed faults are
// served first.
func TestMemoryIntercept(t *testing.T) {
	ctx := context.Background()
	m := newMemory(time.Hour)
	a, b := claimAt(t, m, t0), claimAt(t, m, t0)
	m.SetIntercept(func(st ledgertest.Statement) cassandra.Fault {
		if st.Name == ledger.StmtGet && st.Key == b.Key {
			return cassandra.FaultUnavailable
		}
		return 0
	})
	if _, err := m.Get(ctx, a.Key); err != nil {
		t.Errorf("Get(a): %v", err)
	}
	if _, err := m.Get(ctx, b.Key); fault.KindOf(err) != fault.Unavailable {
		t.Errorf("Get(b) = %v, want Unavailable", err)
	}
	m.Arm(ledger.StmtGet, cassandra.FaultTimeout, 1)
	if _, err := m.Get(ctx, a.Key); fault.KindOf(err) != fault.Unavailable {
		t.Errorf("Get(a) with a fault armed = %v, want Unavailable", err)
	}
	m.SetIntercept(nil)
	if _, err := m.Get(ctx, b.Key); err != nil {
		t.Errorf("Get(b) without the intercept: %v", err)
	}
	gets := m.Statements(ledger.StmtGet)
	if len(gets) != 4 || gets[1].Fault != cassandra.FaultUnavailable || gets[2].Fault != cassandra.FaultTimeout || gets[3].Fault != 0 {
		t.Errorf("logged gets = %+v", gets)
	}
	for _, st := range gets {
		if !st.Serial {
			t.Errorf("logged get %+v: not serial, want every one a Get's", st)
		}
	}
	if n := len(m.Statements(ledger.StmtClaim)); n != 2 {
		t.Errorf("logged claims = %d, want 2", n)
	}
}

// A statement run with an ended context applies nothing: a write's outcome
// is then unknown, a read fails.
func TestMemoryEndedContext(t *testing.T) {
	m := newMemory(time.Hour)
	rec := claimAt(t, m, t0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.MarkFailed(ctx, rec, "X"); fault.KindOf(err) != fault.OutcomeUnknown {
		t.Errorf("MarkFailed with an ended context = %v, want OutcomeUnknown", err)
	}
	if got, _ := m.Record(rec.Key); got.State != ledger.Pending {
		t.Errorf("state after MarkFailed with an ended context = %s, want PENDING", got.State)
	}
	if _, err := m.Get(ctx, rec.Key); fault.KindOf(err) != fault.Unavailable {
		t.Errorf("Get with an ended context = %v, want Unavailable", err)
	}
}

// OnSettle hears how each unknown outcome was settled, as the real store
// reports it.
func TestMemoryOnSettle(t *testing.T) {
	type settled struct {
		op      string
		outcome ledger.SettleOutcome
	}
	var got []settled
	m := ledgertest.NewMemory(ledgertest.Config{Config: ledger.Config{OnSettle: func(op string, o ledger.SettleOutcome, _ error) {
		got = append(got, settled{op, o})
	}}})
	ctx := context.Background()
	rec := ledger.Record{Key: ledger.Key{Tenant: "t", Operation: "op", RequestID: uuid.New()}, Fingerprint: "f",
		CreatedAt: m.Now(), ClaimToken: uuid.New()}
	m.Arm(ledger.StmtClaim, cassandra.FaultLoseResponse, 1)
	if won, _, err := m.Claim(ctx, rec, nil); !won || err != nil {
		t.Fatal(won, err)
	}
	m.Arm(ledger.StmtFail, cassandra.FaultTimeout, 1)
	m.Arm(ledger.StmtGet, cassandra.FaultUnavailable, 3)
	if _, err := m.MarkFailed(ctx, rec, "X"); fault.KindOf(err) != fault.OutcomeUnknown {
		t.Fatal(err)
	}
	want := []settled{{"claim", ledger.SettledApplied}, {"fail", ledger.Unsettled}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("OnSettle heard %v, want %v", got, want)
	}
}

// An entry that owes its order's event outlives its claim (no TTL): once
// the ledger row is gone with the retention, it is still listed, so the
// obligation stays until the event is acknowledged. An entry that owes
// nothing goes with its claim, as before.
func TestOwedEntryOutlivesItsClaim(t *testing.T) {
	ctx := context.Background()
	m := newMemory(10 * time.Minute)
	owing, plain := claimAt(t, m, t0), claimAt(t, m, t0)
	for _, rec := range []ledger.Record{owing, plain} {
		e := m.ClaimEntry(rec)
		if rec.Key == owing.Key {
			e.Owed = rec.EntityID
		}
		if err := m.Reschedule(ctx, e, t0.Add(5*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	m.Advance(time.Hour)
	if _, err := m.Get(ctx, owing.Key); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("the claim an hour on = %v, want gone with its retention", err)
	}
	got := m.AllEntries()
	if len(got) != 1 || got[0].Key != owing.Key || got[0].Owed != owing.EntityID {
		t.Errorf("entries an hour on = %+v, want only the one owing order %s", got, owing.EntityID)
	}
}
