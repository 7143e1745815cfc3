package ledgertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/platform/cassandra/memtable"
	"github.com/atlasmart/orderd/ledger"
)

// Subject is one store under test.
type Subject struct {
	// Store is the ledger on the table under test (Memory.Ledger, or the
	// ledger on the CQL table).
	Store *ledger.Ledger
	// Arm makes the next times executions of a named statement fail
	// (Memory.Arm, or cassandra.FaultSession.Arm under the CQL table).
	Arm func(statement cassandra.Stmt, f cassandra.Fault, times int)
	// Before runs a function once, just before the next execution of a
	// named statement (Memory.Before, FaultSession.Before): a racing
	// client's write between a store's read and its conditional write.
	Before func(statement cassandra.Stmt, do func())
	// Pending is how many faults armed for a statement are still unserved
	// (Memory.Pending, FaultSession.Pending): the suite checks that every
	// fault it armed was served, i.e. that the branch it meant to run ran.
	Pending func(statement cassandra.Stmt) int
	// NewKey, if set, returns a request key no other test uses. By default
	// each subtest has a tenant of its own and every key a fresh request id.
	NewKey func() ledger.Key
	// Now, if set, is the store's clock (Memory.Now); default time.Now.
	// Claims are dated by it and Requeue's entries are due by it.
	Now func() time.Time
	// SettleAttempts is the store's ledger.Config.SettleAttempts; default 3.
	SettleAttempts int
	// Legacy turns a PENDING claim's row into rec (state COMPLETE with its
	// outcome and completed_at) the way the protocol before one-LWT wrote
	// it: such rows exist until their TTL, and the store must honour them.
	Legacy func(ctx context.Context, rec ledger.Record) error
}

// Run is the ledger's contract, for ledger.Store, the due queue and the
// reconciler's and operator's writes. newSubject is called once per
// subtest, and subtests run in parallel: each gets its own Subject (its own
// armed faults) and its own keys, so subjects may share one keyspace.
//
// Every conditional write (claim, attempt, fail, withdraw,
// requeue) is run applied, not applied, and with an unknown outcome settled
// each way the store settles it; each subtest asserts what the call returned
// and what reads return afterwards (Get, DueEntries).
func Run(t *testing.T, newSubject func(t *testing.T) Subject) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			subject := newSubject(t)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			s := &suite{Subject: subject, ctx: ctx, tenant: "contract-" + uuid.NewString()}
			if s.Now == nil {
				s.Now = time.Now
			}
			if s.SettleAttempts == 0 {
				s.SettleAttempts = 3
			}
			tc.run(t, s)
			for _, name := range ledger.Statements {
				if n := s.Pending(name); n != 0 {
					t.Errorf("%d faults armed on %s were never served: the branch under test did not run", n, name)
				}
			}
		})
	}
}

type suite struct {
	Subject
	ctx    context.Context
	tenant string
}

type testCase struct {
	name string
	run  func(t *testing.T, s *suite)
}

// cases is the contract, grouped by the operation under test.
var cases = concat(claimCases, getCases, releaseCases, attemptCases, failCases, completeCases, withdrawCases, requeueCases, queueCases)

func concat(groups ...[]testCase) []testCase {
	var out []testCase
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

// ---------------------------------------------------------------- helpers

func (s *suite) key() ledger.Key {
	if s.NewKey != nil {
		return s.NewKey()
	}
	return ledger.Key{Tenant: s.tenant, Operation: "CreateOrder", RequestID: uuid.New()}
}

// record is a fresh claim of a fresh key, dated now (UTC, milliseconds: what
// callers pass and a Cassandra timestamp keeps).
func (s *suite) record() ledger.Record {
	return s.recordFor(s.key())
}

// recordFor is a fresh claim of key: another token, another command, a
// call of another trace (which every write must keep).
func (s *suite) recordFor(key ledger.Key) ledger.Record {
	n := strings.ReplaceAll(uuid.NewString(), "-", "")
	return ledger.Record{
		Key:         key,
		EntityID:    uuid.New(),
		Fingerprint: "sha256:v1:" + n,
		Command:     []byte(`{"v":1,"n":"` + n + `"}`),
		CreatedAt:   s.Now().UTC().Truncate(time.Millisecond),
		ClaimToken:  uuid.New(),
		TraceParent: "00-" + n + "-" + n[:16] + "-01",
	}
}

// claimed claims a fresh record and returns it as the claim returned it.
func (s *suite) claimed(t *testing.T) ledger.Record {
	t.Helper()
	return s.mustClaim(t, s.record())
}

// claimedAlone claims a fresh record dated 6 to 12 hours ago, so that its
// due entry falls in a minute no other subtest's claims use: DropBucket
// deletes a whole (shard, minute) partition of the due queue, whichever
// tenants' entries it holds, and the subtests run side by side (one run
// dropped another subtest's entry that way).
func (s *suite) claimedAlone(t *testing.T) ledger.Record {
	t.Helper()
	rec := s.record()
	rec.CreatedAt = rec.CreatedAt.Add(-6*time.Hour - time.Duration(rand.IntN(6*60))*time.Minute)
	return s.mustClaim(t, rec)
}

// recordsInOneShard is n fresh claims of fresh keys at one claim time, so
// their entries share a partition of the due queue.
func (s *suite) recordsInOneShard(n int) []ledger.Record {
	at := s.Now().UTC().Truncate(time.Millisecond)
	recs := make([]ledger.Record, n)
	for i := range recs {
		recs[i] = s.record()
		recs[i].CreatedAt = at
	}
	return recs
}

// claimedInOneShard claims n such requests, one after another.
func (s *suite) claimedInOneShard(t *testing.T, n int) []ledger.Record {
	t.Helper()
	var recs []ledger.Record
	for _, rec := range s.recordsInOneShard(n) {
		recs = append(recs, s.mustClaim(t, rec))
	}
	return recs
}

// claimAllInOneShard claims n such requests at once (so their entries may
// share a write), and returns the records and each Claim's answer.
func (s *suite) claimAllInOneShard(n int) (recs []ledger.Record, won []bool, errs []error) {
	recs, won, errs = s.recordsInOneShard(n), make([]bool, n), make([]error, n)
	var wg sync.WaitGroup
	for i := range recs {
		wg.Go(func() { won[i], _, errs[i] = s.Store.Claim(s.ctx, recs[i], nil) })
	}
	wg.Wait()
	return recs, won, errs
}

// releaseAll releases recs at once and returns each Release's error.
func (s *suite) releaseAll(recs []ledger.Record) []error {
	errs := make([]error, len(recs))
	var wg sync.WaitGroup
	for i, rec := range recs {
		wg.Go(func() { errs[i] = s.Store.Release(s.ctx, rec) })
	}
	wg.Wait()
	return errs
}

func (s *suite) mustClaim(t *testing.T, rec ledger.Record) ledger.Record {
	t.Helper()
	won, got, err := s.Store.Claim(s.ctx, rec, nil)
	if err != nil || !won {
		t.Fatalf("Claim(%s) = won %v, err %v; want a won claim", rec.RequestID, won, err)
	}
	return got
}

// stale makes rec's claim a thing of the past: withdrawn, and the same
// request id claimed afresh (as after expiry). It returns the new claim.
func (s *suite) stale(t *testing.T, rec ledger.Record) ledger.Record {
	t.Helper()
	if _, err := s.Store.Withdraw(s.ctx, rec); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("Withdraw = %v, want ErrNotFound", err)
	}
	return s.mustClaim(t, s.recordFor(rec.Key))
}

// complete makes rec's row COMPLETE as the protocol before one-LWT did
// (Subject.Legacy): such rows live until their TTL and every write must
// still leave them alone.
func (s *suite) complete(t *testing.T, rec ledger.Record) ledger.Record {
	t.Helper()
	if s.Legacy == nil {
		t.Fatal("the subject cannot write a COMPLETE row (Subject.Legacy)")
	}
	done := rec
	done.State, done.Outcome, done.CompletedAt = ledger.Complete, []byte(`{"order":"`+rec.RequestID.String()+`"}`), s.at()
	if err := s.Legacy(s.ctx, done); err != nil {
		t.Fatalf("write a COMPLETE row: %v", err)
	}
	if err := s.Store.Release(s.ctx, rec); err != nil { // completing removed the entry
		t.Fatalf("Release: %v", err)
	}
	s.wantRow(t, done)
	return done
}

func (s *suite) fail(t *testing.T, rec ledger.Record, reason string) ledger.Record {
	t.Helper()
	failed, err := s.Store.MarkFailed(s.ctx, rec, reason)
	if err != nil || failed.State != ledger.Failed {
		t.Fatalf("MarkFailed = %s, %v; want FAILED", failed.State, err)
	}
	return failed
}

// at is a completion time as callers pass it.
func (s *suite) at() time.Time { return s.Now().UTC().Truncate(time.Millisecond) }

func (s *suite) get(t *testing.T, key ledger.Key) ledger.Record {
	t.Helper()
	rec, err := s.Store.Get(s.ctx, key)
	if err != nil {
		t.Fatalf("Get(%s): %v", key.RequestID, err)
	}
	return rec
}

