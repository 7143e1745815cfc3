package reconciler

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/stores/leases"
	"github.com/atlasmart/orderd/internal/stores/leases/leasestest"
	"github.com/atlasmart/orderd/ledger"
	"github.com/atlasmart/orderd/ledger/ledgertest"
)

// t0 is a minute boundary every test's clock starts near.
var t0 = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

// testDueAfter is how long after its claim a request's entry falls due.
const testDueAfter = 30 * time.Second

type harness struct {
	clock  *fakeClock
	ledger *ledgertest.Memory
	coord  *leasestest.MemoryCoordinator
	fin    *fakeFinisher
}

func newHarness(now time.Time) *harness {
	clock := newFakeClock(now)
	l := newLedger(clock.Now)
	return &harness{clock: clock, ledger: l, coord: leasestest.NewMemoryCoordinator(clock.Now), fin: newFakeFinisher(l, clock.Now)}
}

func discardLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// loop builds a Loop on the harness's fakes with its clock.
func (h *harness) loop(cfg Config) *Loop {
	l := New(cfg, h.ledger, h.fin.Finish, h.coord, discardLog())
	l.now = h.clock.Now
	return l
}

// createdFor is a claim time whose entry falls due in bucket b, at b+5s.
func createdFor(b time.Time) time.Time { return b.Add(-testDueAfter + 5*time.Second) }

func mustPass(t *testing.T, l *Loop, shards ...int) PassResult {
	t.Helper()
	res, err := l.PassShards(context.Background(), shards)
	if err != nil {
		t.Fatalf("PassShards(%v): %v", shards, err)
	}
	return res
}

func mustCoordinate(t *testing.T, l *Loop) {
	t.Helper()
	if err := l.coordinate(context.Background()); err != nil {
		t.Fatalf("coordinate: %v", err)
	}
}

func wantState(t *testing.T, h *harness, key ledger.Key, want ledger.State) ledger.Record {
	t.Helper()
	rec, ok := h.ledger.Record(key)
	if !ok {
		t.Fatalf("request %s: no record", key.RequestID)
	}
	if rec.State != want {
		t.Fatalf("request %s: state %s, want %s", key.RequestID, rec.State, want)
	}
	return rec
}

func wantNoEntries(t *testing.T, h *harness, key ledger.Key) {
	t.Helper()
	if es := h.ledger.Entries(key); len(es) != 0 {
		t.Fatalf("request %s: %d entries left in the due queue (%v), want none", key.RequestID, len(es), es)
	}
}

