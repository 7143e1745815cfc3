package reconciler

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/platform/clockskew"
	"github.com/atlasmart/orderd/ledger"
)

// stepClock is the clock monitor of a process whose clock, proc, may step
// away from the cluster's (h.clock, which is also its monotonic clock:
// nobody steps it), measured once now.
func stepClock(t *testing.T, h *harness, proc *fakeClock) *clockskew.Monitor {
	t.Helper()
	mon := clockskew.New(clockskew.Config{Max: 2 * time.Second, Now: proc.Now, Monotonic: func() time.Duration { return h.clock.Now().Sub(t0) }},
		func(context.Context) (time.Time, error) { return h.clock.Now(), nil }, discardLog())
	if _, err := mon.Measure(context.Background()); err != nil {
		t.Fatal(err)
	}
	return mon
}

// steppingInstance is a reconciler on proc's clock, checked by its
// monitor, holding its shards, every shard's cursor 3 minutes back.
func steppingInstance(t *testing.T, h *harness, proc *fakeClock) (*Loop, *clockskew.Monitor) {
	t.Helper()
	mon := stepClock(t, h, proc)
	for s := range ledger.PendingShards {
		h.coord.SetCursor(s, ledger.BucketOf(t0.Add(-3*time.Minute)))
	}
	a := New(Config{Instance: uuid.New(), LeaseTTL: testTTL, Clock: mon.Check}, h.ledger, h.fin.Finish, h.coord, discardLog())
	a.now = proc.Now
	mustCoordinate(t, a)
	return a, mon
}

// reconcileFor runs a correct instance (its clock the cluster's) for d,
// a pass every 5 s.
func reconcileFor(t *testing.T, h *harness, d time.Duration) {
	t.Helper()
	b := h.member(uuid.New())
	for range d / (5 * time.Second) {
		h.clock.Advance(5 * time.Second)
		mustCoordinate(t, b)
		if _, err := b.Pass(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// This process's clock steps 10 minutes ahead of the cluster's just after
// a measurement that found them equal. Had the next pass believed it, it
// would have swept, dropped and passed every minute up to the stepped
// time less the margin, and the entry of a claim made a second later by a
// handler whose clock is right would fall in one of those minutes, behind
// the cursor, where no reconciler reads again. The step is seen at once
// (clockskew.Monitor.Check): the pass does nothing, and the request is
// finished by a correct instance.
func TestClockStepAheadPassesNoMinuteNotYetWritten(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t0) // the cluster's clock (ledger, coordinator), and every correct process's
	proc := newFakeClock(t0)
	a, mon := steppingInstance(t, h, proc)
	if _, err := a.Pass(ctx); err != nil {
		t.Fatal(err)
	}

	proc.Advance(10 * time.Minute) // the step
	mustCoordinate(t, a)
	if _, err := a.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	const shard = 5
	if cur, _ := h.coord.CursorOf(shard); cur.After(h.clock.Now()) {
		t.Errorf("shard %d cursor after a pass on the stepped clock: %s, past the cluster's now %s", shard, cur.Format("15:04"), h.clock.Now().Format("15:04:05"))
	}

	// One second later a handler with a correct clock claims a request.
	h.clock.Advance(time.Second)
	rec, e := h.addPending(t, shard, h.clock.Now())

	// The next measurement finds the skew: a stands down.
	h.clock.Advance(9 * time.Second)
	proc.Advance(9 * time.Second)
	_, _ = mon.Measure(ctx)
	if err := a.coordinate(ctx); err != nil {
		t.Fatal(err)
	}
	// A correct instance reconciles for the next 15 minutes.
	reconcileFor(t, h, 15*time.Minute)
	if h.fin.Calls(rec.RequestID) == 0 {
		cur, _ := h.coord.CursorOf(shard)
		t.Errorf("request claimed at %s (entry due %s, minute %s) never reached the finisher in 15 min: shard cursor %s is past its minute; entries left %d",
			rec.CreatedAt.Format("15:04:05"), e.NotBefore.Format("15:04:05"), e.Due.Format("15:04"), cur.Format("15:04"), len(h.ledger.Entries(rec.Key)))
	}
}

// An entry's attempt fails while this process's clock steps 10 minutes
// back. Dated by that clock, its reschedule would land in a minute the
// shard's cursor passed long ago, the old entry marked done, and no pass of
// any instance would list the request again. The reschedule asks the clock
// first (Loop.stamp): refused, the entry stays, and a correct instance
// retries and finishes the request.
func TestRescheduleAfterAClockStepBackStaysReadable(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t0)
	proc := newFakeClock(t0)
	a, mon := steppingInstance(t, h, proc)

	const shard = 7
	rec, _ := h.addPending(t, shard, t0.Add(-40*time.Second)) // due about 11:59:50
	h.fin.SetFail(1)                                          // its first attempt fails
	block := h.blockFirstFinish()
	t.Cleanup(block.finish)
	done := make(chan error, 1)
	go func() { _, err := a.Pass(ctx); done <- err }()
	block.busy(t)
	proc.Advance(-10 * time.Minute) // the step, while the attempt is in flight
	block.finish()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	cur, _ := h.coord.CursorOf(shard)
	for _, e := range h.ledger.Entries(rec.Key) {
		if e.Due.Before(cur) {
			t.Errorf("entry of the request after the failed attempt: due %s (minute %s), behind the shard's cursor %s",
				e.NotBefore.Format("15:04:05"), e.Due.Format("15:04"), cur.Format("15:04"))
		}
	}

	// Skew found at the next measurement: a stands down; a correct instance
	// reconciles for the next 15 minutes.
	_, _ = mon.Measure(ctx)
	if err := a.coordinate(ctx); err != nil {
		t.Fatal(err)
	}
	reconcileFor(t, h, 15*time.Minute)
	if n := h.fin.Calls(rec.RequestID); n < 2 || h.fin.Recorded(rec.Key) == 0 {
		t.Errorf("request whose attempt failed: finisher called %d times in 15 min, order recorded %d; want retried after its backoff and finished",
			n, h.fin.Recorded(rec.Key))
	}
}