// wantRow checks the row of want's key reads back as want.
func (s *suite) wantRow(t *testing.T, want ledger.Record) {
	t.Helper()
	if d := diff(s.get(t, want.Key), want); d != "" {
		t.Errorf("row of %s: %s", want.RequestID, d)
	}
}

func (s *suite) wantState(t *testing.T, key ledger.Key, state ledger.State) ledger.Record {
	t.Helper()
	rec := s.get(t, key)
	if rec.State != state {
		t.Errorf("row of %s: state %s, want %s", key.RequestID, rec.State, state)
	}
	return rec
}

func (s *suite) wantNoRow(t *testing.T, key ledger.Key) {
	t.Helper()
	if rec, err := s.Store.Get(s.ctx, key); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("Get(%s) = %s (token %s), %v; want ErrNotFound", key.RequestID, rec.State, rec.ClaimToken, err)
	}
}

// entriesOf lists the entries of key's request in one due-queue partition.
func (s *suite) entriesOf(t *testing.T, key ledger.Key, shard int, bucket time.Time) []ledger.DueEntry {
	t.Helper()
	all, err := s.Store.DueEntries(s.ctx, shard, bucket, time.Time{}, ledger.BucketOf(bucket).Add(ledger.BucketWidth))
	if err != nil {
		t.Fatalf("DueEntries(%d, %s): %v", shard, bucket.Format(time.TimeOnly), err)
	}
	var out []ledger.DueEntry
	for _, e := range all {
		if e.Shard != shard || !e.Due.Equal(ledger.BucketOf(bucket)) {
			t.Errorf("DueEntries(%d, %s) returned an entry of shard %d, bucket %s", shard, bucket.Format(time.TimeOnly), e.Shard, e.Due.Format(time.TimeOnly))
		}
		if e.Key == key {
			out = append(out, e)
		}
	}
	return out
}

// wantEntry checks want is in the due queue, as it is (NotBefore and
// CreatedAt to the millisecond).
func (s *suite) wantEntry(t *testing.T, want ledger.DueEntry) {
	t.Helper()
	for _, e := range s.entriesOf(t, want.Key, want.Shard, want.Due) {
		if !e.SameRow(want) {
			continue
		}
		if !e.NotBefore.Equal(memtable.MS(want.NotBefore)) || !e.CreatedAt.Equal(memtable.MS(want.CreatedAt)) {
			t.Errorf("entry of %s: not_before %s, created_at %s; want %s, %s", want.RequestID,
				e.NotBefore, e.CreatedAt, memtable.MS(want.NotBefore), memtable.MS(want.CreatedAt))
		}
		return
	}
	t.Errorf("no entry of %s (token %s) in shard %d, bucket %s", want.RequestID, want.ClaimToken, want.Shard, want.Due.Format(time.TimeOnly))
}

func (s *suite) wantNoEntry(t *testing.T, e ledger.DueEntry) {
	t.Helper()
	for _, got := range s.entriesOf(t, e.Key, e.Shard, e.Due) {
		if got.SameRow(e) {
			t.Errorf("entry of %s (token %s) still in shard %d, bucket %s", e.RequestID, e.ClaimToken, e.Shard, e.Due.Format(time.TimeOnly))
		}
	}
}

// wantRequeueEntry checks an entry of rec's claim falls due RequeueLead
// after a time between lo and hi (by the store's clock, which may be the
// cluster's: give it slack).
func (s *suite) wantRequeueEntry(t *testing.T, rec ledger.Record, lo, hi time.Time) {
	t.Helper()
	lo, hi = lo.Add(ledger.RequeueLead-2*time.Second), hi.Add(ledger.RequeueLead+2*time.Second)
	for b := ledger.BucketOf(lo); !b.After(hi); b = b.Add(ledger.BucketWidth) {
		for _, e := range s.entriesOf(t, rec.Key, ledger.ShardOf(rec.CreatedAt), b) {
			if e.ClaimToken == rec.ClaimToken && !e.NotBefore.Before(lo) && !e.NotBefore.After(hi) {
				if !e.CreatedAt.Equal(memtable.MS(rec.CreatedAt)) {
					t.Errorf("entry due now of %s: created_at %s, want the claim's %s", rec.RequestID, e.CreatedAt, memtable.MS(rec.CreatedAt))
				}
				return
			}
		}
	}
	t.Errorf("no entry of %s (token %s) due between %s and %s", rec.RequestID, rec.ClaimToken, lo.Format(time.StampMilli), hi.Format(time.StampMilli))
}

// requeueEntries counts the entries of rec's claim that fall due as a
// requeue between lo and hi makes them, and among them the pairs a
// completed requeue writes (one entry and another due 1 ms after it).
func (s *suite) requeueEntries(t *testing.T, rec ledger.Record, lo, hi time.Time) (n, pairs int) {
	t.Helper()
	lo, hi = lo.Add(ledger.RequeueLead-2*time.Second), hi.Add(ledger.RequeueLead+2*time.Second)
	due := map[int64]bool{}
	for b := ledger.BucketOf(lo); !b.After(hi); b = b.Add(ledger.BucketWidth) {
		for _, e := range s.entriesOf(t, rec.Key, ledger.ShardOf(rec.CreatedAt), b) {
			if e.ClaimToken == rec.ClaimToken && !e.NotBefore.Before(lo) && !e.NotBefore.After(hi) {
				n++
				due[e.NotBefore.UnixMilli()] = true
			}
		}
	}
	for ms := range due {
		if due[ms+1] {
			pairs++
		}
	}
	return n, pairs
}

// wantNoRequeueEntry checks no entry of key falls due as a requeue between
// lo and hi would make it.
func (s *suite) wantNoRequeueEntry(t *testing.T, rec ledger.Record, lo, hi time.Time) {
	t.Helper()
	lo, hi = lo.Add(ledger.RequeueLead-2*time.Second), hi.Add(ledger.RequeueLead+2*time.Second)
	for b := ledger.BucketOf(lo); !b.After(hi); b = b.Add(ledger.BucketWidth) {
		for _, e := range s.entriesOf(t, rec.Key, ledger.ShardOf(rec.CreatedAt), b) {
			if !e.NotBefore.Before(lo) && !e.NotBefore.After(hi) {
				t.Errorf("entry of %s due at %s, want none due now", rec.RequestID, e.NotBefore.Format(time.StampMilli))
			}
		}
	}
}

// arm makes the next times executions of statement fail with f.
func (s *suite) arm(statement cassandra.Stmt, f cassandra.Fault, times int) {
	s.Arm(statement, f, times)
}

// unsettled arms the settling reads to fail, every one of them.
func (s *suite) unsettled() { s.Arm(ledger.StmtGet, cassandra.FaultUnavailable, s.SettleAttempts) }

func wantKind(t *testing.T, what string, err error, kind fault.Kind) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: error nil, want kind %s", what, kind)
	}
	if got := fault.KindOf(err); got != kind {
		t.Fatalf("%s: error %v of kind %s, want kind %s", what, err, got, kind)
	}
}

func wantNotFound(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("%s: error %v, want ErrNotFound", what, err)
	}
}

// diff names the fields in which got differs from want ("" if none).
// Times compare as instants, blobs by content (nil and empty alike).
func diff(got, want ledger.Record) string {
	var d []string
	add := func(field string, g, w any) { d = append(d, fmt.Sprintf("%s %v, want %v", field, g, w)) }
	if got.Key != want.Key {
		add("key", got.Key, want.Key)
	}
	if got.EntityID != want.EntityID {
		add("entity id", got.EntityID, want.EntityID)
	}
	if got.Fingerprint != want.Fingerprint {
		add("fingerprint", got.Fingerprint, want.Fingerprint)
	}
	if !bytes.Equal(got.Command, want.Command) {
		add("command", string(got.Command), string(want.Command))
	}
	if got.TraceParent != want.TraceParent {
		add("trace parent", got.TraceParent, want.TraceParent)
	}
	if got.State != want.State {
		add("state", got.State, want.State)
	}
	if !got.CreatedAt.Equal(want.CreatedAt) {
		add("created_at", got.CreatedAt, want.CreatedAt)
	}
	if !got.CompletedAt.Equal(want.CompletedAt) {
		add("completed_at", got.CompletedAt, want.CompletedAt)
	}
	if !bytes.Equal(got.Outcome, want.Outcome) {
		add("outcome", string(got.Outcome), string(want.Outcome))
	}
	if got.Attempts != want.Attempts {
		add("attempts", got.Attempts, want.Attempts)
	}
	if got.LastError != want.LastError {
		add("last_error", got.LastError, want.LastError)
	}
	if got.ClaimToken != want.ClaimToken {
		add("claim token", got.ClaimToken, want.ClaimToken)
	}
	return strings.Join(d, "; ")
}

// pending is rec as its claim stores it.
func pending(rec ledger.Record) ledger.Record {
	rec.State, rec.Attempts, rec.LastError, rec.Outcome, rec.CompletedAt = ledger.Pending, 0, "", nil, time.Time{}
	return rec
}

// ---------------------------------------------------------------- claim