// ownedShards is the loop's own view of its shards, sorted.
func ownedShards(l *Loop) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]int, 0, len(l.owned))
	for s := range l.owned {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

func disjoint(sets ...[]int) bool {
	seen := map[int]bool{}
	for _, set := range sets {
		for _, s := range set {
			if seen[s] {
				return false
			}
			seen[s] = true
		}
	}
	return true
}

// ------------------------------------------------------------------ passes

func TestPassFinishesAbandonedRequest(t *testing.T) {
	h := newHarness(t0.Add(10 * time.Second))
	const shard = 3
	rec, entry := h.addPending(t, shard, t0.Add(-5*time.Minute))
	l := h.loop(Config{})

	res := mustPass(t, l, shard)

	if got := h.fin.Calls(rec.RequestID); got != 1 {
		t.Errorf("finisher calls = %d, want 1", got)
	}
	if res.Shards != 1 || res.Entries != 1 || res.Pending != 1 || res.Finished != 1 ||
		res.Retried != 0 || res.DeadLettered != 0 || res.Dropped != 0 {
		t.Errorf("PassResult = %+v, want 1 shard, 1 entry, 1 pending, 1 finished", res)
	}
	// No cursor yet: the pass starts InitialLookback (1 h) back and reads
	// every minute up to now's.
	if res.Buckets != 61 {
		t.Errorf("PassResult.Buckets = %d, want 61 (11:00..12:00)", res.Buckets)
	}
	if dueCalls(h.ledger, shard, entry.Due) != 1 {
		t.Errorf("entry's bucket read %d times, want 1", dueCalls(h.ledger, shard, entry.Due))
	}
	wantFinished(t, h, rec.Key)
	if completions(h, rec.Key) != 1 {
		t.Errorf("completions = %d, want 1", completions(h, rec.Key))
	}
	wantNoEntries(t, h, rec.Key)
	st := l.Stats()
	if st.Finished != 1 || st.Passes != 1 || st.PassErrors != 0 || st.Retried != 0 || st.DeadLettered != 0 || st.Dropped != 0 {
		t.Errorf("Stats = %+v, want Finished 1, Passes 1 and nothing else", st)
	}

	// A second pass finds nothing.
	res = mustPass(t, l, shard)
	if res.Entries != 0 || res.Pending != 0 || h.fin.Calls(rec.RequestID) != 1 {
		t.Errorf("second pass = %+v with %d finisher calls, want nothing done", res, h.fin.Calls(rec.RequestID))
	}
}

func TestPassLeavesYoungRequestAlone(t *testing.T) {
	t.Run("entry in the current bucket", func(t *testing.T) {
		now := t0.Add(10 * time.Second)
		h := newHarness(now)
		const shard = 6
		rec, entry := h.addPending(t, shard, t0) // 10 s old, due 30 s after its claim
		if !entry.Due.Equal(ledger.BucketOf(now)) {
			t.Fatalf("setup: entry due %s, want the current bucket", entry.Due)
		}
		l := h.loop(Config{Margin: time.Second})

		res := mustPass(t, l, shard)

		if h.fin.Calls(rec.RequestID) != 0 {
			t.Fatalf("finisher called %d times for a request whose entry is not due", h.fin.Calls(rec.RequestID))
		}
		if res.Entries != 0 || res.Pending != 0 || res.Finished != 0 || res.Dropped != 0 {
			t.Errorf("PassResult = %+v, want the entry not listed (not due) and left alone", res)
		}
		wantState(t, h, rec.Key, ledger.Pending)
		if es := h.ledger.Entries(rec.Key); len(es) != 1 || !es[0].Due.Equal(entry.Due) {
			t.Errorf("entries = %v, want the original one kept", es)
		}
		if c, ok := h.coord.CursorOf(shard); ok && c.After(entry.Due) {
			t.Errorf("cursor %s moved past the young entry's bucket %s", c, entry.Due)
		}

		// Once its entry falls due it is finished.
		h.clock.Set(entry.NotBefore.Add(time.Second))
		res = mustPass(t, l, shard)
		if res.Finished != 1 || h.fin.Calls(rec.RequestID) != 1 {
			t.Errorf("once due: PassResult = %+v, finisher calls %d; want it finished once", res, h.fin.Calls(rec.RequestID))
		}
		wantFinished(t, h, rec.Key)
	})

}

// ------------------------------------------------------------------ due queue reads

// dueReads lists the (after, through] ranges in which the partition (shard,
// bucket) was read.
func dueReads(l *ledgertest.Memory, shard int, bucket time.Time) [][2]time.Time {
	var out [][2]time.Time
	for _, st := range l.Statements(ledger.StmtDue) {
		if st.Shard == shard && st.Bucket.Equal(ledger.BucketOf(bucket)) {
			out = append(out, [2]time.Time{st.After, st.Through})
		}
	}
	return out
}

// While a minute is younger than the margin, each pass reads only what fell
// due since the last one; once older, it is read whole once (its final
// sweep), passed by the cursor and deleted.
func TestMinuteIsReadIncrementallyThenSweptAndDropped(t *testing.T) {
	now := t0.Add(40 * time.Second)
	h := newHarness(now)
	const shard = 4
	h.coord.SetCursor(shard, t0)
	first, _ := h.addPending(t, shard, t0.Add(-20*time.Second))           // due 12:00:10
	second, secondEntry := h.addPending(t, shard, t0.Add(20*time.Second)) // due 12:00:50
	l := h.loop(Config{})

	res := mustPass(t, l, shard)
	if res.Entries != 1 || res.Finished != 1 {
		t.Fatalf("first pass = %+v, want the due entry alone listed and finished", res)
	}
	wantFinished(t, h, first.Key)

	h.clock.Set(secondEntry.NotBefore.Add(time.Second))
	res = mustPass(t, l, shard)
	if res.Entries != 1 || res.Finished != 1 {
		t.Fatalf("second pass = %+v, want the newly due entry alone listed", res)
	}
	wantFinished(t, h, second.Key)
	reads := dueReads(h.ledger, shard, t0)
	if len(reads) != 2 || !reads[1][0].Equal(now) || reads[1][1].Before(secondEntry.NotBefore) {
		t.Fatalf("reads of the minute = %v, want the second from %s (where the first stopped)", reads, now.Format(time.TimeOnly))
	}
	if res.Swept != 0 || res.Passed != 0 {
		t.Errorf("second pass = %+v: swept a minute younger than the margin", res)
	}

	// Past the margin: one whole read, then the cursor passes and deletes it.
	h.clock.Set(t0.Add(3*time.Minute + time.Second))
	res = mustPass(t, l, shard)
	if res.Swept != 1 || res.Passed != 1 {
		t.Errorf("pass past the margin = %+v, want the minute swept and passed", res)
	}
	reads = dueReads(h.ledger, shard, t0)
	if last := reads[len(reads)-1]; len(reads) != 3 || !last[0].Before(t0) {
		t.Errorf("reads of the minute = %v, want a third, whole (from before its start)", reads)
	}
	if n := sent(h.ledger, ledger.StmtDropBucket); n != 1 {
		t.Errorf("bucket drops sent = %d, want 1", n)
	}
	if c, _ := h.coord.CursorOf(shard); !c.Equal(t0.Add(time.Minute)) {
		t.Errorf("cursor = %s, want 12:01", c)
	}
	if st := l.Stats(); st.MinutesPassed != 1 || st.CursorLag != 2*time.Minute+time.Second {
		t.Errorf("Stats: minutes passed %d, cursor lag %s; want 1 and 2m1s (12:03:01 - 12:01)", st.MinutesPassed, st.CursorLag)
	}
	// The cursor never goes back: the dropped minute is not read again.
	mustPass(t, l, shard)
	if n := len(dueReads(h.ledger, shard, t0)); n != 3 {
		t.Errorf("minute read %d times after it was dropped, want still 3", n)
	}
}

// A minute that a pass read to its last millisecond is not read again
// until its final sweep: an incremental read of it could list nothing. An
// entry written in it late is found by that sweep.
func TestMinuteReadToItsEndIsNotReadAgainUntilItsSweep(t *testing.T) {
	now := t0.Add(time.Minute + 10*time.Second) // 12:01:10
	h := newHarness(now)
	const shard = 6
	h.coord.SetCursor(shard, t0)
	l := h.loop(Config{})
	mustPass(t, l, shard) // reads 12:00 whole and 12:01 through 12:01:10
	if n := len(dueReads(h.ledger, shard, t0)); n != 1 {
		t.Fatalf("first pass read 12:00 %d times, want 1", n)
	}
	late, _ := h.addPending(t, shard, t0.Add(-20*time.Second)) // due 12:00:10, written at 12:01:10
	const passes = 10
	for range passes {
		h.clock.Advance(2 * time.Second)
		if res := mustPass(t, l, shard); res.Entries != 0 {
			t.Fatalf("incremental pass = %+v, want nothing listed", res)
		}
	}
	if n := len(dueReads(h.ledger, shard, t0)); n != 1 {
		t.Errorf("12:00, read to its end, was read %d times by %d more passes, want still once", n, passes)
	}
	if n := len(dueReads(h.ledger, shard, t0.Add(time.Minute))); n != passes+1 {
		t.Errorf("12:01 (the current minute) read %d times, want %d (once a pass)", n, passes+1)
	}
	h.clock.Set(t0.Add(3*time.Minute + time.Second))
	if res := mustPass(t, l, shard); res.Finished != 1 || res.Passed != 1 {
		t.Errorf("sweep = %+v, want the late entry finished and 12:00 passed", res)
	}
	wantFinished(t, h, late.Key)
	if reads := dueReads(h.ledger, shard, t0); len(reads) != 2 || !reads[1][0].Before(t0) {
		t.Errorf("reads of 12:00 = %v, want a second, whole (its sweep)", reads)
	}
}

// An entry written behind the read position (its writer's clock lags) is
// not listed by incremental reads, but the final sweep finds it: its minute
// is not dropped with it in it.
func TestFinalSweepFindsEntryWrittenBehindTheReadPosition(t *testing.T) {
	now := t0.Add(50 * time.Second)
	h := newHarness(now)
	const shard = 3
	h.coord.SetCursor(shard, t0)
	l := h.loop(Config{})
	mustPass(t, l, shard) // reads 12:00 through 12:00:50

	late, _ := h.addPending(t, shard, t0.Add(-20*time.Second)) // due 12:00:10, written at 12:00:50
	h.clock.Advance(5 * time.Second)
	if res := mustPass(t, l, shard); res.Entries != 0 {
		t.Fatalf("incremental pass = %+v, want the late entry not listed (it is behind the read position)", res)
	}
	h.clock.Set(t0.Add(3*time.Minute + time.Second))
	res := mustPass(t, l, shard)
	if res.Finished != 1 || res.Passed != 1 {
		t.Errorf("sweep = %+v, want the late entry finished and the minute passed", res)
	}
	wantFinished(t, h, late.Key)
}

// An entry left unsettled (its request unreadable) is listed again by the
// next incremental read, though the read position had passed it; the
// sweep does not drop its minute.
func TestUnsettledEntryIsListedAgainAndKeepsItsMinute(t *testing.T) {
	now := t0.Add(40 * time.Second)
	h := newHarness(now)
	const shard = 8
	h.coord.SetCursor(shard, t0)
	rec, _ := h.addPending(t, shard, t0.Add(-20*time.Second)) // due 12:00:10
	failGets(h.ledger, rec.Key)
	l := h.loop(Config{})

	mustPass(t, l, shard)
	h.clock.Advance(5 * time.Second)
	if res := mustPass(t, l, shard); res.Entries != 1 {
		t.Fatalf("next pass = %+v, want the unsettled entry listed again", res)
	}
	h.clock.Set(t0.Add(3*time.Minute + time.Second))
	if res, _ := l.PassShards(context.Background(), []int{shard}); res.Swept != 1 || res.Passed != 0 {
		t.Errorf("sweep with the entry unsettled = %+v, want swept, not passed", res)
	}
	if sent(h.ledger, ledger.StmtDropBucket) != 0 {
		t.Error("a minute holding an unsettled entry was dropped")
	}
	if st := l.Stats(); st.MinutesPassed != 0 || st.CursorLag != 3*time.Minute+time.Second {
		t.Errorf("Stats: minutes passed %d, cursor lag %s; want 0 and 3m1s (the cursor held at 12:00)", st.MinutesPassed, st.CursorLag)
	}
	h.ledger.SetIntercept(nil)
	h.clock.Advance(2 * time.Second)
	if res := mustPass(t, l, shard); res.Finished != 1 || res.Passed != 1 {
		t.Errorf("pass once readable = %+v, want finished and the minute passed", res)
	}
	wantFinished(t, h, rec.Key)
}

// A minute that cannot be deleted stays behind the cursor for the next pass.
func TestDropBucketErrorKeepsTheCursor(t *testing.T) {
	now := t0.Add(3*time.Minute + time.Second)
	h := newHarness(now)
	const shard = 1
	h.coord.SetCursor(shard, t0)
	rec, _ := h.addPending(t, shard, t0.Add(-20*time.Second))
	h.ledger.SetIntercept(func(st ledgertest.Statement) cassandra.Fault {
		if st.Name == ledger.StmtDropBucket {
			return cassandra.FaultUnavailable
		}
		return 0
	})
	l := h.loop(Config{})
	if _, err := l.PassShards(context.Background(), []int{shard}); err == nil {
		t.Fatal("PassShards: want the DropBucket error")
	}
	wantFinished(t, h, rec.Key)
	if c, _ := h.coord.CursorOf(shard); !c.Equal(t0) {
		t.Errorf("cursor = %s, want kept at 12:00", c)
	}
	h.ledger.SetIntercept(nil)
	if res := mustPass(t, l, shard); res.Passed != 1 {
		t.Errorf("next pass = %+v, want the minute passed", res)
	}
}

// A cursor that cannot be saved fails the pass and stays where it was;
// the minute it would have passed is already settled and dropped, so the
// next pass reads it empty and moves the cursor on.
func TestSaveCursorErrorKeepsTheCursorForTheNextPass(t *testing.T) {
	now := t0.Add(3*time.Minute + time.Second)
	h := newHarness(now)
	const shard = 2
	h.coord.SetCursor(shard, t0)
	rec, _ := h.addPending(t, shard, t0.Add(-20*time.Second))
	h.coord.Arm(leases.StmtSaveCursor, cassandra.FaultUnavailable, 1)
	l := h.loop(Config{})
	if _, err := l.PassShards(context.Background(), []int{shard}); err == nil {
		t.Fatal("PassShards: want the SaveCursor error")
	}
	wantFinished(t, h, rec.Key)
	wantNoEntries(t, h, rec.Key)
	if c, _ := h.coord.CursorOf(shard); !c.Equal(t0) {
		t.Errorf("cursor = %s, want kept at 12:00", c)
	}
	if res := mustPass(t, l, shard); res.Finished != 0 {
		t.Errorf("next pass = %+v, want nothing left to finish", res)
	}
	if c, _ := h.coord.CursorOf(shard); !c.After(t0) {
		t.Errorf("cursor = %s after the next pass, want past 12:00", c)
	}
}

func TestPassDropsSettledGoneAndSupersededEntries(t *testing.T) {
	h := newHarness(t0)
	const shard = 5
	created := t0.Add(-10 * time.Minute)

	complete, _ := h.addPending(t, shard, created)
	complete.State, complete.Outcome, complete.CompletedAt = ledger.Complete, []byte("done"), created.Add(time.Second)
	h.ledger.Put(complete)

	failed, _ := h.addPending(t, shard, created)
	failed.State, failed.LastError = ledger.Failed, "given up"
	h.ledger.Put(failed)

	gone, _ := h.addPending(t, shard, created)
	h.ledger.Delete(gone.Key)

	// A live request that also has a losing claim attempt's entry (another
	// token): the winner's entry is finished, the loser's dropped.
	live, liveEntry := h.addPending(t, shard, created)
	loser := liveEntry
	loser.ClaimToken = uuid.New()
	loser.CreatedAt = created.Add(2 * time.Second)
	h.ledger.PutEntry(loser)

	// And an entry whose token differs from a PENDING record (no other entry).
	superseded, _ := h.addPending(t, shard, created)
	other := superseded
	other.ClaimToken = uuid.New()
	h.ledger.Put(other)

	l := h.loop(Config{})
	enqueued := sent(h.ledger, ledger.StmtEnqueue)
	res := mustPass(t, l, shard)

	if res.Dropped != 5 {
		t.Errorf("PassResult.Dropped = %d, want 5 (complete, failed, gone, loser, superseded)", res.Dropped)
	}
	if res.Finished != 1 || res.Pending != 1 {
		t.Errorf("PassResult = %+v, want only the live request pending and finished", res)
	}
	if st := l.Stats(); st.Dropped != 5 || st.Finished != 1 {
		t.Errorf("Stats = %+v, want Dropped 5, Finished 1", st)
	}
	for _, k := range []ledger.Key{complete.Key, failed.Key, gone.Key, superseded.Key} {
		if n := h.fin.Calls(k.RequestID); n != 0 {
			t.Errorf("request %s: finisher called %d times, want 0", k.RequestID, n)
		}
		wantNoEntries(t, h, k)
	}
	if n := h.fin.Calls(live.RequestID); n != 1 {
		t.Errorf("live request: finisher called %d times, want 1", n)
	}
	wantNoEntries(t, h, live.Key)
	if len(h.ledger.AllEntries()) != 0 {
		t.Errorf("due queue holds %d entries, want 0", len(h.ledger.AllEntries()))
	}
	// Dropping never touches the ledger rows.
	if r := wantState(t, h, complete.Key, ledger.Complete); string(r.Outcome) != "done" {
		t.Errorf("complete record changed: %+v", r)
	}
	if r := wantState(t, h, failed.Key, ledger.Failed); r.LastError != "given up" {
		t.Errorf("failed record changed: %+v", r)
	}
	wantState(t, h, superseded.Key, ledger.Pending)
	if _, ok := h.ledger.Record(gone.Key); ok {
		t.Errorf("gone record reappeared")
	}
	// Reschedule's one statement is its entry's write.
	if sent(h.ledger, ledger.StmtFail) != 0 || sent(h.ledger, ledger.StmtEnqueue) != enqueued {
		t.Errorf("MarkFailed/Reschedule called on dropped entries")
	}
}

// ------------------------------------------------------------------ failures

// A request whose attempts keep failing is retried with a growing backoff,
// for ever: past MaxAttempts it is counted as stuck, never set aside as
// FAILED (its projections may be visible; a FAILED answer would contradict
// them). Its attempts are counted on the ledger with a stable reason.
func TestFailingRequestBacksOffAndIsNeverDeadLettered(t *testing.T) {
	now := t0.Add(30 * time.Second)
	h := newHarness(now)
	h.fin.SetFail(-1)
	const shard = 8
	rec, _ := h.addPending(t, shard, t0.Add(-10*time.Minute))
	enqueued := sent(h.ledger, ledger.StmtEnqueue) // the claim's entry
	// Backoffs of minutes, so every retry lands in a later bucket.
	cfg := Config{MaxAttempts: 5, BackoffBase: 2 * time.Minute, BackoffMax: time.Hour}
	l := h.loop(cfg)

	// Pass p is failed attempt p, rescheduled with a delay in [d/2, d],
	// d = Base << (p-1), capped (Loop.backoff of the failed attempts so far).
	const passes = 7
	for pass := 1; pass <= passes; pass++ {
		now := h.clock.Now()
		res := mustPass(t, l, shard)
		if res.Pending != 1 || res.Retried != 1 || res.Finished != 0 || res.DeadLettered != 0 {
			t.Fatalf("pass %d: PassResult = %+v, want 1 pending, 1 retried", pass, res)
		}
		got := wantState(t, h, rec.Key, ledger.Pending)
		if got.Attempts != pass || got.LastError != string(fault.ReasonClusterUnavailable) {
			t.Fatalf("pass %d: attempts = %d, last_error %q; want %d, %s", pass, got.Attempts, got.LastError, pass, fault.ReasonClusterUnavailable)
		}
		// Each Reschedule writes its entry, with one statement; the loop
		// writes entries only so.
		if n := sent(h.ledger, ledger.StmtEnqueue) - enqueued; n != pass {
			t.Fatalf("pass %d: %d Reschedule calls, want %d", pass, n, pass)
		}
		due := nextDue(t, h.ledger, rec.Key)
		d := min(cfg.BackoffBase<<(pass-1), cfg.BackoffMax)
		if due.Before(now.Add(d/2)) || due.After(now.Add(d)) {
			t.Fatalf("pass %d: rescheduled due %s, want within [now+%s, now+%s] (now %s)", pass, due, d/2, d, now)
		}
		if !ledger.BucketOf(due).After(ledger.BucketOf(now)) {
			t.Fatalf("pass %d: rescheduled to %s, want a later bucket than now's", pass, due)
		}
		st := l.Stats()
		if wantStuck := int64(max(0, pass-cfg.MaxAttempts+1)); st.Retried != int64(pass) || st.Stuck != wantStuck {
			t.Fatalf("pass %d: Stats.Retried = %d, Stuck = %d; want %d, %d", pass, st.Retried, st.Stuck, pass, wantStuck)
		}

		// Before its time comes, the request is not tried again.
		h.clock.Advance(time.Second)
		mustPass(t, l, shard)
		if n := h.fin.Calls(rec.RequestID); n != pass {
			t.Fatalf("pass %d: finisher called %d times before the backoff elapsed, want %d", pass, n, pass)
		}
		h.clock.Set(due.Add(time.Second))
	}
	if n := sent(h.ledger, ledger.StmtFail); n != 0 {
		t.Errorf("MarkFailed called %d times for a request that only failed to finish", n)
	}
	if st := l.Stats(); st.DeadLettered != 0 || st.Stuck != passes-int64(cfg.MaxAttempts)+1 {
		t.Errorf("Stats = %+v, want DeadLettered 0, Stuck %d", st, passes-cfg.MaxAttempts+1)
	}

	// When the cause goes away, the next attempt finishes it.
	h.fin.SetFail(0)
	res := mustPass(t, l, shard)
	if res.Finished != 1 {
		t.Fatalf("pass after recovery: %+v, want it finished", res)
	}
	wantFinished(t, h, rec.Key)
	wantNoEntries(t, h, rec.Key)
}

// unfinishable is what Finish returns for a stored command it cannot read.
func unfinishable() error {
	return fault.New(fault.ReasonCommandUnreadable, fmt.Errorf("decode: %w", ledger.ErrUnfinishable))
}

// Only a request nothing of which was written (its stored command cannot be
// read) is set aside: FAILED with the stable reason, its entry removed,
// at its first attempt.
func TestUnfinishableRequestIsDeadLettered(t *testing.T) {
	h := newHarness(t0.Add(30 * time.Second))
	h.fin.SetFail(-1)
	h.fin.SetErr(unfinishable())
	const shard = 12
	rec, _ := h.addPending(t, shard, t0.Add(-10*time.Minute))
	l := h.loop(Config{MaxAttempts: 5})

	res := mustPass(t, l, shard)
	if res.DeadLettered != 1 || res.Retried != 0 || res.Finished != 0 {
		t.Fatalf("PassResult = %+v, want 1 dead-lettered", res)
	}
	got := wantState(t, h, rec.Key, ledger.Failed)
	if got.LastError != string(fault.ReasonCommandUnreadable) || got.Attempts != 1 || got.CompletedAt.IsZero() {
		t.Errorf("dead letter: last_error %q, attempts %d, completed_at %s; want %s, 1, set",
			got.LastError, got.Attempts, got.CompletedAt, fault.ReasonCommandUnreadable)
	}
	wantNoEntries(t, h, rec.Key)
	if st := l.Stats(); st.DeadLettered != 1 || st.Retried != 0 {
		t.Errorf("Stats = %+v, want DeadLettered 1", st)
	}

	// Nothing more happens to it.
	h.clock.Advance(2 * time.Hour)
	res = mustPass(t, l, shard)
	if res.Entries != 0 || h.fin.Calls(rec.RequestID) != 1 || sent(h.ledger, ledger.StmtFail) != 1 {
		t.Errorf("pass after dead letter: %+v, finisher calls %d, MarkFailed %d; want nothing done",
			res, h.fin.Calls(rec.RequestID), sent(h.ledger, ledger.StmtFail))
	}
}

// A request of an operation this release does not know (a newer release's,
// in a fleet of mixed releases) is never acted on: no attempt noted, no
// dead letter, no withdrawal, however many passes see it. Its entry is moved
// a backoff maximum on each time, counted, and the request is finished once
// a finisher that knows the operation looks at it.
func TestRequestOfAnUnknownOperationIsLeftForANewerRelease(t *testing.T) {
	h := newHarness(t0.Add(30 * time.Second))
	h.fin.SetFail(-1)
	h.fin.SetErr(fault.New(fault.ReasonOperationUnknown, fmt.Errorf("request: %w: %q", ledger.ErrUnknownOperation, "SPLIT_ORDER")))
	const shard = 5
	rec, _ := h.addPending(t, shard, t0.Add(-10*time.Minute))
	cfg := Config{MaxAttempts: 2, BackoffBase: time.Minute, BackoffMax: 10 * time.Minute}
	l := h.loop(cfg)

	const passes = 4 // twice MaxAttempts: never stuck, never set aside
	for pass := 1; pass <= passes; pass++ {
		now := h.clock.Now()
		res := mustPass(t, l, shard)
		if res.UnknownOperation != 1 || res.Retried != 0 || res.DeadLettered != 0 || res.Finished != 0 || res.Dropped != 0 {
			t.Fatalf("pass %d: PassResult = %+v, want the entry left for a newer release", pass, res)
		}
		got := wantState(t, h, rec.Key, ledger.Pending)
		if got.Attempts != 0 || got.LastError != "" || got.ClaimToken != rec.ClaimToken {
			t.Fatalf("pass %d: request now attempts %d, last_error %q, token %s; want it as claimed", pass, got.Attempts, got.LastError, got.ClaimToken)
		}
		if due := nextDue(t, h.ledger, rec.Key); !due.Equal(now.Add(cfg.BackoffMax)) {
			t.Fatalf("pass %d: entry due %s, want a backoff maximum on (%s)", pass, due, now.Add(cfg.BackoffMax))
		}
		h.clock.Set(nextDue(t, h.ledger, rec.Key).Add(time.Second))
	}
	for _, stmt := range []cassandra.Stmt{ledger.StmtAttempt, ledger.StmtFail, ledger.StmtWithdraw} {
		if n := sent(h.ledger, stmt); n != 0 {
			t.Errorf("%d %s statements sent for a request of an unknown operation", n, stmt)
		}
	}
	if st := l.Stats(); st.UnknownOperation != passes || st.Stuck != 0 || st.DeadLettered != 0 || st.Retried != 0 {
		t.Errorf("Stats = %+v, want UnknownOperation %d and nothing else", st, passes)
	}

	// The release that knows the operation finishes it.
	h.fin.SetFail(0)
	if res := mustPass(t, l, shard); res.Finished != 1 {
		t.Fatalf("pass of a finisher that knows the operation: %+v, want it finished", res)
	}
	wantFinished(t, h, rec.Key)
	wantNoEntries(t, h, rec.Key)
}

// A claim whose request id already has another order is withdrawn by its
// finisher (REQUEST_ID_REUSED): nothing of it is left, neither the claim nor
// a due entry, and it is neither finished, retried, dropped nor set aside.
// The claim's own entry goes with the withdrawal; an entry a failed attempt
// rescheduled is another row, which the loop removes itself.
func TestWithdrawnClaimLeavesNoEntry(t *testing.T) {
	for _, tc := range []struct {
		name        string
		failedFirst bool // an earlier attempt failed: the entry was rescheduled
		removes     int  // RemoveEntry calls the withdrawing pass makes
	}{
		{"its claim's entry", false, 0},
		{"a rescheduled entry", true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t0.Add(30 * time.Second))
			const shard = 9
			rec, claimEntry := h.addPending(t, shard, t0.Add(-10*time.Minute))
			l := h.loop(Config{MaxAttempts: 5, BackoffBase: time.Minute, BackoffMax: time.Hour})
			if tc.failedFirst {
				h.fin.SetFail(1)
				if res := mustPass(t, l, shard); res.Retried != 1 {
					t.Fatalf("setup: first pass %+v, want 1 retried", res)
				}
				h.clock.Set(nextDue(t, h.ledger, rec.Key).Add(time.Second))
			}
			h.fin.SetAnother()
			removes := sent(h.ledger, ledger.StmtRemove)

			res := mustPass(t, l, shard)

			if res.Pending != 1 || res.Finished != 0 || res.Retried != 0 || res.DeadLettered != 0 || res.Dropped != 0 {
				t.Errorf("PassResult = %+v, want 1 pending and nothing finished, retried, dropped or dead-lettered", res)
			}
			if _, ok := h.ledger.Record(rec.Key); ok {
				t.Errorf("the withdrawn claim is still in the ledger")
			}
			wantNoEntries(t, h, rec.Key)
			// The withdrawal removes the claim's entry itself (its partition
			// is another minute than a rescheduled entry's); any other
			// removal is the loop's.
			own, loops := 0, 0
			for _, st := range h.ledger.Statements(ledger.StmtRemove)[removes:] {
				if st.Shard == claimEntry.Shard && st.Bucket.Equal(claimEntry.Due) {
					own++
				} else {
					loops++
				}
			}
			if own != 1 || loops != tc.removes {
				t.Errorf("removals: %d of the claim's entry, %d by the loop; want 1 (the withdrawal's), %d", own, loops, tc.removes)
			}
			if h.fin.Recorded(rec.Key) != 0 {
				t.Errorf("an order was recorded for the withdrawn claim")
			}

			// Nothing more happens to it.
			calls := h.fin.Calls(rec.RequestID)
			h.clock.Advance(2 * time.Hour)
			if res := mustPass(t, l, shard); res.Entries != 0 || h.fin.Calls(rec.RequestID) != calls {
				t.Errorf("later pass %+v, finisher calls %d; want nothing done", res, h.fin.Calls(rec.RequestID)-calls)
			}
		})
	}
}