var claimCases = []testCase{
	{"Claim/applied: PENDING, attempts 0, entry first", func(t *testing.T, s *suite) {
		rec := s.record()
		rec.State, rec.Attempts = ledger.Complete, 7 // a claim ignores both
		won, got, err := s.Store.Claim(s.ctx, rec, nil)
		if err != nil || !won {
			t.Fatalf("Claim = won %v, err %v; want won", won, err)
		}
		if d := diff(got, pending(rec)); d != "" {
			t.Errorf("Claim returned: %s", d)
		}
		s.wantRow(t, pending(rec))
		peeked, err := s.Store.Peek(s.ctx, rec.Key)
		if err != nil || diff(peeked, pending(rec)) != "" {
			t.Errorf("Peek = %+v, %v; want the claimed row", peeked, err)
		}
		s.wantEntry(t, s.Store.ClaimEntry(rec))
	}},
	{"Claim/not applied: a duplicate gets the existing record; its entry goes", func(t *testing.T, s *suite) {
		first := s.claimed(t)
		dup := s.recordFor(first.Key)
		dup.Fingerprint = "sha256:v1:other"
		won, got, err := s.Store.Claim(s.ctx, dup, nil)
		if err != nil || won {
			t.Fatalf("duplicate Claim = won %v, err %v; want not won, no error", won, err)
		}
		if d := diff(got, first); d != "" {
			t.Errorf("duplicate Claim returned: %s", d)
		}
		s.wantRow(t, first)
		s.wantEntry(t, s.Store.ClaimEntry(first))
		s.wantNoEntry(t, s.Store.ClaimEntry(dup))
	}},
	{"Claim/concurrent, one partition: every claim wins, each with its entry (a store may write the entries as one batch)", func(t *testing.T, s *suite) {
		recs, won, errs := s.claimAllInOneShard(8)
		for i, rec := range recs {
			if errs[i] != nil || !won[i] {
				t.Errorf("Claim %d = won %v, %v; want won", i, won[i], errs[i])
				continue
			}
			s.wantRow(t, pending(rec))
			s.wantEntry(t, s.Store.ClaimEntry(rec))
		}
	}},
	{"Claim/concurrent, one partition, entry write refused: a claim whose entry failed is Unavailable and never sent", func(t *testing.T, s *suite) {
		s.arm(ledger.StmtEnqueue, cassandra.FaultUnavailable, 1)
		recs, won, errs := s.claimAllInOneShard(8)
		failed := 0
		for i, rec := range recs {
			switch {
			case errs[i] == nil && won[i]:
				s.wantRow(t, pending(rec))
				s.wantEntry(t, s.Store.ClaimEntry(rec))
			case errs[i] == nil:
				t.Errorf("Claim %d of a fresh key not won", i)
			default:
				failed++
				wantKind(t, "Claim", errs[i], fault.Unavailable)
				s.wantNoRow(t, rec.Key)
			}
		}
		if failed == 0 {
			t.Error("every Claim succeeded with a refused entry write armed")
		}
	}},
	{"Claim/concurrent: exactly one wins, every other gets its record", func(t *testing.T, s *suite) {
		key := s.key()
		const n = 8
		var (
			wg   sync.WaitGroup
			recs = make([]ledger.Record, n)
			won  = make([]bool, n)
			got  = make([]ledger.Record, n)
			errs = make([]error, n)
		)
		for i := range n {
			recs[i] = s.recordFor(key)
			wg.Add(1)
			go func() {
				defer wg.Done()
				won[i], got[i], errs[i] = s.Store.Claim(s.ctx, recs[i], nil)
			}()
		}
		wg.Wait()
		winner := -1
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("claim %d: %v", i, errs[i])
			}
			if won[i] {
				if winner >= 0 {
					t.Fatalf("claims %d and %d both won", winner, i)
				}
				winner = i
			}
		}
		if winner < 0 {
			t.Fatal("no claim won")
		}
		for i := range n {
			if got[i].ClaimToken != recs[winner].ClaimToken {
				t.Errorf("claim %d returned token %s, want the winner's %s", i, got[i].ClaimToken, recs[winner].ClaimToken)
			}
		}
		s.wantRow(t, pending(recs[winner]))
	}},
	{"Claim/unknown, lose-response: settled applied, won", func(t *testing.T, s *suite) {
		rec := s.record()
		s.arm(ledger.StmtClaim, cassandra.FaultLoseResponse, 1)
		won, got, err := s.Store.Claim(s.ctx, rec, nil)
		if err != nil || !won || got.ClaimToken != rec.ClaimToken {
			t.Fatalf("Claim = won %v, token %s, err %v; want won with its own token", won, got.ClaimToken, err)
		}
		s.wantRow(t, pending(rec))
		s.wantEntry(t, s.Store.ClaimEntry(rec))
	}},
	{"Claim/unknown, timeout: settled not applied, claimed again, won", func(t *testing.T, s *suite) {
		rec := s.record()
		s.arm(ledger.StmtClaim, cassandra.FaultTimeout, 1)
		won, got, err := s.Store.Claim(s.ctx, rec, nil)
		if err != nil || !won || got.ClaimToken != rec.ClaimToken {
			t.Fatalf("Claim = won %v, token %s, err %v; want won with its own token", won, got.ClaimToken, err)
		}
		s.wantRow(t, pending(rec))
	}},
	{"Claim/unknown, timeout on a duplicate: settled, the existing record; its entry goes", func(t *testing.T, s *suite) {
		first := s.claimed(t)
		dup := s.recordFor(first.Key)
		s.arm(ledger.StmtClaim, cassandra.FaultTimeout, 1)
		won, got, err := s.Store.Claim(s.ctx, dup, nil)
		if err != nil || won || got.ClaimToken != first.ClaimToken {
			t.Fatalf("Claim = won %v, token %s, err %v; want not won, the first claim's token", won, got.ClaimToken, err)
		}
		s.wantRow(t, first)
		s.wantNoEntry(t, s.Store.ClaimEntry(dup))
	}},
	{"Claim/unknown, timeout on every try: Unavailable, no row", func(t *testing.T, s *suite) {
		rec := s.record()
		s.arm(ledger.StmtClaim, cassandra.FaultTimeout, s.SettleAttempts)
		won, _, err := s.Store.Claim(s.ctx, rec, nil)
		wantKind(t, "Claim", err, fault.Unavailable)
		if won {
			t.Error("won with an error")
		}
		s.wantNoRow(t, rec.Key)
	}},
	{"Claim/unknown, applied but unsettled: OutcomeUnknown, never a win", func(t *testing.T, s *suite) {
		rec := s.record()
		s.arm(ledger.StmtClaim, cassandra.FaultLoseResponse, 1)
		s.unsettled()
		won, _, err := s.Store.Claim(s.ctx, rec, nil)
		wantKind(t, "Claim", err, fault.OutcomeUnknown)
		if won {
			t.Error("won with an unsettled outcome")
		}
		s.wantRow(t, pending(rec)) // it did apply: a retry finds it
	}},
	{"Claim/unknown, not applied and unsettled: OutcomeUnknown, no row", func(t *testing.T, s *suite) {
		rec := s.record()
		s.arm(ledger.StmtClaim, cassandra.FaultTimeout, 1)
		s.unsettled()
		won, _, err := s.Store.Claim(s.ctx, rec, nil)
		wantKind(t, "Claim", err, fault.OutcomeUnknown)
		if won {
			t.Error("won with an unsettled outcome")
		}
		s.wantNoRow(t, rec.Key)
	}},
	{"Claim/unavailable: Unavailable, no row, the entry written first stays", func(t *testing.T, s *suite) {
		rec := s.record()
		s.arm(ledger.StmtClaim, cassandra.FaultUnavailable, 1)
		_, _, err := s.Store.Claim(s.ctx, rec, nil)
		wantKind(t, "Claim", err, fault.Unavailable)
		s.wantNoRow(t, rec.Key)
		s.wantEntry(t, s.Store.ClaimEntry(rec))
	}},
	{"Claim/entry refused: Unavailable, no row, no entry", func(t *testing.T, s *suite) {
		rec := s.record()
		s.arm(ledger.StmtEnqueue, cassandra.FaultUnavailable, 1)
		_, _, err := s.Store.Claim(s.ctx, rec, nil)
		wantKind(t, "Claim", err, fault.Unavailable)
		s.wantNoRow(t, rec.Key)
		s.wantNoEntry(t, s.Store.ClaimEntry(rec))
	}},
	{"Claim/entry timed out: an error, no row", func(t *testing.T, s *suite) {
		rec := s.record()
		s.arm(ledger.StmtEnqueue, cassandra.FaultTimeout, 1)
		_, _, err := s.Store.Claim(s.ctx, rec, nil)
		// The claim was never sent: for the request, definitely not applied.
		wantKind(t, "Claim", err, fault.Unavailable)
		s.wantNoRow(t, rec.Key)
		s.wantNoEntry(t, s.Store.ClaimEntry(rec))
	}},
	{"Claim/check fails: its error, the claim never sent, the entry written for the caller to release", func(t *testing.T, s *suite) {
		rec := s.record()
		stop := errors.New("check: the outcome is recorded")
		ran := false
		_, _, err := s.Store.Claim(s.ctx, rec, func(context.Context) error { ran = true; return stop })
		if !ran || !errors.Is(err, stop) {
			t.Fatalf("Claim = %v (check ran: %v); want the check's error", err, ran)
		}
		s.wantNoRow(t, rec.Key)
		s.wantEntry(t, s.Store.ClaimEntry(rec))
		if err := s.Store.Release(s.ctx, rec); err != nil {
			t.Fatalf("Release: %v", err)
		}
		s.wantNoEntry(t, s.Store.ClaimEntry(rec))
	}},
	{"Claim/check fails and the entry is refused: the check's error wins", func(t *testing.T, s *suite) {
		rec := s.record()
		stop := errors.New("check: the outcome is recorded")
		s.arm(ledger.StmtEnqueue, cassandra.FaultUnavailable, 1)
		_, _, err := s.Store.Claim(s.ctx, rec, func(context.Context) error { return stop })
		if !errors.Is(err, stop) {
			t.Fatalf("Claim = %v; want the check's error", err)
		}
		s.wantNoRow(t, rec.Key)
	}},
	{"Claim/check passes, the entry is refused: Unavailable, no row", func(t *testing.T, s *suite) {
		rec := s.record()
		s.arm(ledger.StmtEnqueue, cassandra.FaultUnavailable, 1)
		_, _, err := s.Store.Claim(s.ctx, rec, func(context.Context) error { return nil })
		wantKind(t, "Claim", err, fault.Unavailable)
		s.wantNoRow(t, rec.Key)
	}},
	{"Claim/check passes: claimed as without one", func(t *testing.T, s *suite) {
		rec := s.record()
		won, got, err := s.Store.Claim(s.ctx, rec, func(context.Context) error { return nil })
		if err != nil || !won || got.ClaimToken != rec.ClaimToken {
			t.Fatalf("Claim = won %v, err %v; want won", won, err)
		}
		s.wantRow(t, pending(rec))
		s.wantEntry(t, s.Store.ClaimEntry(rec))
	}},
}

// ---------------------------------------------------------------- get

var getCases = []testCase{
	{"Get/no row: ErrNotFound from Get and Peek", func(t *testing.T, s *suite) {
		key := s.key()
		_, err := s.Store.Get(s.ctx, key)
		wantNotFound(t, "Get", err)
		_, err = s.Store.Peek(s.ctx, key)
		wantNotFound(t, "Peek", err)
	}},
	{"Get/unavailable: Unavailable from Get and Peek", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		s.arm(ledger.StmtGet, cassandra.FaultUnavailable, 1)
		_, err := s.Store.Get(s.ctx, rec.Key)
		wantKind(t, "Get", err, fault.Unavailable)
		s.arm(ledger.StmtGet, cassandra.FaultTimeout, 1)
		_, err = s.Store.Peek(s.ctx, rec.Key)
		wantKind(t, "Peek", err, fault.Unavailable)
	}},
	{"Peek/concurrent: each gets its own row, another key's nothing", func(t *testing.T, s *suite) {
		// Peeks that meet may share one query (Ledger.Peek): each
		// must still get exactly its own row, a key asked for twice
		// included; the same request id under another operation or tenant
		// is another request.
		var recs []ledger.Record
		for range 10 {
			recs = append(recs, s.claimed(t))
		}
		type peek struct {
			key  ledger.Key
			want *ledger.Record // nil: ErrNotFound
		}
		var peeks []peek
		for i := range recs {
			rec := &recs[i]
			otherOp, otherTenant := rec.Key, rec.Key
			otherOp.Operation, otherTenant.Tenant = "CancelOrder", rec.Key.Tenant+"-other"
			peeks = append(peeks, peek{rec.Key, rec}, peek{rec.Key, rec}, peek{otherOp, nil}, peek{otherTenant, nil}, peek{s.key(), nil})
		}
		got := make([]ledger.Record, len(peeks))
		errs := make([]error, len(peeks))
		var wg sync.WaitGroup
		for i, p := range peeks {
			wg.Go(func() { got[i], errs[i] = s.Store.Peek(s.ctx, p.key) })
		}
		wg.Wait()
		for i, p := range peeks {
			if p.want == nil {
				wantNotFound(t, fmt.Sprintf("Peek %d of %+v", i, p.key), errs[i])
				continue
			}
			if errs[i] != nil || diff(got[i], *p.want) != "" {
				t.Errorf("Peek %d = %+v, %v; want %+v", i, got[i], errs[i], *p.want)
			}
		}
	}},
	{"Peek/concurrent, one read times out: only the peeks it held fail", func(t *testing.T, s *suite) {
		var recs []ledger.Record
		for range 16 {
			recs = append(recs, s.claimed(t))
		}
		s.arm(ledger.StmtGet, cassandra.FaultTimeout, 1)
		got := make([]ledger.Record, len(recs))
		errs := make([]error, len(recs))
		var wg sync.WaitGroup
		for i, rec := range recs {
			wg.Go(func() { got[i], errs[i] = s.Store.Peek(s.ctx, rec.Key) })
		}
		wg.Wait()
		failed := 0
		for i, rec := range recs {
			if errs[i] != nil {
				failed++
				wantKind(t, fmt.Sprintf("Peek %d", i), errs[i], fault.Unavailable)
				continue
			}
			if d := diff(got[i], rec); d != "" {
				t.Errorf("Peek %d: %s", i, d)
			}
		}
		if failed == 0 {
			t.Error("no concurrent Peek failed, want the peeks in the failed read to")
		}
	}},
}

// ---------------------------------------------------------------- release

var releaseCases = []testCase{
	{"Release: the claim's entry goes, the claim stays PENDING", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		s.wantEntry(t, s.Store.ClaimEntry(rec))
		if err := s.Store.Release(s.ctx, rec); err != nil {
			t.Fatalf("Release: %v", err)
		}
		s.wantNoEntry(t, s.Store.ClaimEntry(rec))
		s.wantRow(t, pending(rec))
		if err := s.Store.Release(s.ctx, rec); err != nil { // again: nothing left to remove
			t.Errorf("second Release: %v", err)
		}
	}},
	{"Release/unavailable: Unavailable, the entry kept for the reconciler", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		s.arm(ledger.StmtRemove, cassandra.FaultUnavailable, 1)
		wantKind(t, "Release", s.Store.Release(s.ctx, rec), fault.Unavailable)
		s.wantEntry(t, s.Store.ClaimEntry(rec))
		s.wantRow(t, pending(rec))
	}},
	{"Release/concurrent, one partition: every entry goes (a store may write them as one batch)", func(t *testing.T, s *suite) {
		recs := s.claimedInOneShard(t, 6)
		errs := s.releaseAll(recs)
		for i, rec := range recs {
			if errs[i] != nil {
				t.Errorf("Release %d: %v", i, errs[i])
			}
			s.wantNoEntry(t, s.Store.ClaimEntry(rec))
			s.wantRow(t, pending(rec))
		}
	}},
	{"Release/concurrent, refused: a Release that fails keeps its entry, one that returns nil removed it", func(t *testing.T, s *suite) {
		recs := s.claimedInOneShard(t, 6)
		s.arm(ledger.StmtRemove, cassandra.FaultUnavailable, 1)
		errs := s.releaseAll(recs)
		failed := 0
		for i, rec := range recs {
			switch {
			case errs[i] == nil:
				s.wantNoEntry(t, s.Store.ClaimEntry(rec))
			default:
				failed++
				wantKind(t, "Release", errs[i], fault.Unavailable)
				s.wantEntry(t, s.Store.ClaimEntry(rec))
			}
		}
		if failed == 0 {
			t.Error("every Release succeeded with a refusal armed")
		}
	}},
	{"Release/unknown: OutcomeUnknown; either way a retry settles it", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		s.arm(ledger.StmtRemove, cassandra.FaultTimeout, 1)
		wantKind(t, "Release", s.Store.Release(s.ctx, rec), fault.OutcomeUnknown)
		if err := s.Store.Release(s.ctx, rec); err != nil {
			t.Fatalf("Release again: %v", err)
		}
		s.wantNoEntry(t, s.Store.ClaimEntry(rec))
	}},
}

// ---------------------------------------------------------------- attempt