func TestRequestFailingTwiceThenSucceeding(t *testing.T) {
	h := newHarness(t0.Add(30 * time.Second))
	h.fin.SetFail(2)
	const shard = 1
	rec, _ := h.addPending(t, shard, t0.Add(-10*time.Minute))
	l := h.loop(Config{MaxAttempts: 5, BackoffBase: 2 * time.Minute, BackoffMax: time.Hour})

	for i := 0; i < 3; i++ {
		mustPass(t, l, shard)
		if es := h.ledger.Entries(rec.Key); len(es) > 0 {
			h.clock.Set(es[0].NotBefore.Add(time.Second))
		}
	}

	got := wantFinished(t, h, rec.Key)
	if got.Attempts != 2 {
		t.Errorf("attempts = %d, want 2 (the two failed ones)", got.Attempts)
	}
	if n := h.fin.Calls(rec.RequestID); n != 3 {
		t.Errorf("finisher calls = %d, want 3", n)
	}
	if n := completions(h, rec.Key); n != 1 {
		t.Errorf("completions = %d, want exactly 1", n)
	}
	wantNoEntries(t, h, rec.Key)
	st := l.Stats()
	if st.Finished != 1 || st.Retried != 2 || st.DeadLettered != 0 {
		t.Errorf("Stats = %+v, want Finished 1, Retried 2, DeadLettered 0", st)
	}
	h.clock.Advance(time.Hour)
	mustPass(t, l, shard)
	if n := h.fin.Calls(rec.RequestID); n != 3 {
		t.Errorf("finisher calls after completion = %d, want still 3", n)
	}
}

// A failed attempt the ledger cannot record, or whose entry cannot be
// rescheduled, leaves the entry where it was: the database is the problem,
// not the request, so the entry is neither moved nor dropped and the next
// pass lists it again (a request whose entry went would be found by no
// pass). The attempt counts only once the ledger has it.
func TestFailedAttemptTheLedgerCannotRecordKeepsTheEntry(t *testing.T) {
	for _, tc := range []struct {
		name     string
		stmt     cassandra.Stmt // the statement that fails
		attempts int            // the row's attempts after the pass
	}{
		{"attempt not recorded", ledger.StmtAttempt, 0},
		{"entry not rescheduled", ledger.StmtEnqueue, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t0.Add(30 * time.Second))
			h.fin.SetFail(1)
			const shard = 6
			rec, entry := h.addPending(t, shard, t0.Add(-10*time.Minute))
			h.coord.SetCursor(shard, entry.Due)
			l := h.loop(Config{MaxAttempts: 5, BackoffBase: 2 * time.Minute, BackoffMax: time.Hour})
			h.ledger.SetIntercept(func(st ledgertest.Statement) cassandra.Fault {
				if st.Name == tc.stmt {
					return cassandra.FaultUnavailable
				}
				return 0
			})

			res := mustPass(t, l, shard)
			if res.Retried != 0 || res.Finished != 0 || res.Passed != 0 {
				t.Errorf("PassResult = %+v, want nothing retried, finished or passed", res)
			}
			if got := wantState(t, h, rec.Key, ledger.Pending); got.Attempts != tc.attempts {
				t.Errorf("attempts = %d, want %d", got.Attempts, tc.attempts)
			}
			if es := h.ledger.Entries(rec.Key); len(es) != 1 || !es[0].NotBefore.Equal(entry.NotBefore) {
				t.Errorf("entries = %+v, want only the one due at %s", es, entry.NotBefore)
			}
			if c, _ := h.coord.CursorOf(shard); !c.Equal(entry.Due) {
				t.Errorf("cursor = %s, want kept at the entry's minute %s", c, entry.Due)
			}
			if st := l.Stats(); st.Retried != 0 {
				t.Errorf("Stats.Retried = %d, want 0", st.Retried)
			}

			// The ledger answers again: the next pass lists the entry and
			// finishes the request.
			h.ledger.SetIntercept(nil)
			if res := mustPass(t, l, shard); res.Finished != 1 {
				t.Fatalf("next pass = %+v, want the request finished", res)
			}
			wantFinished(t, h, rec.Key)
			wantNoEntries(t, h, rec.Key)
		})
	}
}