var attemptCases = []testCase{
	{"RecordAttempt/applied: attempts count failed attempts, last_error the reason", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		if err := s.Store.RecordAttempt(s.ctx, rec, "CLUSTER_UNAVAILABLE"); err != nil {
			t.Fatalf("RecordAttempt: %v", err)
		}
		want := pending(rec)
		want.Attempts, want.LastError = 1, "CLUSTER_UNAVAILABLE"
		s.wantRow(t, want)
		if err := s.Store.RecordAttempt(s.ctx, want, "OUTCOME_UNKNOWN"); err != nil {
			t.Fatalf("second RecordAttempt: %v", err)
		}
		want.Attempts, want.LastError = 2, "OUTCOME_UNKNOWN"
		s.wantRow(t, want)
	}},
	{"RecordAttempt/lost race: no error, nothing changed", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		if err := s.Store.RecordAttempt(s.ctx, rec, "FIRST"); err != nil {
			t.Fatal(err)
		}
		noted := s.get(t, rec.Key)
		if err := s.Store.RecordAttempt(s.ctx, rec, "SECOND"); err != nil { // rec still says attempts 0
			t.Errorf("RecordAttempt that lost the race: %v, want nil", err)
		}
		s.wantRow(t, noted)

		done := s.complete(t, noted)
		if err := s.Store.RecordAttempt(s.ctx, noted, "LATE"); err != nil {
			t.Errorf("RecordAttempt on a COMPLETE request: %v, want nil", err)
		}
		s.wantRow(t, done)

		if err := s.Store.RecordAttempt(s.ctx, s.record(), "NOBODY"); err != nil {
			t.Errorf("RecordAttempt of a claim never made: %v, want nil", err)
		}
	}},
	{"RecordAttempt/stale claim token: no error, the newer claim unchanged", func(t *testing.T, s *suite) {
		old := s.claimed(t)
		newer := s.stale(t, old)
		if err := s.Store.RecordAttempt(s.ctx, old, "STALE"); err != nil {
			t.Errorf("RecordAttempt of the stale claim: %v, want nil", err)
		}
		s.wantRow(t, newer)
	}},
	{"RecordAttempt/unknown, lose-response: settled, noted once", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		s.arm(ledger.StmtAttempt, cassandra.FaultLoseResponse, 1)
		if err := s.Store.RecordAttempt(s.ctx, rec, "R"); err != nil {
			t.Fatalf("RecordAttempt: %v", err)
		}
		want := pending(rec)
		want.Attempts, want.LastError = 1, "R"
		s.wantRow(t, want)
	}},
	{"RecordAttempt/unknown, timeout: re-sent, noted once", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		s.arm(ledger.StmtAttempt, cassandra.FaultTimeout, 1)
		if err := s.Store.RecordAttempt(s.ctx, rec, "R"); err != nil {
			t.Fatalf("RecordAttempt: %v", err)
		}
		want := pending(rec)
		want.Attempts, want.LastError = 1, "R"
		s.wantRow(t, want)
	}},
	{"RecordAttempt/unknown, timeout on every try: Unavailable, nothing noted", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		s.arm(ledger.StmtAttempt, cassandra.FaultTimeout, s.SettleAttempts)
		wantKind(t, "RecordAttempt", s.Store.RecordAttempt(s.ctx, rec, "R"), fault.Unavailable)
		s.wantRow(t, pending(rec))
	}},
	{"RecordAttempt/unknown, unsettled: OutcomeUnknown", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		s.arm(ledger.StmtAttempt, cassandra.FaultTimeout, 1)
		s.unsettled()
		wantKind(t, "RecordAttempt", s.Store.RecordAttempt(s.ctx, rec, "R"), fault.OutcomeUnknown)
		s.wantRow(t, pending(rec))
	}},
	{"RecordAttempt/unavailable: Unavailable, nothing noted", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		s.arm(ledger.StmtAttempt, cassandra.FaultUnavailable, 1)
		wantKind(t, "RecordAttempt", s.Store.RecordAttempt(s.ctx, rec, "R"), fault.Unavailable)
		s.wantRow(t, pending(rec))
	}},
}

// ---------------------------------------------------------------- complete (a change's conflict receipt)

// receipt is the outcome the Complete cases record.
var receipt = []byte(`{"reason":"STALE_VERSION","current_version":9}`)

// wantCompleted checks a Complete result and the row.
func (s *suite) wantCompleted(t *testing.T, got, rec ledger.Record, outcome []byte, lo, hi time.Time) {
	t.Helper()
	if got.CompletedAt.Before(memtable.MS(lo).Add(-2*time.Second)) || got.CompletedAt.After(hi.Add(2*time.Second)) {
		t.Errorf("Complete returned completed_at %s; want between %s and %s", got.CompletedAt, lo, hi)
	}
	want := rec
	want.State, want.Outcome, want.CompletedAt = ledger.Complete, outcome, got.CompletedAt
	if d := diff(got, want); d != "" {
		t.Errorf("Complete returned: %s", d)
	}
	s.wantRow(t, want)
}

var completeCases = []testCase{
	{"Complete/applied: COMPLETE with the outcome; attempts and last error kept", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		if err := s.Store.RecordAttempt(s.ctx, rec, "CLUSTER_UNAVAILABLE"); err != nil {
			t.Fatal(err)
		}
		rec = s.get(t, rec.Key)
		lo := s.Now()
		got, err := s.Store.Complete(s.ctx, rec, receipt)
		if err != nil {
			t.Fatalf("Complete: %v", err)
		}
		s.wantCompleted(t, got, rec, receipt, lo, s.Now())
	}},
	{"Complete/not applied, completed by another finisher: its outcome", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		first, err := s.Store.Complete(s.ctx, rec, receipt)
		if err != nil {
			t.Fatalf("first Complete: %v", err)
		}
		got, err := s.Store.Complete(s.ctx, rec, []byte(`{"reason":"STALE_VERSION","current_version":10}`))
		if err != nil {
			t.Fatalf("second Complete: %v", err)
		}
		if d := diff(got, first); d != "" {
			t.Errorf("second Complete returned: %s", d)
		}
		s.wantRow(t, first)
	}},
	{"Complete/not applied, stale claim token: the newer claim, unchanged", func(t *testing.T, s *suite) {
		old := s.claimed(t)
		newer := s.stale(t, old)
		got, err := s.Store.Complete(s.ctx, old, receipt)
		if err != nil {
			t.Fatalf("Complete: %v", err)
		}
		if d := diff(got, newer); d != "" {
			t.Errorf("Complete returned: %s", d)
		}
		s.wantRow(t, newer)
	}},
	{"Complete/not applied, claim gone: ErrNotFound", func(t *testing.T, s *suite) {
		_, err := s.Store.Complete(s.ctx, s.record(), receipt)
		wantNotFound(t, "Complete", err)
	}},
	{"Complete/unknown, lose-response: settled, COMPLETE", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		s.arm(ledger.StmtComplete, cassandra.FaultLoseResponse, 1)
		lo := s.Now()
		got, err := s.Store.Complete(s.ctx, rec, receipt)
		if err != nil {
			t.Fatalf("Complete: %v", err)
		}
		s.wantCompleted(t, got, rec, receipt, lo, s.Now())
	}},
	{"Complete/unknown, timeout: re-sent, COMPLETE", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		s.arm(ledger.StmtComplete, cassandra.FaultTimeout, 1)
		lo := s.Now()
		got, err := s.Store.Complete(s.ctx, rec, receipt)
		if err != nil {
			t.Fatalf("Complete: %v", err)
		}
		s.wantCompleted(t, got, rec, receipt, lo, s.Now())
	}},
	{"Complete/unknown and unsettled: OutcomeUnknown, never a record", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		s.arm(ledger.StmtComplete, cassandra.FaultTimeout, 1)
		s.unsettled()
		got, err := s.Store.Complete(s.ctx, rec, receipt)
		wantKind(t, "Complete", err, fault.OutcomeUnknown)
		if got.State != "" {
			t.Errorf("Complete returned a %s record with its error", got.State)
		}
		s.wantRow(t, pending(rec))
	}},
}

// ---------------------------------------------------------------- fail (dead letter)

// wantFailed checks a MarkFailed result and the row.
func (s *suite) wantFailed(t *testing.T, got, rec ledger.Record, reason string, lo, hi time.Time) {
	t.Helper()
	if got.State != ledger.Failed || got.LastError != reason || got.Attempts != rec.Attempts+1 ||
		got.CompletedAt.Before(memtable.MS(lo).Add(-2*time.Second)) || got.CompletedAt.After(hi.Add(2*time.Second)) {
		t.Errorf("MarkFailed returned %s, last_error %q, attempts %d, completed_at %s; want FAILED, %q, %d, between %s and %s",
			got.State, got.LastError, got.Attempts, got.CompletedAt, reason, rec.Attempts+1, lo, hi)
	}
	want := rec
	want.State, want.LastError, want.Attempts, want.CompletedAt = ledger.Failed, reason, rec.Attempts+1, got.CompletedAt
	if d := diff(got, want); d != "" {
		t.Errorf("MarkFailed returned: %s", d)
	}
	s.wantRow(t, want)
}

var failCases = []testCase{
	{"MarkFailed/applied: FAILED with the reason, attempts+1", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		if err := s.Store.RecordAttempt(s.ctx, rec, "CLUSTER_UNAVAILABLE"); err != nil {
			t.Fatal(err)
		}
		rec = s.get(t, rec.Key)
		lo := s.Now()
		got, err := s.Store.MarkFailed(s.ctx, rec, "COMMAND_UNREADABLE")
		if err != nil {
			t.Fatalf("MarkFailed: %v", err)
		}
		s.wantFailed(t, got, rec, "COMMAND_UNREADABLE", lo, s.Now())
	}},
	{"MarkFailed/not applied, COMPLETE: the COMPLETE record", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		done := s.complete(t, rec)
		got, err := s.Store.MarkFailed(s.ctx, rec, "COMMAND_UNREADABLE")
		if err != nil {
			t.Fatalf("MarkFailed: %v", err)
		}
		if d := diff(got, done); d != "" {
			t.Errorf("MarkFailed returned: %s", d)
		}
		s.wantRow(t, done)
	}},
	{"MarkFailed/not applied, stale claim token: the newer claim, unchanged", func(t *testing.T, s *suite) {
		old := s.claimed(t)
		newer := s.stale(t, old)
		got, err := s.Store.MarkFailed(s.ctx, old, "COMMAND_UNREADABLE")
		if err != nil {
			t.Fatalf("MarkFailed: %v", err)
		}
		if d := diff(got, newer); d != "" {
			t.Errorf("MarkFailed returned: %s", d)
		}
		s.wantRow(t, newer)
	}},
	{"MarkFailed/not applied, claim gone: ErrNotFound", func(t *testing.T, s *suite) {
		_, err := s.Store.MarkFailed(s.ctx, s.record(), "COMMAND_UNREADABLE")
		wantNotFound(t, "MarkFailed", err)
	}},
	{"MarkFailed/unknown, lose-response: settled, FAILED", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		s.arm(ledger.StmtFail, cassandra.FaultLoseResponse, 1)
		lo := s.Now()
		got, err := s.Store.MarkFailed(s.ctx, rec, "COMMAND_UNREADABLE")
		if err != nil {
			t.Fatalf("MarkFailed: %v", err)
		}
		s.wantFailed(t, got, rec, "COMMAND_UNREADABLE", lo, s.Now())
	}},
	{"MarkFailed/unknown, timeout: re-sent, FAILED", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		s.arm(ledger.StmtFail, cassandra.FaultTimeout, 1)
		lo := s.Now()
		got, err := s.Store.MarkFailed(s.ctx, rec, "COMMAND_UNREADABLE")
		if err != nil {
			t.Fatalf("MarkFailed: %v", err)
		}
		s.wantFailed(t, got, rec, "COMMAND_UNREADABLE", lo, s.Now())
	}},
	{"MarkFailed/unknown, timeout on every try: Unavailable, still PENDING", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		s.arm(ledger.StmtFail, cassandra.FaultTimeout, s.SettleAttempts)
		got, err := s.Store.MarkFailed(s.ctx, rec, "COMMAND_UNREADABLE")
		wantKind(t, "MarkFailed", err, fault.Unavailable)
		if got.State != "" {
			t.Errorf("MarkFailed returned a %s record with its error", got.State)
		}
		s.wantRow(t, pending(rec))
	}},
	// A defect this guards against: an unsettled dead letter answered as a PENDING
	// record with a nil error made the reconciler drop the request's entry.
	{"MarkFailed/unknown, not applied and unsettled: an error, never a PENDING record", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		s.arm(ledger.StmtFail, cassandra.FaultTimeout, 1)
		s.unsettled()
		got, err := s.Store.MarkFailed(s.ctx, rec, "COMMAND_UNREADABLE")
		if err == nil {
			t.Fatalf("MarkFailed = %s record, nil error; want an OutcomeUnknown error", got.State)
		}
		wantKind(t, "MarkFailed", err, fault.OutcomeUnknown)
		if got.State != "" {
			t.Errorf("MarkFailed returned a %s record with its error", got.State)
		}
		s.wantRow(t, pending(rec))
	}},
	{"MarkFailed/unknown, applied and unsettled: an error; the row is FAILED", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		s.arm(ledger.StmtFail, cassandra.FaultLoseResponse, 1)
		s.unsettled()
		got, err := s.Store.MarkFailed(s.ctx, rec, "COMMAND_UNREADABLE")
		wantKind(t, "MarkFailed", err, fault.OutcomeUnknown)
		if got.State != "" {
			t.Errorf("MarkFailed returned a %s record with its error", got.State)
		}
		s.wantState(t, rec.Key, ledger.Failed)
	}},
	{"MarkFailed/unavailable: Unavailable, still PENDING", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		s.arm(ledger.StmtFail, cassandra.FaultUnavailable, 1)
		_, err := s.Store.MarkFailed(s.ctx, rec, "COMMAND_UNREADABLE")
		wantKind(t, "MarkFailed", err, fault.Unavailable)
		s.wantRow(t, pending(rec))
	}},
}

// ---------------------------------------------------------------- withdraw

var withdrawCases = []testCase{
	{"Withdraw/applied: the row and its entry go; the request id is free again", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		_, err := s.Store.Withdraw(s.ctx, rec)
		wantNotFound(t, "Withdraw", err)
		s.wantNoRow(t, rec.Key)
		s.wantNoEntry(t, s.Store.ClaimEntry(rec))
		again := s.mustClaim(t, s.recordFor(rec.Key))
		s.wantRow(t, pending(again))
	}},
	{"Withdraw/not applied, COMPLETE: the COMPLETE record, unchanged", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		done := s.complete(t, rec)
		got, err := s.Store.Withdraw(s.ctx, rec)
		if err != nil {
			t.Fatalf("Withdraw: %v", err)
		}
		if d := diff(got, done); d != "" {
			t.Errorf("Withdraw returned: %s", d)
		}
		s.wantRow(t, done)
	}},
	{"Withdraw/not applied, stale claim token: the newer claim, unchanged", func(t *testing.T, s *suite) {
		old := s.claimed(t)
		newer := s.stale(t, old)
		got, err := s.Store.Withdraw(s.ctx, old)
		if err != nil {
			t.Fatalf("Withdraw: %v", err)
		}
		if d := diff(got, newer); d != "" {
			t.Errorf("Withdraw returned: %s", d)
		}
		s.wantRow(t, newer)
		s.wantEntry(t, s.Store.ClaimEntry(newer))
	}},
	{"Withdraw/not applied, gone: ErrNotFound", func(t *testing.T, s *suite) {
		_, err := s.Store.Withdraw(s.ctx, s.record())
		wantNotFound(t, "Withdraw", err)
	}},
	{"Withdraw/unknown, lose-response: settled, gone", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		s.arm(ledger.StmtWithdraw, cassandra.FaultLoseResponse, 1)
		_, err := s.Store.Withdraw(s.ctx, rec)
		wantNotFound(t, "Withdraw", err)
		s.wantNoRow(t, rec.Key)
		s.wantNoEntry(t, s.Store.ClaimEntry(rec))
	}},
	{"Withdraw/unknown, timeout: re-sent, gone", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		s.arm(ledger.StmtWithdraw, cassandra.FaultTimeout, 1)
		_, err := s.Store.Withdraw(s.ctx, rec)
		wantNotFound(t, "Withdraw", err)
		s.wantNoRow(t, rec.Key)
		s.wantNoEntry(t, s.Store.ClaimEntry(rec))
	}},
	{"Withdraw/unknown, timeout on every try: Unavailable, still PENDING", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		s.arm(ledger.StmtWithdraw, cassandra.FaultTimeout, s.SettleAttempts)
		_, err := s.Store.Withdraw(s.ctx, rec)
		wantKind(t, "Withdraw", err, fault.Unavailable)
		s.wantRow(t, pending(rec))
		s.wantEntry(t, s.Store.ClaimEntry(rec))
	}},
	{"Withdraw/unknown, unsettled: OutcomeUnknown", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		s.arm(ledger.StmtWithdraw, cassandra.FaultTimeout, 1)
		s.unsettled()
		_, err := s.Store.Withdraw(s.ctx, rec)
		wantKind(t, "Withdraw", err, fault.OutcomeUnknown)
		s.wantRow(t, pending(rec))
	}},
	{"Withdraw/unavailable: Unavailable, still PENDING with its entry", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		s.arm(ledger.StmtWithdraw, cassandra.FaultUnavailable, 1)
		_, err := s.Store.Withdraw(s.ctx, rec)
		wantKind(t, "Withdraw", err, fault.Unavailable)
		s.wantRow(t, pending(rec))
		s.wantEntry(t, s.Store.ClaimEntry(rec))
	}},
}

// ---------------------------------------------------------------- requeue

// failedClaim is a claimed request, one failed attempt noted, then FAILED.
func (s *suite) failedClaim(t *testing.T) ledger.Record {
	t.Helper()
	rec := s.claimed(t)
	if err := s.Store.RecordAttempt(s.ctx, rec, "CLUSTER_UNAVAILABLE"); err != nil {
		t.Fatal(err)
	}
	return s.fail(t, s.get(t, rec.Key), "COMMAND_UNREADABLE")
}

// requeued is rec (FAILED) as Requeue leaves it.
func requeued(rec ledger.Record) ledger.Record {
	rec.State, rec.Attempts, rec.CompletedAt = ledger.Pending, 0, time.Time{}
	return rec
}