// A retry whose backoff ends within the same minute is not attempted before
// its time: the entry's not_before, not its minute, decides.
func TestRetryWithinTheMinuteWaitsForItsBackoff(t *testing.T) {
	h := newHarness(t0.Add(30 * time.Second))
	h.fin.SetFail(-1)
	const shard = 3
	rec, _ := h.addPending(t, shard, t0.Add(-10*time.Minute))
	l := h.loop(Config{MaxAttempts: 10, BackoffBase: 10 * time.Second, BackoffMax: time.Minute})

	mustPass(t, l, shard) // attempt fails; next attempt 5-10 s later, same minute
	if n := h.fin.Calls(rec.RequestID); n != 1 {
		t.Fatalf("finisher calls = %d, want 1", n)
	}
	due := nextDue(t, h.ledger, rec.Key)
	if ledger.BucketOf(due) != ledger.BucketOf(h.clock.Now()) {
		t.Fatalf("test setup: the retry at %s should fall in the current minute", due)
	}
	h.clock.Set(due.Add(-time.Second))
	mustPass(t, l, shard)
	if n := h.fin.Calls(rec.RequestID); n != 1 {
		t.Fatalf("a pass before the backoff ended retried the request (calls = %d)", n)
	}
	h.clock.Set(due.Add(time.Millisecond))
	mustPass(t, l, shard)
	if n := h.fin.Calls(rec.RequestID); n != 2 {
		t.Fatalf("a pass after the backoff ended: calls = %d, want 2", n)
	}
}

// An attempt that outlasts its backoff (a publish waiting 10 s for a broker
// that is down) reschedules its entry from when the attempt ended, not from
// when the pass started: the entry is not due again at once, and the next
// pass leaves it alone until its backoff has passed.
func TestRescheduleAfterASlowAttemptIsDatedWhenMade(t *testing.T) {
	h := newHarness(t0.Add(30 * time.Second))
	h.fin.SetFail(-1)
	h.fin.SetUndelivered(fault.New(fault.ReasonDeliveryFailed, errors.New("broker did not acknowledge in time")))
	const (
		shard       = 3
		publishWait = 10 * time.Second
		base        = 4 * time.Second // the first retry waits base/2 to base
	)
	var ended time.Time
	h.fin.before = func(ledger.Record) { ended = h.clock.Advance(publishWait) }
	rec, _ := h.addPending(t, shard, t0.Add(-10*time.Minute))
	l := h.loop(Config{BackoffBase: base, BackoffMax: time.Minute})

	started := h.clock.Now()
	if res := mustPass(t, l, shard); res.Retried != 1 {
		t.Fatalf("PassResult = %+v, want the failed attempt rescheduled", res)
	}
	due := nextDue(t, h.ledger, rec.Key)
	if due.Before(ended.Add(base/2)) || due.After(ended.Add(base)) {
		t.Fatalf("rescheduled to pass start +%s (the attempt ended at +%s); want the attempt's end + %s..%s",
			due.Sub(started), ended.Sub(started), base/2, base)
	}
	h.fin.before = nil
	mustPass(t, l, shard) // right after the slow attempt
	if n := h.fin.Calls(rec.RequestID); n != 1 {
		t.Fatalf("the pass right after the slow attempt tried the request again (calls = %d, want 1)", n)
	}
}

// A dead letter that fails, or whose outcome is unknown, keeps the entry:
// the request is still PENDING (or may be), and only a read that shows it
// terminal lets the entry go. A defect this guards against: an unsettled dead letter
// answered as PENDING with no error made the loop drop the entry, and the
// request stayed PENDING, found by no pass, until its TTL.
func TestDeadLetterNotSettledKeepsEntry(t *testing.T) {
	for _, tc := range []struct {
		name string
		arm  func(l *ledgertest.Memory)
		// state is the row afterwards; next says what the next pass does.
		state ledger.State
	}{
		{"refused", func(l *ledgertest.Memory) {
			l.Arm(ledger.StmtFail, cassandra.FaultUnavailable, 1)
		}, ledger.Pending},
		{"timed out, never applied", func(l *ledgertest.Memory) {
			l.Arm(ledger.StmtFail, cassandra.FaultTimeout, 3)
		}, ledger.Pending},
		{"timed out, unsettled", func(l *ledgertest.Memory) {
			l.Arm(ledger.StmtFail, cassandra.FaultTimeout, 1)
			l.Arm(ledger.StmtGet, cassandra.FaultUnavailable, 3)
		}, ledger.Pending},
		{"applied, unsettled", func(l *ledgertest.Memory) {
			l.Arm(ledger.StmtFail, cassandra.FaultLoseResponse, 1)
			l.Arm(ledger.StmtGet, cassandra.FaultUnavailable, 3)
		}, ledger.Failed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t0.Add(30 * time.Second))
			h.fin.SetFail(-1)
			h.fin.SetErr(unfinishable())
			var once sync.Once
			// Armed inside the attempt: after the loop has read the request.
			h.fin.before = func(ledger.Record) { once.Do(func() { tc.arm(h.ledger) }) }
			const shard = 12
			rec, entry := h.addPending(t, shard, t0.Add(-10*time.Minute))
			l := h.loop(Config{MaxAttempts: 2})

			res := mustPass(t, l, shard)
			for _, st := range []cassandra.Stmt{ledger.StmtFail, ledger.StmtGet} {
				if n := h.ledger.Pending(st); n != 0 {
					t.Fatalf("setup: %d faults on %s never served", n, st)
				}
			}
			if res.DeadLettered != 0 || l.Stats().DeadLettered != 0 {
				t.Errorf("counted as dead-lettered although MarkFailed did not settle: %+v", res)
			}
			wantState(t, h, rec.Key, tc.state)
			if es := h.ledger.Entries(rec.Key); len(es) != 1 || !es[0].Due.Equal(entry.Due) {
				t.Errorf("entries = %v, want the entry kept for the next pass", es)
			}
			if c, _ := h.coord.CursorOf(shard); c.After(entry.Due) {
				t.Errorf("cursor %s moved past the unsettled entry's bucket %s", c, entry.Due)
			}

			// The next pass settles it for good: FAILED, entry gone.
			res = mustPass(t, l, shard)
			wantState(t, h, rec.Key, ledger.Failed)
			wantNoEntries(t, h, rec.Key)
			if tc.state == ledger.Pending && res.DeadLettered != 1 {
				t.Errorf("next pass: %+v, want it dead-lettered", res)
			}
			if tc.state == ledger.Failed && res.Dropped != 1 {
				t.Errorf("next pass: %+v, want the settled request's entry dropped", res)
			}
		})
	}
}

// A request settled by someone else while the reconciler works on it: the
// reconciler's step ends in "nothing to do", drops the entry, and counts
// the request neither finished nor dead-lettered (the operator's metrics
// stay true). Each case is armed inside the attempt, after the loop read the
// request PENDING.
func TestRequestSettledDuringTheAttemptDropsItsEntry(t *testing.T) {
	for _, tc := range []struct {
		name string
		// ferr is what the finisher answers; settle changes the row under it.
		ferr   error
		settle func(t *testing.T, h *harness, rec ledger.Record)
		// state is the row afterwards ("" for none).
		state ledger.State
	}{
		{"expired before the dead letter", unfinishable(), func(t *testing.T, h *harness, rec ledger.Record) {
			h.ledger.Delete(rec.Key) // its retention ended: MarkFailed finds no row
		}, ""},
		{"set aside by another finisher", fault.New(fault.ReasonRequestFailed, nil), func(t *testing.T, h *harness, rec ledger.Record) {
			if _, err := h.ledger.MarkFailed(context.Background(), rec, string(fault.ReasonCommandUnreadable)); err != nil {
				t.Fatalf("setup: MarkFailed: %v", err)
			}
		}, ledger.Failed},
		{"claimed afresh before the dead letter", unfinishable(), func(t *testing.T, h *harness, rec ledger.Record) {
			// The row expired and a retry claimed the request anew: the row
			// is the newer claim's, PENDING, with its own entry (which must
			// stay: its handler or a later pass finishes it).
			h.ledger.Delete(rec.Key)
			rec.ClaimToken, rec.CreatedAt = uuid.New(), h.clock.Now().UTC().Truncate(time.Millisecond)
			if won, _, err := h.ledger.Claim(context.Background(), rec, nil); err != nil || !won {
				t.Fatalf("setup: the fresh claim: won %v, %v", won, err)
			}
		}, ledger.Pending},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t0.Add(30 * time.Second))
			h.fin.SetFail(-1)
			h.fin.SetErr(tc.ferr)
			var once sync.Once
			h.fin.before = func(rec ledger.Record) { once.Do(func() { tc.settle(t, h, rec) }) }
			const shard = 12
			rec, _ := h.addPending(t, shard, t0.Add(-10*time.Minute))
			l := h.loop(Config{MaxAttempts: 2})

			res := mustPass(t, l, shard)
			if res.Dropped != 1 || res.DeadLettered != 0 || res.Finished != 0 || res.Retried != 0 {
				t.Errorf("pass = %+v, want the entry dropped and nothing else counted", res)
			}
			if st := l.Stats(); st.Dropped != 1 || st.DeadLettered != 0 || st.Finished != 0 {
				t.Errorf("stats = %+v, want 1 dropped, 0 dead-lettered, 0 finished", st)
			}
			if now, ok := h.ledger.Record(rec.Key); ok && now.ClaimToken != rec.ClaimToken {
				if es := h.ledger.Entries(rec.Key); len(es) != 1 || es[0].ClaimToken != now.ClaimToken {
					t.Errorf("entries %v, want only the newer claim's", es)
				}
			} else {
				wantNoEntries(t, h, rec.Key)
			}
			if tc.state == "" {
				if got, ok := h.ledger.Record(rec.Key); ok {
					t.Errorf("request %s: %s, want no row", rec.RequestID, got.State)
				}
				return
			}
			wantState(t, h, rec.Key, tc.state)
		})
	}
}

func TestBackoffGrowsAndIsCapped(t *testing.T) {
	h := newHarness(t0)
	l := h.loop(Config{BackoffBase: 5 * time.Second, BackoffMax: 30 * time.Second})
	for _, tc := range []struct {
		attempts int
		d        time.Duration
	}{
		{0, 5 * time.Second}, {1, 5 * time.Second}, // the first failure waits the base
		{2, 10 * time.Second}, {3, 20 * time.Second},
		{4, 30 * time.Second}, // 40 s, capped
		{30, 30 * time.Second}, {1000, 30 * time.Second},
	} {
		lo, hi := time.Duration(1<<62), time.Duration(0)
		for i := 0; i < 2000; i++ {
			got := l.backoff(tc.attempts)
			if got < tc.d/2 || got > tc.d {
				t.Fatalf("backoff(%d) = %s, want within [%s, %s]", tc.attempts, got, tc.d/2, tc.d)
			}
			lo, hi = min(lo, got), max(hi, got)
		}
		if lo == hi {
			t.Errorf("backoff(%d) always %s: no jitter", tc.attempts, lo)
		}
		// The jitter spreads over the range.
		if spread := hi - lo; spread < tc.d/4 {
			t.Errorf("backoff(%d) spread %s over 2000 draws, want at least %s", tc.attempts, spread, tc.d/4)
		}
	}

	// A huge base cannot overflow into a negative or zero delay.
	big := h.loop(Config{BackoffBase: 1 << 60, BackoffMax: time.Hour})
	for _, a := range []int{2, 10, 40} {
		if got := big.backoff(a); got < 30*time.Minute || got > time.Hour {
			t.Errorf("backoff(%d) with a huge base = %s, want within [30m, 1h]", a, got)
		}
	}
}

// ------------------------------------------------------------------ cursor

func TestCursorSkipsSettledBuckets(t *testing.T) {
	now := t0.Add(30 * time.Second) // 12:00:30; limit = 11:58
	h := newHarness(now)
	const shard = 7
	var recs []ledger.Record
	for _, b := range []time.Duration{-50 * time.Minute, -20 * time.Minute, -3 * time.Minute, -time.Minute, 0} {
		r, e := h.addPending(t, shard, createdFor(t0.Add(b)))
		if !e.Due.Equal(t0.Add(b)) {
			t.Fatalf("setup: entry due %s, want %s", e.Due, t0.Add(b))
		}
		recs = append(recs, r)
	}
	l := h.loop(Config{}) // Margin 2 min, InitialLookback 1 h

	res := mustPass(t, l, shard)
	if res.Finished != len(recs) {
		t.Fatalf("PassResult = %+v, want %d finished", res, len(recs))
	}
	limit := ledger.BucketOf(now.Add(-2 * time.Minute))
	if c, ok := h.coord.CursorOf(shard); !ok || !c.Equal(limit) {
		t.Fatalf("cursor = %s (set %v), want %s: every bucket before the margin is settled", c, ok, limit)
	}
	start := ledger.BucketOf(now.Add(-time.Hour))
	for b := start; !b.After(t0); b = b.Add(time.Minute) {
		if n := dueCalls(h.ledger, shard, b); n != 1 {
			t.Fatalf("first pass read bucket %s %d times, want 1", b.Format("15:04"), n)
		}
	}

	// Five minutes on, a pass starts at the saved cursor.
	h.clock.Advance(5 * time.Minute) // 12:05:30; limit 12:03
	res = mustPass(t, l, shard)
	if res.Buckets != 8 {
		t.Errorf("second pass read %d buckets, want 8 (11:58..12:05)", res.Buckets)
	}
	for b := start; b.Before(limit); b = b.Add(time.Minute) {
		if n := dueCalls(h.ledger, shard, b); n != 1 {
			t.Errorf("bucket %s before the cursor read %d times, want 1", b.Format("15:04"), n)
		}
	}
	for b := limit; !b.After(t0); b = b.Add(time.Minute) {
		if n := dueCalls(h.ledger, shard, b); n != 2 {
			t.Errorf("bucket %s at/after the cursor read %d times, want 2", b.Format("15:04"), n)
		}
	}
	if c, _ := h.coord.CursorOf(shard); !c.Equal(t0.Add(3 * time.Minute)) {
		t.Errorf("cursor = %s, want 12:03", c)
	}
	// Nothing to advance: no write.
	saves := len(h.coord.Saves(shard))
	mustPass(t, l, shard)
	if got := len(h.coord.Saves(shard)); got != saves {
		t.Errorf("a pass that cannot advance the cursor saved it (%d → %d saves)", saves, got)
	}
}

func TestCursorStopsAtEntryWithGetError(t *testing.T) {
	now := t0.Add(30 * time.Second)
	h := newHarness(now)
	const shard = 9
	h.coord.SetCursor(shard, t0.Add(-30*time.Minute))
	a, _ := h.addPending(t, shard, createdFor(t0.Add(-25*time.Minute)))
	b, be := h.addPending(t, shard, createdFor(t0.Add(-20*time.Minute)))
	c, _ := h.addPending(t, shard, createdFor(t0.Add(-15*time.Minute)))
	failGets(h.ledger, b.Key)
	l := h.loop(Config{})

	res, _ := l.PassShards(context.Background(), []int{shard})
	if res.Finished != 2 {
		t.Errorf("PassResult = %+v, want the two readable requests finished", res)
	}
	wantFinished(t, h, a.Key)
	wantFinished(t, h, c.Key) // later buckets are still worked
	wantState(t, h, b.Key, ledger.Pending)
	if cur, _ := h.coord.CursorOf(shard); !cur.Equal(be.Due) {
		t.Fatalf("cursor = %s, want it kept at the failed entry's bucket %s", cur, be.Due)
	}

	// The next pass re-reads that bucket, not the ones before it.
	h.clock.Advance(time.Minute)
	l.PassShards(context.Background(), []int{shard})
	if n := dueCalls(h.ledger, shard, t0.Add(-25*time.Minute)); n != 1 {
		t.Errorf("settled bucket before the cursor read %d times, want 1", n)
	}
	if n := dueCalls(h.ledger, shard, be.Due); n != 2 {
		t.Errorf("failed entry's bucket read %d times, want 2", n)
	}
	if cur, _ := h.coord.CursorOf(shard); !cur.Equal(be.Due) {
		t.Errorf("cursor = %s, want still %s", cur, be.Due)
	}

	// Once the ledger answers, the request is finished and the cursor moves.
	h.ledger.SetIntercept(nil)
	h.clock.Advance(time.Minute)
	mustPass(t, l, shard)
	wantFinished(t, h, b.Key)
	want := ledger.BucketOf(h.clock.Now().Add(-2 * time.Minute))
	if cur, _ := h.coord.CursorOf(shard); !cur.Equal(want) {
		t.Errorf("cursor = %s, want %s", cur, want)
	}
}

func TestDueEntriesErrorFailsPassAndKeepsCursor(t *testing.T) {
	now := t0.Add(30 * time.Second)
	h := newHarness(now)
	const shard = 2
	start := t0.Add(-30 * time.Minute)
	h.coord.SetCursor(shard, start)
	a, _ := h.addPending(t, shard, createdFor(t0.Add(-25*time.Minute)))
	bad := t0.Add(-20 * time.Minute)
	failDue(h.ledger, shard, bad)
	l := h.loop(Config{})

	if _, err := l.PassShards(context.Background(), []int{shard}); err == nil {
		t.Fatal("PassShards: want the DueEntries error")
	}
	if st := l.Stats(); st.PassErrors != 1 || st.Passes != 1 {
		t.Errorf("Stats = %+v, want Passes 1, PassErrors 1", st)
	}
	wantFinished(t, h, a.Key)
	if cur, _ := h.coord.CursorOf(shard); cur.After(bad) {
		t.Errorf("cursor = %s, moved past the unreadable bucket %s", cur, bad)
	}

	h.ledger.SetIntercept(nil)
	mustPass(t, l, shard)
	if cur, _ := h.coord.CursorOf(shard); !cur.Equal(ledger.BucketOf(now.Add(-2 * time.Minute))) {
		t.Errorf("cursor = %s after a clean pass, want the margin's bucket", cur)
	}
	if st := l.Stats(); st.PassErrors != 1 || st.Passes != 2 {
		t.Errorf("Stats = %+v, want Passes 2, PassErrors 1", st)
	}
}

// ------------------------------------------------------------------ stats

// The gauges count every request a pass left unsettled until a later pass
// settles it, not only those the last pass happened to list: a pass lists
// what fell due since the one before, and an unsettled entry is rescheduled
// ahead, so a pass sees a slice of the backlog. Counted per pass, the
// gauges fell to zero between the passes that met an unsettled request,
// and an alert waiting for them to stay up never fired.
func TestStatsCountEveryUnsettledRequestNotOnlyTheLastPasses(t *testing.T) {
	now := t0.Add(30 * time.Second)
	h := newHarness(now)
	h.fin.SetFail(-1)
	const shard = 4
	var old []ledger.Record
	var oldest time.Time // the claim time of the oldest, as claimed in the shard
	for _, c := range []time.Time{t0.Add(-3 * time.Minute), t0.Add(-5 * time.Minute), t0.Add(-2 * time.Minute)} {
		r, _ := h.addPending(t, shard, c)
		old = append(old, r)
		keepEarliest(&oldest, r.CreatedAt)
	}
	young, _ := h.addPending(t, shard, now.Add(-10*time.Second)) // not due yet
	l := h.loop(Config{MaxAttempts: 10, BackoffBase: 10 * time.Minute, BackoffMax: 20 * time.Minute})

	if st := l.Stats(); st.Pending != 0 || st.OldestPending != 0 {
		t.Fatalf("Stats before any pass = %+v", st)
	}
	res := mustPass(t, l, shard)
	st := l.Stats()
	if res.Pending != 3 || st.Pending != 3 {
		t.Errorf("pending: PassResult %d, Stats %d; want 3 (the young one is not due)", res.Pending, st.Pending)
	}
	if want := now.Sub(oldest); st.OldestPending != want {
		t.Errorf("Stats.OldestPending = %s, want %s", st.OldestPending, want)
	}

	// The young one falls due; the three retried are not due again yet.
	now = nextDue(t, h.ledger, young.Key).Add(time.Second)
	h.clock.Set(now)
	for _, r := range old {
		if !nextDue(t, h.ledger, r.Key).After(now) {
			t.Fatalf("request %s due again at %s, before the young one's pass at %s", r.RequestID, nextDue(t, h.ledger, r.Key), now)
		}
	}
	res = mustPass(t, l, shard)
	st = l.Stats()
	if res.Pending != 1 || st.Pending != 4 {
		t.Errorf("second pass: PassResult.Pending %d, Stats.Pending %d; want 1 listed, 4 unsettled", res.Pending, st.Pending)
	}
	if want := now.Sub(oldest); st.OldestPending != want {
		t.Errorf("Stats.OldestPending = %s, want %s (the oldest unsettled, though this pass did not list it)", st.OldestPending, want)
	}

	// Everything falls due and succeeds.
	h.fin.SetFail(0)
	h.clock.Advance(time.Hour)
	if res := mustPass(t, l, shard); res.Finished != 4 {
		t.Errorf("third pass: PassResult %+v, want 4 finished", res)
	}
	if st := l.Stats(); st.Pending != 0 || st.OldestPending != 0 || st.Passes != 3 {
		t.Errorf("Stats once all are finished = %+v, want Pending 0, OldestPending 0, Passes 3", st)
	}
	wantFinished(t, h, young.Key)
}

// ------------------------------------------------------------------ coordination

const testTTL = 15 * time.Second

func (h *harness) member(id uuid.UUID) *Loop {
	return h.loop(Config{Instance: id, LeaseTTL: testTTL})
}

func TestCoordinateSplitsShardsBetweenTwo(t *testing.T) {
	t.Run("both alive from the start", func(t *testing.T) {
		h := newHarness(t0)
		a, b := h.member(uuid.New()), h.member(uuid.New())
		for _, l := range []*Loop{a, b} {
			if _, err := h.coord.Heartbeat(context.Background(), l.cfg.Instance, testTTL); err != nil {
				t.Fatal(err)
			}
		}
		mustCoordinate(t, a)
		mustCoordinate(t, b)
		checkSplit(t, h, a, b)
		// Coordinating again changes nothing.
		sa, sb := ownedShards(a), ownedShards(b)
		h.clock.Advance(5 * time.Second)
		mustCoordinate(t, a)
		mustCoordinate(t, b)
		if !slices.Equal(sa, ownedShards(a)) || !slices.Equal(sb, ownedShards(b)) {
			t.Errorf("a stable group moved shards: %v/%v → %v/%v", sa, sb, ownedShards(a), ownedShards(b))
		}
	})

	t.Run("second joins the first", func(t *testing.T) {
		h := newHarness(t0)
		a, b := h.member(uuid.New()), h.member(uuid.New())
		mustCoordinate(t, a)
		if got := len(ownedShards(a)); got != ledger.PendingShards {
			t.Fatalf("a lone instance owns %d shards, want all %d", got, ledger.PendingShards)
		}
		mustCoordinate(t, b) // all taken: nothing yet
		if got := len(ownedShards(b)); got != 0 {
			t.Fatalf("joiner owns %d shards while all are leased, want 0", got)
		}
		mustCoordinate(t, a) // gives back down to its fair share
		mustCoordinate(t, b)
		checkSplit(t, h, a, b)
	})
}

func checkSplit(t *testing.T, h *harness, a, b *Loop) {
	t.Helper()
	sa, sb := ownedShards(a), ownedShards(b)
	if len(sa) != 8 || len(sb) != 8 {
		t.Fatalf("shards owned: %d and %d, want 8 each", len(sa), len(sb))
	}
	if !disjoint(sa, sb) {
		t.Fatalf("shard sets overlap: %v and %v", sa, sb)
	}
	if la, lb := h.coord.LeasesOf(a.cfg.Instance), h.coord.LeasesOf(b.cfg.Instance); !slices.Equal(sa, la) || !slices.Equal(sb, lb) {
		t.Fatalf("loops' shards %v/%v differ from the leases %v/%v", sa, sb, la, lb)
	}
	if a.Stats().OwnedShards != 8 || b.Stats().OwnedShards != 8 {
		t.Fatalf("Stats.OwnedShards = %d/%d, want 8/8", a.Stats().OwnedShards, b.Stats().OwnedShards)
	}
}