var requeueCases = []testCase{
	{"Requeue/applied: FAILED to PENDING, attempts 0, an entry due shortly", func(t *testing.T, s *suite) {
		failed := s.failedClaim(t)
		lo := s.Now()
		got, err := s.Store.Requeue(s.ctx, failed.Key)
		hi := s.Now()
		if err != nil {
			t.Fatalf("Requeue: %v", err)
		}
		want := requeued(failed)
		if d := diff(got, want); d != "" {
			t.Errorf("Requeue returned: %s", d)
		}
		s.wantRow(t, want)
		s.wantRequeueEntry(t, failed, lo, hi)
		if n, pairs := s.requeueEntries(t, failed, lo, hi); n != 2 || pairs != 1 {
			t.Errorf("%d entries (%d pairs) due from the requeue, want 2, due 1 ms apart (before and after the LWT)", n, pairs)
		}
	}},
	{"Requeue/PENDING: unchanged, only entries due shortly added", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		lo := s.Now()
		got, err := s.Store.Requeue(s.ctx, rec.Key)
		hi := s.Now()
		if err != nil {
			t.Fatalf("Requeue: %v", err)
		}
		if d := diff(got, pending(rec)); d != "" {
			t.Errorf("Requeue returned: %s", d)
		}
		s.wantRow(t, pending(rec))
		s.wantRequeueEntry(t, rec, lo, hi)
	}},
	{"Requeue/COMPLETE: unchanged, no entry", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		done := s.complete(t, rec)
		lo := s.Now()
		got, err := s.Store.Requeue(s.ctx, rec.Key)
		hi := s.Now()
		if err != nil {
			t.Fatalf("Requeue: %v", err)
		}
		if d := diff(got, done); d != "" {
			t.Errorf("Requeue returned: %s", d)
		}
		s.wantRow(t, done)
		s.wantNoRequeueEntry(t, rec, lo, hi)
		s.wantNoEntry(t, s.Store.ClaimEntry(rec))
	}},
	{"Requeue/not applied, requeued meanwhile: PENDING as the other requeue left it", func(t *testing.T, s *suite) {
		// An operator's second requeue of the same request lands between
		// this one's read (FAILED) and its LWT: the LWT finds the row
		// PENDING, and this requeue answers the row as it now is.
		failed := s.failedClaim(t)
		var (
			other    ledger.Record
			otherErr error
		)
		s.Before(ledger.StmtRequeue, func() { other, otherErr = s.Store.Requeue(s.ctx, failed.Key) })
		s.arm(ledger.StmtRequeue, cassandra.FaultPass, 2) // counts both LWTs
		lo := s.Now()
		got, err := s.Store.Requeue(s.ctx, failed.Key)
		hi := s.Now()
		if otherErr != nil || err != nil {
			t.Fatalf("Requeue: %v; the one in between: %v", err, otherErr)
		}
		if n := s.Pending(ledger.StmtRequeue); n != 0 {
			t.Fatalf("%d of the two requeue LWTs were not sent", n)
		}
		want := requeued(failed)
		if d := diff(other, want); d != "" {
			t.Errorf("the requeue in between returned: %s", d)
		}
		if d := diff(got, want); d != "" {
			t.Errorf("Requeue returned: %s", d)
		}
		s.wantRow(t, want)
		s.wantRequeueEntry(t, failed, lo, hi)
	}},
	{"Requeue/no row: ErrNotFound", func(t *testing.T, s *suite) {
		_, err := s.Store.Requeue(s.ctx, s.key())
		wantNotFound(t, "Requeue", err)
	}},
	{"Requeue/unavailable: Unavailable, still FAILED, the entry already written", func(t *testing.T, s *suite) {
		failed := s.failedClaim(t)
		s.arm(ledger.StmtRequeue, cassandra.FaultUnavailable, 1)
		lo := s.Now()
		_, err := s.Store.Requeue(s.ctx, failed.Key)
		hi := s.Now()
		wantKind(t, "Requeue", err, fault.Unavailable)
		s.wantRow(t, failed)
		s.wantRequeueEntry(t, failed, lo, hi)
	}},
	{"Requeue/applied: a second entry, in another row, written after the LWT", func(t *testing.T, s *suite) {
		// Model finding 1: a reconciler that read the first entry while the
		// row was FAILED removes it, possibly after the LWT; the second
		// entry is one it cannot have decided on.
		failed := s.failedClaim(t)
		s.arm(ledger.StmtEnqueue, cassandra.FaultPass, 1)
		s.arm(ledger.StmtEnqueue, cassandra.FaultUnavailable, 1)
		lo := s.Now()
		_, err := s.Store.Requeue(s.ctx, failed.Key)
		hi := s.Now()
		wantKind(t, "Requeue (second entry refused)", err, fault.Unavailable)
		s.wantRow(t, requeued(failed)) // the LWT ran between the two entries
		if n, pairs := s.requeueEntries(t, failed, lo, hi); n != 1 || pairs != 0 {
			t.Errorf("%d entries (%d pairs) after the second was refused, want the first alone", n, pairs)
		}
		// At least 2 ms later: else the first entry and the next pair can
		// fall due 1 ms apart and count as a pair of their own.
		time.Sleep(2 * time.Millisecond)
		if _, err := s.Store.Requeue(s.ctx, failed.Key); err != nil { // as the error says: run it again
			t.Fatalf("Requeue again: %v", err)
		}
		if _, pairs := s.requeueEntries(t, failed, lo, s.Now()); pairs != 1 {
			t.Errorf("%d pairs of entries after requeueing the PENDING request again, want 1", pairs)
		}
	}},
	{"Requeue/entry refused: an error, still FAILED", func(t *testing.T, s *suite) {
		failed := s.failedClaim(t)
		s.arm(ledger.StmtEnqueue, cassandra.FaultUnavailable, 1)
		_, err := s.Store.Requeue(s.ctx, failed.Key)
		wantKind(t, "Requeue", err, fault.Unavailable)
		s.wantRow(t, failed)
	}},
	{"Requeue/cluster clock unreadable: Unavailable, nothing written", func(t *testing.T, s *suite) {
		failed := s.failedClaim(t)
		s.arm(ledger.StmtClusterNow, cassandra.FaultUnavailable, 1)
		lo := s.Now()
		_, err := s.Store.Requeue(s.ctx, failed.Key)
		hi := s.Now()
		wantKind(t, "Requeue", err, fault.Unavailable)
		s.wantRow(t, failed)
		s.wantNoRequeueEntry(t, failed, lo, hi)
	}},
	{"Requeue/unknown, lose-response: settled, PENDING", func(t *testing.T, s *suite) {
		failed := s.failedClaim(t)
		s.arm(ledger.StmtRequeue, cassandra.FaultLoseResponse, 1)
		got, err := s.Store.Requeue(s.ctx, failed.Key)
		if err != nil {
			t.Fatalf("Requeue: %v", err)
		}
		if d := diff(got, requeued(failed)); d != "" {
			t.Errorf("Requeue returned: %s", d)
		}
		s.wantRow(t, requeued(failed))
	}},
	{"Requeue/unknown, timeout: re-sent, PENDING", func(t *testing.T, s *suite) {
		failed := s.failedClaim(t)
		s.arm(ledger.StmtRequeue, cassandra.FaultTimeout, 1)
		got, err := s.Store.Requeue(s.ctx, failed.Key)
		if err != nil {
			t.Fatalf("Requeue: %v", err)
		}
		if d := diff(got, requeued(failed)); d != "" {
			t.Errorf("Requeue returned: %s", d)
		}
		s.wantRow(t, requeued(failed))
	}},
	{"Requeue/unknown, unsettled: OutcomeUnknown, still FAILED, the entry already written", func(t *testing.T, s *suite) {
		failed := s.failedClaim(t)
		s.arm(ledger.StmtGet, cassandra.FaultPass, 1) // Requeue's own read of the request
		s.arm(ledger.StmtRequeue, cassandra.FaultTimeout, 1)
		s.arm(ledger.StmtGet, cassandra.FaultUnavailable, s.SettleAttempts)
		lo := s.Now()
		_, err := s.Store.Requeue(s.ctx, failed.Key)
		hi := s.Now()
		wantKind(t, "Requeue", err, fault.OutcomeUnknown)
		s.wantRow(t, failed)
		s.wantRequeueEntry(t, failed, lo, hi)
	}},
	{"Requeue/unknown, timeout on every try: Unavailable, still FAILED", func(t *testing.T, s *suite) {
		failed := s.failedClaim(t)
		s.arm(ledger.StmtRequeue, cassandra.FaultTimeout, s.SettleAttempts)
		_, err := s.Store.Requeue(s.ctx, failed.Key)
		wantKind(t, "Requeue", err, fault.Unavailable)
		s.wantRow(t, failed)
	}},
}

// ---------------------------------------------------------------- due queue

// laterInShard is a fresh record claimed a whole number of shard cycles
// (so in a's shard) at least d after a; laterInOtherShard one slot later
// than that (the next shard).
func (s *suite) laterInShard(a ledger.Record, d time.Duration) ledger.Record {
	cycle := ledger.PendingShards * ledger.ShardSlot
	b := s.record()
	b.CreatedAt = a.CreatedAt.Add((d + cycle - 1) / cycle * cycle)
	return b
}

func (s *suite) laterInOtherShard(a ledger.Record, d time.Duration) ledger.Record {
	b := s.laterInShard(a, d)
	b.CreatedAt = b.CreatedAt.Add(ledger.ShardSlot)
	return b
}