// A coordinate that fails part-way (each statement it sends, failing or
// with its outcome unknown) never leaves the loop passing a shard whose
// lease it does not hold, and the next coordinate reaches the fair share
// with the loop's view equal to the leases. (Holding a lease whose outcome
// was unknown without knowing it only idles the shard until the next
// coordinate takes it back.)
func TestCoordinateFailurePartWayKeepsTheLoopsShardsLeased(t *testing.T) {
	for _, tc := range []struct {
		name   string
		joiner bool // a second member joins, so a must give back half
		stmt   cassandra.Stmt
		f      cassandra.Fault
		times  int
	}{
		{"heartbeat fails", false, leases.StmtHeartbeat, cassandra.FaultUnavailable, 1},
		{"leases unreadable", false, leases.StmtOwners, cassandra.FaultUnavailable, 1},
		{"acquire fails", false, leases.StmtAcquire, cassandra.FaultUnavailable, 1},
		{"acquire applied, outcome unknown and unsettled", false, leases.StmtAcquire, cassandra.FaultLoseResponse, 1},
		{"release fails while rebalancing", true, leases.StmtRelease, cassandra.FaultUnavailable, 1},
		{"release applied, outcome unknown and unsettled", true, leases.StmtRelease, cassandra.FaultLoseResponse, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t0)
			a := h.member(uuid.New())
			fair := ledger.PendingShards
			if tc.joiner {
				mustCoordinate(t, a)
				h.coord.Heartbeat(context.Background(), uuid.New(), testTTL)
				fair /= 2
			}
			h.coord.Arm(tc.stmt, tc.f, tc.times)
			if tc.f == cassandra.FaultLoseResponse {
				h.coord.Arm(leases.StmtLease, cassandra.FaultUnavailable, 1) // the settling read fails too
			}
			if err := a.coordinate(context.Background()); err == nil {
				t.Fatal("coordinate: want the injected fault's error")
			}
			if held, leased := ownedShards(a), h.coord.LeasesOf(a.cfg.Instance); !isSubset(held, leased) {
				t.Fatalf("after the failure the loop passes shards %v, leased to it: %v", held, leased)
			}
			mustCoordinate(t, a)
			held, leased := ownedShards(a), h.coord.LeasesOf(a.cfg.Instance)
			if len(held) != fair || !isSubset(held, leased) {
				t.Fatalf("next coordinate: the loop passes %v, leased to it %v; want %d of those", held, leased, fair)
			}
			// A lease given back whose release did not apply lapses by its
			// TTL; every other is passed or released.
			h.clock.Advance(testTTL)
			mustCoordinate(t, a)
			if held, leased := ownedShards(a), h.coord.LeasesOf(a.cfg.Instance); !slices.Equal(held, leased) {
				t.Fatalf("a TTL later: the loop passes %v, leased to it %v; want the same", held, leased)
			}
		})
	}
}

// isSubset: every shard of a is in b (both sorted).
func isSubset(a, b []int) bool {
	for _, s := range a {
		if _, ok := slices.BinarySearch(b, s); !ok {
			return false
		}
	}
	return true
}

func TestCoordinateTakesOverExpiredLeases(t *testing.T) {
	h := newHarness(t0)
	a, b := h.member(uuid.New()), h.member(uuid.New())
	for _, l := range []*Loop{a, b} {
		h.coord.Heartbeat(context.Background(), l.cfg.Instance, testTTL)
	}
	mustCoordinate(t, a)
	mustCoordinate(t, b)
	checkSplit(t, h, a, b)
	aShards := ownedShards(a)
	start := h.clock.Now()

	// a stops; b keeps coordinating every 5 s.
	tookAll := time.Duration(-1)
	for i := 0; i < 6 && tookAll < 0; i++ {
		now := h.clock.Advance(5 * time.Second)
		mustCoordinate(t, b)
		held := ownedShards(b)
		if now.Sub(start) < testTTL && !disjoint(held, aShards) {
			t.Fatalf("at +%s, before a's leases expired, b holds some of a's shards: %v", now.Sub(start), held)
		}
		if len(held) == ledger.PendingShards {
			tookAll = now.Sub(start)
		}
	}
	if tookAll < 0 {
		t.Fatalf("b holds %d shards 30 s after a stopped, want all %d", len(ownedShards(b)), ledger.PendingShards)
	}
	if tookAll > testTTL+5*time.Second {
		t.Errorf("b took all shards only at +%s, want by the first coordinate after the %s TTL", tookAll, testTTL)
	}

	// a comes back: its leases are gone; the group rebalances to 8/8.
	mustCoordinate(t, a)
	if got := ownedShards(a); len(got) != 0 {
		t.Fatalf("returning instance still believes it holds %v", got)
	}
	mustCoordinate(t, b)
	mustCoordinate(t, a)
	checkSplit(t, h, a, b)
}

func TestCoordinateRebalancesWhenThirdJoins(t *testing.T) {
	h := newHarness(t0)
	a, b, c := h.member(uuid.New()), h.member(uuid.New()), h.member(uuid.New())
	for _, l := range []*Loop{a, b} {
		h.coord.Heartbeat(context.Background(), l.cfg.Instance, testTTL)
	}
	mustCoordinate(t, a)
	mustCoordinate(t, b)
	checkSplit(t, h, a, b)

	mustCoordinate(t, c) // 3 members, fair share 6; nothing free yet
	if got := len(ownedShards(c)); got != 0 {
		t.Fatalf("newcomer owns %d shards while all are leased, want 0", got)
	}
	h.clock.Advance(2 * time.Second)
	mustCoordinate(t, a)
	mustCoordinate(t, b)
	if la, lb := len(ownedShards(a)), len(ownedShards(b)); la != 6 || lb != 6 {
		t.Fatalf("after the third joined: a holds %d, b %d; want each down to its fair share 6", la, lb)
	}
	mustCoordinate(t, c)
	sa, sb, sc := ownedShards(a), ownedShards(b), ownedShards(c)
	if len(sc) != 4 {
		t.Errorf("newcomer took %d shards, want the 4 given back", len(sc))
	}
	if !disjoint(sa, sb, sc) || len(sa)+len(sb)+len(sc) != ledger.PendingShards {
		t.Errorf("shards %v / %v / %v: want a disjoint cover of all %d", sa, sb, sc, ledger.PendingShards)
	}
	for _, l := range []*Loop{a, b, c} {
		if got, want := ownedShards(l), h.coord.LeasesOf(l.cfg.Instance); !slices.Equal(got, want) {
			t.Errorf("instance %s believes it holds %v, leases say %v", l.cfg.Instance, got, want)
		}
	}
}

func TestLeaveReleasesLeasesAndMembership(t *testing.T) {
	h := newHarness(t0)
	a, b := h.member(uuid.New()), h.member(uuid.New())
	for _, l := range []*Loop{a, b} {
		h.coord.Heartbeat(context.Background(), l.cfg.Instance, testTTL)
	}
	mustCoordinate(t, a)
	mustCoordinate(t, b)
	checkSplit(t, h, a, b)

	a.leave()
	if got := h.coord.LeasesOf(a.cfg.Instance); len(got) != 0 {
		t.Errorf("after leave, a still holds leases %v", got)
	}
	if h.coord.IsMember(a.cfg.Instance) {
		t.Errorf("after leave, a is still a member")
	}
	if a.Stats().OwnedShards != 0 {
		t.Errorf("after leave, Stats.OwnedShards = %d", a.Stats().OwnedShards)
	}
	// b takes everything at once, without waiting for a TTL.
	mustCoordinate(t, b)
	if got := len(ownedShards(b)); got != ledger.PendingShards {
		t.Errorf("after a left, b holds %d shards, want %d", got, ledger.PendingShards)
	}
}

func TestPassCoversOwnedShards(t *testing.T) {
	h := newHarness(t0.Add(30 * time.Second))
	a, b := h.member(uuid.New()), h.member(uuid.New())
	for _, l := range []*Loop{a, b} {
		h.coord.Heartbeat(context.Background(), l.cfg.Instance, testTTL)
	}
	mustCoordinate(t, a)
	mustCoordinate(t, b)
	var recs []ledger.Record
	for s := 0; s < ledger.PendingShards; s++ {
		r, _ := h.addPending(t, s, t0.Add(-10*time.Minute))
		recs = append(recs, r)
	}
	ra, err := a.Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if ra.Shards != 8 || ra.Finished != 8 {
		t.Errorf("a's pass = %+v, want 8 shards, 8 finished", ra)
	}
	for _, r := range recs {
		mine := slices.Contains(ownedShards(a), ledger.ShardOf(r.CreatedAt))
		if finished := h.fin.Recorded(r.Key) > 0; mine != finished {
			t.Errorf("request in shard %d (a's: %v): finished %v", ledger.ShardOf(r.CreatedAt), mine, finished)
		}
	}
	if _, err := b.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		wantFinished(t, h, r.Key)
	}
}

func TestRunCoordinatesPassesAndLeaves(t *testing.T) {
	h := newHarness(t0.Add(30 * time.Second))
	var recs []ledger.Record
	for s := 0; s < ledger.PendingShards; s++ {
		r, _ := h.addPending(t, s, t0.Add(-10*time.Minute))
		recs = append(recs, r)
	}
	l := h.loop(Config{Instance: uuid.New(), LeaseTTL: testTTL, Interval: 5 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()

	deadline := time.Now().Add(10 * time.Second)
	for l.Stats().Finished < int64(len(recs)) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if st := l.Stats(); st.Finished != int64(len(recs)) || st.OwnedShards != ledger.PendingShards {
		t.Errorf("Stats while running = %+v, want all %d shards owned and %d finished", st, ledger.PendingShards, len(recs))
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v, want nil on cancellation", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancellation")
	}
	if got := h.coord.LeasesOf(l.cfg.Instance); len(got) != 0 {
		t.Errorf("after Run, leases %v still held", got)
	}
	if h.coord.IsMember(l.cfg.Instance) {
		t.Errorf("after Run, still a member")
	}
	for _, r := range recs {
		wantFinished(t, h, r.Key)
	}
}

// With the coordinator failing, Run goes on passing the shards it holds
// (their leases still live) and says why each coordinate failed; on
// shutdown, a release or leave that fails is logged, Run still returns nil,
// and the loop claims no shard afterwards (the leases lapse by their TTL).
func TestRunPassesThroughCoordinatorFailuresAndLeavesAnyway(t *testing.T) {
	h := newHarness(t0.Add(30 * time.Second))
	var buf bytes.Buffer // slog's handler serializes the loop's writes; read after Run returned
	l := New(Config{Instance: uuid.New(), LeaseTTL: time.Hour, Interval: 5 * time.Millisecond}, h.ledger, h.fin.Finish, h.coord,
		slog.New(slog.NewJSONHandler(&buf, nil)))
	l.now = h.clock.Now
	mustCoordinate(t, l) // takes all 16 while the coordinator answers
	var recs []ledger.Record
	for s := 0; s < ledger.PendingShards; s++ {
		r, _ := h.addPending(t, s, t0.Add(-10*time.Minute))
		recs = append(recs, r)
	}
	const always = 1 << 20
	for _, st := range []cassandra.Stmt{leases.StmtHeartbeat, leases.StmtRelease, leases.StmtLeave} {
		h.coord.Arm(st, cassandra.FaultUnavailable, always)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for l.Stats().Finished < int64(len(recs)) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v, want nil on cancellation", err)
	}
	for _, r := range recs {
		wantFinished(t, h, r.Key)
	}
	if st := l.Stats(); st.OwnedShards != 0 {
		t.Errorf("after Run, Stats.OwnedShards = %d, want 0", st.OwnedShards)
	}
	for msg, want := range map[string]int{
		"reconciler coordination failed":       1, // at least
		"could not release shard lease":        ledger.PendingShards,
		"could not leave the reconciler group": 1,
	} {
		if got := len(logLines(t, &buf, msg)); got < want {
			t.Errorf("%d %q lines, want at least %d", got, msg, want)
		}
	}
}

// ------------------------------------------------------------------ concurrency

func TestConcurrentPassesCompleteEachRequestOnce(t *testing.T) {
	const (
		shard    = 11
		requests = 50
		rounds   = 10
	)
	for round := 0; round < rounds; round++ {
		h := newHarness(t0.Add(30 * time.Second))
		// Every statement gives up the processor first, to shake out
		// interleavings of the two loops.
		h.ledger.SetIntercept(func(ledgertest.Statement) cassandra.Fault { runtime.Gosched(); return 0 })
		var recs []ledger.Record
		for i := 0; i < requests; i++ {
			r, _ := h.addPending(t, shard, t0.Add(-10*time.Minute).Add(time.Duration(i)*time.Second))
			recs = append(recs, r)
		}
		loops := []*Loop{h.loop(Config{Instance: uuid.New()}), h.loop(Config{Instance: uuid.New()})}
		var (
			wg    sync.WaitGroup
			start = make(chan struct{})
			errs  = make([]error, len(loops))
		)
		for i, l := range loops {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[i] = l.PassShards(context.Background(), []int{shard})
			}()
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: loop %d: %v", round, i, err)
			}
		}
		for _, r := range recs {
			wantFinished(t, h, r.Key)
			if n := completions(h, r.Key); n != 1 {
				t.Fatalf("round %d: request %s completed %d times, want exactly 1", round, r.RequestID, n)
			}
			wantNoEntries(t, h, r.Key)
		}
		if f := loops[0].Stats().Finished + loops[1].Stats().Finished; f < requests {
			t.Fatalf("round %d: loops report %d finished, want at least %d", round, f, requests)
		}
		if n := h.fin.TotalCalls(); n < requests {
			t.Fatalf("round %d: %d finisher calls, want at least %d", round, n, requests)
		}
	}
}

// ------------------------------------------------------------------ config

func TestConfigDefaults(t *testing.T) {
	c := Config{}.withDefaults()
	if c.Instance == uuid.Nil || c.Interval != 2*time.Second || c.LeaseTTL != 15*time.Second || c.StallAfter != 2*time.Minute ||
		c.MaxAttempts != 5 || c.BackoffBase != 5*time.Second || c.BackoffMax != 5*time.Minute ||
		c.Margin != 2*time.Minute || c.InitialLookback != time.Hour || c.Concurrency != 64 {
		t.Errorf("defaults = %+v", c)
	}
	id := uuid.New()
	c = Config{Instance: id, Interval: time.Minute, MaxAttempts: 3}.withDefaults()
	if c.Instance != id || c.Interval != time.Minute || c.MaxAttempts != 3 {
		t.Errorf("set fields overridden: %+v", c)
	}
}

// A renew whose outcome settles as not applied while the lease is still
// this instance's makes the loop forget the shard; the next coordinate
// takes it back at once, not after the lease's TTL.
func TestCoordinateTakesBackALeaseItLostTrackOf(t *testing.T) {
	h := newHarness(t0)
	a := h.member(uuid.New())
	mustCoordinate(t, a)
	if n := len(ownedShards(a)); n != ledger.PendingShards {
		t.Fatalf("a alone holds %d shards, want %d", n, ledger.PendingShards)
	}
	// Every renew of this round times out unapplied: the leases stay a's.
	// (A lease is renewed once half its TTL has passed.)
	h.coord.Arm(leases.StmtRenew, cassandra.FaultTimeout, ledger.PendingShards)
	h.clock.Advance(testTTL / 2)
	if err := a.coordinate(context.Background()); err != nil {
		t.Logf("coordinate with every renew timing out: %v", err)
	}
	owners, err := h.coord.Owners(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for s, o := range owners {
		if o != a.cfg.Instance {
			t.Fatalf("shard %d owned by %v after unapplied renews, want still a", s, o)
		}
	}
	h.clock.Advance(time.Second) // well inside the TTL
	mustCoordinate(t, a)
	if n := len(ownedShards(a)); n != ledger.PendingShards {
		t.Fatalf("after the next coordinate a holds %d shards, want all %d back before the TTL", n, ledger.PendingShards)
	}
}

// stopOnRenew is a Coordinator whose first Renew stops the loop (cancels
// its context) before it is sent, as orderd shutting down mid-coordinate.
type stopOnRenew struct {
	*leasestest.MemoryCoordinator
	stop context.CancelFunc
}

func (c stopOnRenew) Renew(ctx context.Context, shard int, instance uuid.UUID, ttl time.Duration) (bool, error) {
	c.stop()
	return c.MemoryCoordinator.Renew(ctx, shard, instance, ttl)
}

// A renewal cut short by shutdown is no lost lease: the loop keeps its
// shards, so that leaving releases every lease at once instead of leaving
// them held, and their shards idle, until their TTL.
func TestShutdownDuringARenewalStillReleasesEveryLease(t *testing.T) {
	h := newHarness(t0)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	a := New(Config{Instance: uuid.New(), LeaseTTL: testTTL}, h.ledger, h.fin.Finish, stopOnRenew{h.coord, stop}, discardLog())
	a.now = h.clock.Now
	mustCoordinate(t, a)
	h.clock.Advance(testTTL / 2) // the leases are due for renewal

	if err := a.coordinate(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("coordinate stopped mid-renewal = %v, want context.Canceled", err)
	}
	if n := len(ownedShards(a)); n != ledger.PendingShards {
		t.Fatalf("after the stopped renewal the loop holds %d shards, want all %d", n, ledger.PendingShards)
	}
	a.leave()
	if got := h.coord.LeasesOf(a.cfg.Instance); len(got) != 0 {
		t.Errorf("after leave, leases %v still held", got)
	}
}

// renewCounter counts the lease renewals sent to the coordinator it wraps
// (renewals run concurrently).
type renewCounter struct {
	leases.Coordinator
	renews atomic.Int64
}

func (c *renewCounter) Renew(ctx context.Context, shard int, instance uuid.UUID, ttl time.Duration) (bool, error) {
	c.renews.Add(1)
	return c.Coordinator.Renew(ctx, shard, instance, ttl)
}

// A held lease is renewed once half its life has passed, not at every
// coordinate: each renewal is a Paxos round. Coordinating every 2 s (the
// default interval), the instance keeps every lease live throughout and
// renews each about every half life.
func TestCoordinateRenewsALeaseOnlyOnceHalfItsTTLHasPassed(t *testing.T) {
	h := newHarness(t0)
	counter := &renewCounter{Coordinator: h.coord}
	a := New(Config{Instance: uuid.New(), LeaseTTL: testTTL}, h.ledger, h.fin.Finish, counter, discardLog())
	a.now = h.clock.Now
	mustCoordinate(t, a) // takes all 16
	const step, span = 2 * time.Second, time.Minute
	for elapsed := step; elapsed <= span; elapsed += step {
		h.clock.Advance(step)
		// Live before this coordinate renews anything: no lease lapsed.
		if got := h.coord.LeasesOf(a.cfg.Instance); len(got) != ledger.PendingShards {
			t.Fatalf("at +%s a holds live leases on %d shards, want all %d", elapsed, len(got), ledger.PendingShards)
		}
		mustCoordinate(t, a)
		if elapsed < (testTTL-leaseSlack)/2 && counter.renews.Load() != 0 {
			t.Fatalf("at +%s, before half a lease's life, %d renewals were sent, want 0", elapsed, counter.renews.Load())
		}
	}
	// Renewed at the first coordinate at or after each half life (6.75 s,
	// so every 8 s here): 7 rounds of 16 in a minute, against 30 rounds
	// when renewing at every coordinate.
	rounds := int(span / (4 * step))
	if want := int64(rounds * ledger.PendingShards); counter.renews.Load() != want {
		t.Errorf("in %s, %d renewals were sent, want %d (each lease every %s)", span, counter.renews.Load(), want, 4*step)
	}
}

// A backlog heals Concurrency requests at a time, never more: the finisher
// holds every call until that many are in flight together.
func TestPassFinishesABucketConcurrentlyWithinTheBound(t *testing.T) {
	h := newHarness(t0.Add(10 * time.Second))
	const shard, n, bound = 5, 40, 4
	var keys []ledger.Key
	for range n {
		rec, _ := h.addPending(t, shard, t0.Add(-5*time.Minute))
		keys = append(keys, rec.Key)
	}
	var (
		mu             sync.Mutex
		inFlight, peak int
		reached        bool
		full           = make(chan struct{})
	)
	h.fin.before = func(ledger.Record) {
		mu.Lock()
		inFlight++
		peak = max(peak, inFlight)
		if inFlight == bound && !reached {
			reached = true
			close(full)
		}
		mu.Unlock()
		select {
		case <-full:
		case <-time.After(time.Second): // the bound was never reached: peak tells
		}
		mu.Lock()
		inFlight--
		mu.Unlock()
	}
	res := mustPass(t, h.loop(Config{Concurrency: bound}), shard)
	if res.Finished != n || res.Pending != n {
		t.Errorf("PassResult = %+v, want %d pending and finished", res, n)
	}
	if peak != bound {
		t.Errorf("at most %d requests were finished at once, want exactly %d", peak, bound)
	}
	for _, k := range keys {
		wantFinished(t, h, k)
		wantNoEntries(t, h, k)
	}
}

// stopAfterRemove is a Ledger that calls stop once its first RemoveEntry
// has been applied.
type stopAfterRemove struct {
	*ledgertest.Memory
	stop context.CancelFunc
	once sync.Once
}

func (l *stopAfterRemove) RemoveEntry(ctx context.Context, e ledger.DueEntry) error {
	err := l.Memory.RemoveEntry(ctx, e)
	l.once.Do(l.stop)
	return err
}

// A pass stopped mid-minute (orderd shutting down) starts no more entries,
// and those it did not start are read again by the next pass: the minute
// here is the current one, read incrementally, so an entry not started
// moves the shard's read position back to it (were it taken as settled,
// the next incremental read would start past it, and it would wait for the
// minute's final sweep, minutes later).
func TestPassStoppedMidMinuteLeavesTheRestForTheNextPass(t *testing.T) {
	h := newHarness(t0.Add(50 * time.Second))
	const shard, n = 4, 3
	var keys []ledger.Key
	for range n {
		rec, _ := h.addPending(t, shard, t0.Add(15*time.Second)) // due at about 12:00:45
		keys = append(keys, rec.Key)
	}
	h.coord.SetCursor(shard, t0)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	// The first request is finished and its entry removed; then the pass
	// is stopped, before the next one starts.
	stopping := &stopAfterRemove{Memory: h.ledger, stop: stop}
	l := New(Config{Concurrency: 1}, stopping, h.fin.Finish, h.coord, discardLog())
	l.now = h.clock.Now
	res, err := l.PassShards(ctx, []int{shard})
	t.Logf("stopped pass: %+v, %v", res, err)

	if calls := h.fin.TotalCalls(); calls != 1 {
		t.Fatalf("finisher calls = %d, want 1: no request starts once the pass is stopped", calls)
	}
	if n := sent(h.ledger, ledger.StmtRemove); n != 1 {
		t.Fatalf("RemoveEntry calls = %d, want 1 (the finished request's)", n)
	}
	unstarted := 0
	for _, k := range keys {
		if h.fin.Recorded(k) == 0 {
			unstarted++
			wantState(t, h, k, ledger.Pending)
			if es := h.ledger.Entries(k); len(es) != 1 {
				t.Errorf("request %s, not started: %d entries, want its one", k.RequestID, len(es))
			}
		}
	}
	if unstarted != n-1 {
		t.Errorf("%d requests left unstarted, want %d", unstarted, n-1)
	}

	h.clock.Advance(time.Second) // the same minute, still read incrementally
	if res := mustPass(t, l, shard); res.Finished < n-1 {
		t.Fatalf("next pass = %+v, want the %d unstarted requests finished", res, n-1)
	}
	for _, k := range keys {
		wantFinished(t, h, k)
		wantNoEntries(t, h, k)
	}
}

// The shards of a pass are passed side by side under one bound: a slow
// request in one shard does not hold up the backlog of the others (its
// finisher waits until every other shard's requests are finished, which
// shards passed one after another would never reach), and the requests in
// flight across all shards never pass Concurrency.
func TestPassShardsSideBySideUnderOneBound(t *testing.T) {
	h := newHarness(t0.Add(10 * time.Second))
	const slowShard, bound, perShard = 2, 4, 12
	others := []int{5, 9, 13}
	slow, _ := h.addPending(t, slowShard, t0.Add(-5*time.Minute))
	var keys []ledger.Key
	for _, s := range others {
		for range perShard {
			rec, _ := h.addPending(t, s, t0.Add(-5*time.Minute))
			keys = append(keys, rec.Key)
		}
	}
	var (
		mu                sync.Mutex
		inFlight, peak    int
		othersDone        int
		othersFinished    = make(chan struct{})
		slowSawOthersDone bool
	)
	h.fin.before = func(rec ledger.Record) {
		mu.Lock()
		inFlight++
		peak = max(peak, inFlight)
		mu.Unlock()
		if rec.Key == slow.Key {
			select {
			case <-othersFinished:
				slowSawOthersDone = true
			case <-time.After(5 * time.Second):
			}
		} else {
			time.Sleep(time.Millisecond) // long enough for the slots to fill
		}
		mu.Lock()
		inFlight--
		if rec.Key != slow.Key {
			if othersDone++; othersDone == len(keys) {
				close(othersFinished)
			}
		}
		mu.Unlock()
	}
	res := mustPass(t, h.loop(Config{Concurrency: bound}), append([]int{slowShard}, others...)...)
	if want := len(keys) + 1; res.Finished != want || res.Shards != len(others)+1 {
		t.Errorf("PassResult = %+v, want %d finished over %d shards", res, want, len(others)+1)
	}
	if !slowSawOthersDone {
		t.Error("the other shards' requests were not all finished while the slow one waited: shards were passed one after another")
	}
	if peak > bound {
		t.Errorf("%d requests were finished at once over the pass's shards, want at most %d", peak, bound)
	}
	for _, k := range append(keys, slow.Key) {
		wantFinished(t, h, k)
		wantNoEntries(t, h, k)
	}
}

// An order whose event the broker does not acknowledge is the outbox
// backlog: its entry is kept and rescheduled (never removed, never
// dead-lettered), counted as undelivered with its age, and as parked once
// past MaxAttempts — not as a pending or stuck request, since its order is
// recorded; its last_error says DELIVERY_FAILED. When the broker
// takes it, the entry goes and the backlog is empty again.
func TestUndeliveredEventIsBacklogThenParkedNeverDropped(t *testing.T) {
	now := t0.Add(30 * time.Second)
	h := newHarness(now)
	h.fin.SetFail(-1)
	h.fin.SetUndelivered(fault.New(fault.ReasonDeliveryFailed, errors.New("broker down")))
	const shard = 3
	rec, _ := h.addPending(t, shard, t0.Add(-10*time.Minute))
	created := rec.CreatedAt
	cfg := Config{MaxAttempts: 3, BackoffBase: 2 * time.Minute, BackoffMax: time.Hour}
	l := h.loop(cfg)
	for pass := 1; pass <= 4; pass++ {
		res := mustPass(t, l, shard)
		wantParked := 0
		if pass >= cfg.MaxAttempts {
			wantParked = 1
		}
		if res.Undelivered != 1 || res.Parked != wantParked || res.Retried != 1 || res.Dropped != 0 || res.Pending != 0 {
			t.Fatalf("pass %d: PassResult = %+v, want 1 undelivered, %d parked, 1 retried, none pending (the order is finished)", pass, res, wantParked)
		}
		st := l.Stats()
		if st.Stuck != 0 || st.Pending != 0 {
			t.Fatalf("pass %d: Stats = %+v; an undelivered event is neither a stuck nor a pending request", pass, st)
		}
		if st.Undelivered != 1 || st.Parked != int64(wantParked) || st.OldestUndelivered != h.clock.Now().Sub(created) {
			t.Fatalf("pass %d: Stats = %+v; want 1 undelivered aged since %s, %d parked", pass, st, created, wantParked)
		}
		got := wantState(t, h, rec.Key, ledger.Pending)
		if got.Attempts != pass || got.LastError != string(fault.ReasonDeliveryFailed) {
			t.Fatalf("pass %d: attempts %d, last_error %q; want %d, DELIVERY_FAILED", pass, got.Attempts, got.LastError, pass)
		}
		h.clock.Set(nextDue(t, h.ledger, rec.Key).Add(time.Second))
	}
	h.fin.SetFail(0)
	res := mustPass(t, l, shard)
	if res.Finished != 1 || res.Undelivered != 0 {
		t.Fatalf("PassResult after the broker came back = %+v, want 1 finished, 0 undelivered", res)
	}
	if st := l.Stats(); st.Undelivered != 0 || st.Parked != 0 || st.OldestUndelivered != 0 {
		t.Errorf("Stats after delivery = %+v, want an empty backlog", st)
	}
	if n := len(h.ledger.Entries(rec.Key)); n != 0 {
		t.Errorf("due entries after delivery = %d, want 0", n)
	}
}

// An order's event that the broker never took within its request's
// retention stays owed: once a delivery attempt failed, the entry outlives
// the claim, and once the claim is gone the event is published from the
// order's rows (Config.Redeliver) until the broker takes it. Before, the
// entry expired with the claim and the event was silently never delivered.
func TestAnEventOwedPastItsClaimsRetentionIsStillDelivered(t *testing.T) {
	now := t0.Add(30 * time.Second)
	h := newHarness(now)
	h.fin.SetFail(-1)
	h.fin.SetUndelivered(fault.New(fault.ReasonDeliveryFailed, errors.New("broker down")))
	const shard = 5
	rec, _ := h.addPending(t, shard, t0.Add(-10*time.Minute))
	var (
		redelivered []ledger.Key
		brokerDown  = true
	)
	cfg := Config{MaxAttempts: 2, BackoffBase: time.Minute, BackoffMax: time.Hour,
		Redeliver: func(_ context.Context, key ledger.Key, orderID uuid.UUID) (ledger.Settled, error) {
			if orderID != rec.EntityID {
				t.Errorf("Redeliver of order %s, want %s", orderID, rec.EntityID)
			}
			if brokerDown {
				return ledger.EventOwed, fault.New(fault.ReasonDeliveryFailed, errors.New("broker down"))
			}
			redelivered = append(redelivered, key)
			return ledger.Finished, nil
		}}
	l := h.loop(cfg)
	mustPass(t, l, shard)
	if es := h.ledger.Entries(rec.Key); len(es) != 1 || es[0].Owed != rec.EntityID {
		t.Fatalf("entries after a failed delivery = %+v, want one owing order %s", es, rec.EntityID)
	}

	h.clock.Advance(8 * 24 * time.Hour) // past the retention: the claim is gone
	if _, err := h.ledger.Get(context.Background(), rec.Key); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("the claim after its retention: %v, want gone", err)
	}
	res := mustPass(t, l, shard)
	if res.Undelivered != 1 || res.Parked != 1 || len(redelivered) != 0 {
		t.Errorf("pass with the broker still down = %+v, redelivered %v; want it undelivered, parked", res, redelivered)
	}
	if st := l.Stats(); st.Undelivered != 1 || st.Parked != 1 {
		t.Errorf("Stats = %+v, want 1 undelivered, parked", st)
	}
	if es := h.ledger.Entries(rec.Key); len(es) != 1 || es[0].Owed != rec.EntityID {
		t.Fatalf("entries after a failed redelivery = %+v, want it kept, owing order %s", es, rec.EntityID)
	}

	brokerDown = false
	h.clock.Advance(2 * time.Hour)
	mustPass(t, l, shard)
	if len(redelivered) != 1 || redelivered[0] != rec.Key {
		t.Errorf("redelivered %v, want request %s once", redelivered, rec.RequestID)
	}
	if es := h.ledger.Entries(rec.Key); len(es) != 0 {
		t.Errorf("entries once the broker took it = %+v, want none", es)
	}
	if st := l.Stats(); st.Undelivered != 0 || st.Parked != 0 {
		t.Errorf("Stats once delivered = %+v, want an empty backlog", st)
	}
}