var queueCases = []testCase{
	{"Queue/claim entry: shard of the claim time, due DueAfter after the claim", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		e := s.Store.ClaimEntry(rec)
		due := rec.CreatedAt.Add(s.Store.DueAfter())
		if e.Key != rec.Key || e.Shard != ledger.ShardOf(rec.CreatedAt) || !e.Due.Equal(ledger.BucketOf(due)) ||
			!e.NotBefore.Equal(due) || !e.CreatedAt.Equal(rec.CreatedAt) || e.ClaimToken != rec.ClaimToken {
			t.Errorf("ClaimEntry = %+v, want shard %d, due %s (bucket %s), the claim's time and token",
				e, ledger.ShardOf(rec.CreatedAt), due, ledger.BucketOf(due))
		}
		if got := s.entriesOf(t, rec.Key, e.Shard, e.Due); len(got) != 1 {
			t.Errorf("entries of the request in its bucket = %+v, want the claim's alone", got)
		}
		s.wantEntry(t, e)
	}},
	{"Queue/DueEntries lists one shard's minute", func(t *testing.T, s *suite) {
		a := s.claimed(t)
		b := s.mustClaim(t, s.laterInOtherShard(a, 2*time.Minute))
		ea, eb := s.Store.ClaimEntry(a), s.Store.ClaimEntry(b)
		s.wantEntry(t, ea)
		s.wantEntry(t, eb)
		// A time inside the minute names the same bucket.
		if got := s.entriesOf(t, a.Key, ea.Shard, ea.Due.Add(59*time.Second)); len(got) != 1 {
			t.Errorf("DueEntries at a time inside a's minute: %d entries of a, want 1", len(got))
		}
		for _, wrong := range []struct {
			key    ledger.Key
			shard  int
			bucket time.Time
		}{{a.Key, eb.Shard, ea.Due}, {a.Key, ea.Shard, eb.Due}, {b.Key, ea.Shard, eb.Due}, {b.Key, eb.Shard, ea.Due}} {
			if got := s.entriesOf(t, wrong.key, wrong.shard, wrong.bucket); len(got) != 0 {
				t.Errorf("DueEntries(%d, %s) lists %d entries of a request of another shard or minute", wrong.shard, wrong.bucket.Format(time.TimeOnly), len(got))
			}
		}
	}},
	{"Queue/DueEntries unavailable: Unavailable", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		e := s.Store.ClaimEntry(rec)
		s.arm(ledger.StmtDue, cassandra.FaultUnavailable, 1)
		_, err := s.Store.DueEntries(s.ctx, e.Shard, e.Due, time.Time{}, e.NotBefore)
		wantKind(t, "DueEntries", err, fault.Unavailable)
	}},
	{"Queue/DueEntries lists what falls due in (after, through]", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		e := s.Store.ClaimEntry(rec)
		ms := time.Millisecond
		for _, r := range []struct {
			after, through time.Time
			want           int
		}{
			{time.Time{}, e.NotBefore, 1},                          // from the start of the minute
			{e.NotBefore.Add(-ms), e.NotBefore, 1},                 // through is inclusive
			{e.NotBefore, e.Due.Add(ledger.BucketWidth), 0},        // after is exclusive
			{time.Time{}, e.NotBefore.Add(-ms), 0},                 // not due yet
			{e.Due.Add(-time.Hour), e.NotBefore.Add(time.Hour), 1}, // bounds beyond the minute
		} {
			got, err := s.Store.DueEntries(s.ctx, e.Shard, e.Due, r.after, r.through)
			if err != nil {
				t.Fatalf("DueEntries: %v", err)
			}
			n := 0
			for _, g := range got {
				if g.SameRow(e) {
					n++
				}
			}
			if n != r.want {
				t.Errorf("DueEntries(after %s, through %s) lists the entry due %s %d times, want %d",
					r.after.Format(time.StampMilli), r.through.Format(time.StampMilli), e.NotBefore.Format(time.StampMilli), n, r.want)
			}
		}
	}},
	{"Queue/Reschedule to a later minute: the entry moves", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		e := s.Store.ClaimEntry(rec)
		due := e.NotBefore.Add(3 * time.Minute).Truncate(time.Millisecond)
		if err := s.Store.Reschedule(s.ctx, e, due); err != nil {
			t.Fatalf("Reschedule: %v", err)
		}
		moved := e
		moved.Due, moved.NotBefore = ledger.BucketOf(due), due
		s.wantEntry(t, moved)
		s.wantNoEntry(t, e)
	}},
	{"Queue/Reschedule owing the order's event: listed with the order, removed like any", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		e := s.Store.ClaimEntry(rec)
		owed := e
		owed.Owed = rec.EntityID
		due := e.NotBefore.Add(3 * time.Minute).Truncate(time.Millisecond)
		if err := s.Store.Reschedule(s.ctx, owed, due); err != nil {
			t.Fatalf("Reschedule: %v", err)
		}
		moved := owed
		moved.Due, moved.NotBefore = ledger.BucketOf(due), due
		got := s.entriesOf(t, rec.Key, moved.Shard, moved.Due)
		if len(got) != 1 || !got[0].SameRow(moved) || got[0].Owed != rec.EntityID {
			t.Fatalf("entries after Reschedule = %+v, want one owing order %s", got, rec.EntityID)
		}
		s.wantNoEntry(t, e)
		if err := s.Store.RemoveEntry(s.ctx, got[0]); err != nil {
			t.Fatalf("RemoveEntry: %v", err)
		}
		s.wantNoEntry(t, moved)
	}},
	{"Queue/Reschedule within the minute: one entry, its time moved", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		e := s.Store.ClaimEntry(rec)
		due := e.Due.Add(59 * time.Second)
		if err := s.Store.Reschedule(s.ctx, e, due); err != nil {
			t.Fatalf("Reschedule: %v", err)
		}
		got := s.entriesOf(t, rec.Key, e.Shard, e.Due)
		if len(got) != 1 || !got[0].NotBefore.Equal(due) {
			t.Errorf("entries after Reschedule within the minute = %+v, want one, due %s", got, due)
		}
	}},
	{"Queue/Reschedule inserts before it removes", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		e := s.Store.ClaimEntry(rec)
		due := e.NotBefore.Add(3 * time.Minute).Truncate(time.Millisecond)
		s.arm(ledger.StmtRemove, cassandra.FaultUnavailable, 1)
		wantKind(t, "Reschedule", s.Store.Reschedule(s.ctx, e, due), fault.Unavailable)
		moved := e
		moved.Due, moved.NotBefore = ledger.BucketOf(due), due
		s.wantEntry(t, moved)
		s.wantEntry(t, e)
	}},
	{"Queue/Reschedule whose insert fails keeps the entry", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		e := s.Store.ClaimEntry(rec)
		due := e.NotBefore.Add(3 * time.Minute).Truncate(time.Millisecond)
		s.arm(ledger.StmtEnqueue, cassandra.FaultUnavailable, 1)
		wantKind(t, "Reschedule", s.Store.Reschedule(s.ctx, e, due), fault.Unavailable)
		s.wantEntry(t, e)
		moved := e
		moved.Due, moved.NotBefore = ledger.BucketOf(due), due
		s.wantNoEntry(t, moved)
	}},
	{"Queue/RemoveEntry: gone; removing it again is no error", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		e := s.Store.ClaimEntry(rec)
		for i := range 2 {
			if err := s.Store.RemoveEntry(s.ctx, e); err != nil {
				t.Fatalf("RemoveEntry #%d: %v", i+1, err)
			}
		}
		s.wantNoEntry(t, e)
		s.wantRow(t, pending(rec)) // the request itself is untouched
	}},
	{"Queue/RemoveEntry, then the claim resent: the entry stays removed", func(t *testing.T, s *suite) {
		// A resent claim (same token, as after a lost response) rewrites
		// its entry: the insert must not undo the removal.
		rec := s.claimed(t)
		e := s.Store.ClaimEntry(rec)
		if err := s.Store.RemoveEntry(s.ctx, e); err != nil {
			t.Fatalf("RemoveEntry: %v", err)
		}
		if applied, _, err := s.Store.Claim(s.ctx, rec, nil); err != nil || applied {
			t.Fatalf("Claim resent = applied %v, %v; want not applied", applied, err)
		}
		s.wantNoEntry(t, e)
	}},
	{"Queue/DropBucket: the minute's entries go, other minutes stay", func(t *testing.T, s *suite) {
		a := s.claimedAlone(t)
		b := s.mustClaim(t, s.laterInShard(a, 2*time.Minute)) // same shard, a later minute
		ea, eb := s.Store.ClaimEntry(a), s.Store.ClaimEntry(b)
		if err := s.Store.DropBucket(s.ctx, ea.Shard, ea.Due); err != nil {
			t.Fatalf("DropBucket: %v", err)
		}
		s.wantNoEntry(t, ea)
		s.wantEntry(t, eb)
		s.wantRow(t, pending(a)) // the request itself is untouched
	}},
	{"Queue/DropBucket unavailable: Unavailable, the entries stay", func(t *testing.T, s *suite) {
		rec := s.claimedAlone(t)
		e := s.Store.ClaimEntry(rec)
		s.arm(ledger.StmtDropBucket, cassandra.FaultUnavailable, 1)
		wantKind(t, "DropBucket", s.Store.DropBucket(s.ctx, e.Shard, e.Due), fault.Unavailable)
		s.wantEntry(t, e)
	}},
	{"Queue/RemoveEntry unavailable: Unavailable, the entry stays", func(t *testing.T, s *suite) {
		rec := s.claimed(t)
		e := s.Store.ClaimEntry(rec)
		s.arm(ledger.StmtRemove, cassandra.FaultUnavailable, 1)
		wantKind(t, "RemoveEntry", s.Store.RemoveEntry(s.ctx, e), fault.Unavailable)
		s.wantEntry(t, e)
	}},
}