// The loop tells an order whose event alone is owed from an unfinished
// request by what the finisher says it made of it (ledger.Settled), not by
// the reason of its error: the same error counts in the outbox's backlog,
// and makes the entry owe the event, only when the finisher said
// EventOwed.
func TestOwedOrUnfinishedIsWhatTheFinisherSays(t *testing.T) {
	deliveryFailed := fault.New(fault.ReasonDeliveryFailed, errors.New("broker down"))
	for _, tc := range []struct {
		name        string
		owed        bool
		pending     int
		undelivered int
	}{
		{"event owed", true, 0, 1},
		{"unfinished", false, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t0.Add(30 * time.Second))
			h.fin.SetFail(-1)
			if tc.owed {
				h.fin.SetUndelivered(deliveryFailed)
			} else {
				h.fin.SetErr(deliveryFailed)
			}
			const shard = 4
			rec, _ := h.addPending(t, shard, t0.Add(-10*time.Minute))
			res := mustPass(t, h.loop(Config{}), shard)
			if res.Pending != tc.pending || res.Undelivered != tc.undelivered || res.Retried != 1 {
				t.Errorf("PassResult = %+v, want pending %d, undelivered %d, retried 1", res, tc.pending, tc.undelivered)
			}
			es := h.ledger.Entries(rec.Key)
			if len(es) != 1 || (es[0].Owed == rec.EntityID) != tc.owed {
				t.Errorf("entries = %+v, want one, owing order %s: %v", es, rec.EntityID, tc.owed)
			}
			got, err := h.ledger.Get(context.Background(), rec.Key)
			if err != nil || got.Attempts != 1 || got.LastError != string(fault.ReasonDeliveryFailed) {
				t.Errorf("request after the pass = %+v, %v; want 1 attempt, last error DELIVERY_FAILED", got, err)
			}
		})
	}
}

// A finisher that neither finished the request nor said why is a failed
// attempt (the entry is rescheduled), never a settled request.
func TestUnfinishedWithoutAnErrorIsAFailedAttempt(t *testing.T) {
	h := newHarness(t0.Add(30 * time.Second))
	const shard = 6
	rec, _ := h.addPending(t, shard, t0.Add(-10*time.Minute))
	l := New(Config{}, h.ledger, func(context.Context, ledger.Record) (ledger.Settled, error) { return ledger.Unfinished, nil },
		h.coord, discardLog())
	l.now = h.clock.Now
	if res := mustPass(t, l, shard); res.Finished != 0 || res.Retried != 1 {
		t.Errorf("PassResult = %+v, want no request finished and one retried", res)
	}
	if es := h.ledger.Entries(rec.Key); len(es) != 1 {
		t.Errorf("entries = %+v, want the request's entry kept", es)
	}
}

// An entry that owes its order's event while its claim lives gets only the
// event, made from the order's rows (Config.Redeliver): the finisher, which
// rewrites every row of the order, runs once, for the attempt that recorded
// it. The broker's refusal is counted as before (an attempt noted, the
// event undelivered, parked after MaxAttempts); an event that cannot be
// made from the rows sends the request to the finisher again.
func TestAnOwedEventIsDeliveredWithoutFinishingTheRequestAgain(t *testing.T) {
	now := t0.Add(30 * time.Second)
	h := newHarness(now)
	h.fin.SetFail(-1)
	h.fin.SetUndelivered(fault.New(fault.ReasonDeliveryFailed, errors.New("broker down")))
	const shard = 6
	rec, _ := h.addPending(t, shard, t0.Add(-10*time.Minute))
	var (
		answer      = ledger.EventOwed
		redelivered int
	)
	cfg := Config{MaxAttempts: 3, BackoffBase: time.Minute, BackoffMax: time.Hour,
		Redeliver: func(_ context.Context, key ledger.Key, orderID uuid.UUID) (ledger.Settled, error) {
			if key != rec.Key || orderID != rec.EntityID {
				t.Errorf("Redeliver(%v, %s), want request %s's order %s", key, orderID, rec.RequestID, rec.EntityID)
			}
			redelivered++
			switch answer {
			case ledger.EventOwed:
				return answer, fault.New(fault.ReasonDeliveryFailed, errors.New("broker down"))
			case ledger.Unfinished:
				return answer, fault.New(fault.ReasonInternal, errors.New("the order has no such event"))
			}
			return answer, nil
		}}
	l := h.loop(cfg)
	attempts := func() int {
		got, err := h.ledger.Get(context.Background(), rec.Key)
		if err != nil {
			t.Fatal(err)
		}
		return got.Attempts
	}

	// The first attempt finishes the request; the broker refuses its event.
	if res := mustPass(t, l, shard); res.Undelivered != 1 || h.fin.Calls(rec.RequestID) != 1 || redelivered != 0 {
		t.Fatalf("first pass = %+v, finisher calls %d, redelivered %d; want the finisher once, the event undelivered",
			res, h.fin.Calls(rec.RequestID), redelivered)
	}
	// The next: only the event, refused again, counted as before.
	h.clock.Advance(2 * time.Hour)
	res := mustPass(t, l, shard)
	if h.fin.Calls(rec.RequestID) != 1 || redelivered != 1 {
		t.Errorf("second pass: finisher calls %d, redelivered %d; want 1 and 1", h.fin.Calls(rec.RequestID), redelivered)
	}
	if res.Undelivered != 1 || res.Retried != 1 || attempts() != 2 {
		t.Errorf("second pass = %+v, attempts %d; want it undelivered, retried, the attempt noted (2)", res, attempts())
	}
	h.clock.Advance(2 * time.Hour)
	if res := mustPass(t, l, shard); res.Parked != 1 || h.fin.Calls(rec.RequestID) != 1 {
		t.Errorf("third pass = %+v, finisher calls %d; want it parked (3 attempts), the finisher not run", res, h.fin.Calls(rec.RequestID))
	}

	// An event that cannot be made from the rows: the finisher decides.
	answer = ledger.Unfinished
	h.clock.Advance(2 * time.Hour)
	mustPass(t, l, shard)
	if h.fin.Calls(rec.RequestID) != 2 {
		t.Errorf("finisher calls after an unmakeable event = %d, want 2", h.fin.Calls(rec.RequestID))
	}

	// The broker takes it: the entry goes.
	answer = ledger.Finished
	h.clock.Advance(2 * time.Hour)
	if res := mustPass(t, l, shard); res.Finished != 1 {
		t.Errorf("pass once the broker takes it = %+v, want it finished", res)
	}
	if es := h.ledger.Entries(rec.Key); len(es) != 0 {
		t.Errorf("entries once delivered = %+v, want none", es)
	}
	if h.fin.Calls(rec.RequestID) != 2 {
		t.Errorf("finisher calls = %d, want 2 (the delivery wrote nothing)", h.fin.Calls(rec.RequestID))
	}
}
