package reconciler

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/stores/leases"
	"github.com/atlasmart/orderd/ledger"
)

// blockFirst makes the harness's finisher hold its first call until
// released, and says which request that call was for.
type blockFirst struct {
	entered chan ledger.Key
	release chan struct{}
	once    sync.Once // closes release
}

func (h *harness) blockFirstFinish() *blockFirst {
	b := &blockFirst{entered: make(chan ledger.Key, 1), release: make(chan struct{})}
	var first sync.Once
	h.fin.before = func(rec ledger.Record) {
		first.Do(func() {
			b.entered <- rec.Key
			<-b.release
		})
	}
	return b
}

// busy waits until the first call is being held, and returns its request.
func (b *blockFirst) busy(t *testing.T) ledger.Key {
	t.Helper()
	select {
	case key := <-b.entered:
		return key
	case <-time.After(30 * time.Second):
		t.Fatal("the pass never called the finisher")
		return ledger.Key{}
	}
}

func (b *blockFirst) finish() { b.once.Do(func() { close(b.release) }) }

// heartbeatCounter counts the heartbeats its Coordinator answered.
type heartbeatCounter struct {
	leases.Coordinator
	n atomic.Int64
}

func (c *heartbeatCounter) Heartbeat(ctx context.Context, instance uuid.UUID, ttl time.Duration) (int, error) {
	defer c.n.Add(1)
	return c.Coordinator.Heartbeat(ctx, instance, ttl)
}

// coordinatedSince waits until two more heartbeats than seen were
// answered: coordinates run one after another, so the second began after
// the wait did. It reports false if that took longer than a minute.
func (c *heartbeatCounter) coordinatedSince(seen int64) bool {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if c.n.Load() >= seen+2 {
			return true
		}
	}
	return false
}

// A pass that outlasts the lease TTL (entry after entry waiting on a broker
// that is down) does not hold up the leases: Run renews them on their own
// schedule meanwhile, and no other instance can take the loop's shards.
// Before, leases and the heartbeat were renewed only between passes, and
// every lease lapsed 15 s into such a pass.
func TestLeasesAreRenewedWhileAPassOutlastsTheirTTL(t *testing.T) {
	h := newHarness(t0.Add(30 * time.Second))
	const shard = 3
	h.addPending(t, shard, t0.Add(-10*time.Minute))
	block := h.blockFirstFinish()
	coord := &heartbeatCounter{Coordinator: h.coord}
	a := New(Config{Instance: uuid.New(), LeaseTTL: testTTL, Interval: time.Millisecond}, h.ledger, h.fin.Finish, coord, discardLog())
	a.now = h.clock.Now
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	stop := sync.OnceValue(func() error {
		block.finish()
		cancel()
		return <-done
	})
	t.Cleanup(func() { stop() })
	block.busy(t)

	other := uuid.New()
	const step = 5 * time.Second
	waiting := true
	for elapsed := step; elapsed <= 4*testTTL; elapsed += step {
		seen := coord.n.Load()
		h.clock.Advance(step)
		if waiting && !coord.coordinatedSince(seen) {
			t.Errorf("at +%s: a coordinated %d times in a minute while its pass was held", elapsed, coord.n.Load()-seen)
			waiting = false // the leases will tell
		}
		if got := h.coord.LeasesOf(a.cfg.Instance); len(got) != ledger.PendingShards {
			t.Fatalf("at +%s of a pass held on one entry, a holds live leases on %v, want all %d shards", elapsed, got, ledger.PendingShards)
		}
		for s := range ledger.PendingShards {
			if ok, err := h.coord.Acquire(context.Background(), s, other, testTTL); ok || err != nil {
				t.Fatalf("at +%s: another instance's Acquire(%d) = %v, %v; want false: the lease is a's", elapsed, s, ok, err)
			}
		}
	}
	if st := a.Stats(); st.OwnedShards != ledger.PendingShards || st.LostLeases != 0 {
		t.Errorf("Stats = %+v, want all %d shards owned and none lost", st, ledger.PendingShards)
	}
	if err := stop(); err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
	if got := h.coord.LeasesOf(a.cfg.Instance); len(got) != 0 {
		t.Errorf("after Run, leases %v still held", got)
	}
}

// A lease lost mid-pass stops the pass from starting any further entry of
// its shard. Here a's clock runs slow against the coordinator's, so its
// lease lapses there while a still counts it live; another instance takes
// the shard, and a's next renewal does not apply. The entry a was settling
// then runs to its end (every step on a request is safe to race); the next
// entry of the shard is left to the new holder.
func TestPassStopsStartingWorkOnAShardWhoseLeaseWasLost(t *testing.T) {
	h := newHarness(t0.Add(30 * time.Second)) // the coordinator's clock, and b's
	aClock := newFakeClock(h.clock.Now())
	var logs bytes.Buffer
	a := New(Config{Instance: uuid.New(), LeaseTTL: testTTL, Concurrency: 1}, h.ledger, h.fin.Finish, h.coord,
		slog.New(slog.NewJSONHandler(&logs, nil)))
	a.now = aClock.Now
	mustCoordinate(t, a) // alone: all 16
	const shard = 3
	first, _ := h.addPending(t, shard, t0.Add(-10*time.Minute))
	second, _ := h.addPending(t, shard, t0.Add(-10*time.Minute).Add(time.Second))
	block := h.blockFirstFinish()
	t.Cleanup(block.finish)
	passed := make(chan PassResult, 1)
	go func() {
		res, err := a.Pass(context.Background())
		if err != nil {
			t.Errorf("Pass: %v", err)
		}
		passed <- res
	}()
	busy := block.busy(t)
	if busy != first.Key && busy != second.Key {
		t.Fatalf("the finisher was called for %v, not one of the shard's requests", busy)
	}

	h.clock.Advance(testTTL)    // the lease lapses at the coordinator...
	aClock.Advance(testTTL / 2) // ...while a counts it live, due for renewal
	b := h.member(uuid.New())
	mustCoordinate(t, b)
	if !slices.Contains(ownedShards(b), shard) {
		t.Fatalf("b holds %v after a's leases lapsed, want shard %d among them", ownedShards(b), shard)
	}
	mustCoordinate(t, a) // its renewals do not apply
	if held := ownedShards(a); slices.Contains(held, shard) {
		t.Fatalf("after a renewal that did not apply a still holds shard %d (%v)", shard, held)
	}
	block.finish()
	res := <-passed

	next := second.Key
	if busy == second.Key {
		next = first.Key
	}
	if n := h.fin.Calls(next.RequestID); n != 0 {
		t.Errorf("the pass started the shard's next entry after its lease was lost (finisher calls = %d, want 0)", n)
	}
	if n := h.fin.Recorded(busy); n != 1 {
		t.Errorf("the entry in flight when the lease was lost: order recorded %d times, want 1", n)
	}
	if res.Lost < 1 || res.Finished != 1 {
		t.Errorf("PassResult = %+v, want the shard counted lost and the entry in flight finished", res)
	}
	if st := a.Stats(); st.LostLeases != ledger.PendingShards {
		t.Errorf("Stats.LostLeases = %d, want %d (every renewal did not apply)", st.LostLeases, ledger.PendingShards)
	}
	if got := len(logLines(t, &logs, "lost shard lease")); got != ledger.PendingShards {
		t.Errorf("%d \"lost shard lease\" lines, want %d", got, ledger.PendingShards)
	}
	// The new holder settles what a left.
	if _, err := b.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantFinished(t, h, next)
}

// Renewals that fail, or whose outcome stays unknown, keep the leases until
// they could have lapsed: until a lease's life (its TTL less the slack of
// Cassandra's whole-second TTLs) has passed, by the loop's own clock, since
// the last renewal that applied was sent. Until then the loop
// passes its shards and tries again; from then on, it starts no work there
// (even before its next coordinate), and its next coordinate counts the
// leases lost and takes them back through the coordinator, which answers
// again (a renewal that did apply left the lease this loop's).
func TestRenewalsFailingUntilTheLeaseCouldHaveLapsedLoseIt(t *testing.T) {
	for _, tc := range []struct {
		name    string
		f       cassandra.Fault
		settled bool // the settling read of an unknown outcome fails too: false
	}{
		{"unavailable", cassandra.FaultUnavailable, true},
		{"timed out, outcome unknown", cassandra.FaultTimeout, false},
		{"applied, answer lost, outcome unknown", cassandra.FaultLoseResponse, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t0.Add(30 * time.Second))
			a := h.member(uuid.New())
			mustCoordinate(t, a) // all 16, sent at the start
			taken := h.clock.Now()
			const shard = 3
			life := testTTL - leaseSlack
			tries := []time.Duration{life / 2, life - time.Second/2}
			failing := len(tries) * ledger.PendingShards
			h.coord.Arm(leases.StmtRenew, tc.f, failing)
			if !tc.settled {
				h.coord.Arm(leases.StmtLease, cassandra.FaultUnavailable, failing)
			}
			for _, at := range tries {
				h.clock.Set(taken.Add(at))
				if err := a.coordinate(context.Background()); err == nil {
					t.Fatalf("at +%s: coordinate with failing renewals returned no error", at)
				}
				if st := a.Stats(); st.OwnedShards != ledger.PendingShards || st.LostLeases != 0 {
					t.Fatalf("at +%s, before the leases could have lapsed: Stats = %+v, want all %d held, none lost", at, st, ledger.PendingShards)
				}
			}

			h.clock.Set(taken.Add(life))
			rec, _ := h.addPending(t, shard, t0.Add(-10*time.Minute))
			if st := a.Stats(); st.OwnedShards != 0 {
				t.Errorf("at +%s: Stats.OwnedShards = %d, want 0: the leases could have lapsed", life, st.OwnedShards)
			}
			res, err := a.Pass(context.Background())
			if err != nil || res.Shards != 0 || h.fin.Calls(rec.RequestID) != 0 {
				t.Fatalf("pass once the leases could have lapsed: %+v, %v, finisher calls %d; want no shard passed",
					res, err, h.fin.Calls(rec.RequestID))
			}
			if n := h.coord.Pending(leases.StmtRenew) + h.coord.Pending(leases.StmtLease); n != 0 {
				t.Fatalf("%d armed faults never served", n)
			}

			mustCoordinate(t, a)
			if st := a.Stats(); st.LostLeases != ledger.PendingShards {
				t.Errorf("Stats.LostLeases = %d, want %d", st.LostLeases, ledger.PendingShards)
			}
			if got, want := ownedShards(a), h.coord.LeasesOf(a.cfg.Instance); len(got) != ledger.PendingShards || !slices.Equal(got, want) {
				t.Fatalf("once the coordinator answers: a holds %v, leased to it %v; want all %d", got, want, ledger.PendingShards)
			}
		})
	}
}

// lateRenew is a Coordinator whose first renewal is answered late: it
// applies when sent, and its answer arrives after the clock moved by delay.
type lateRenew struct {
	leases.Coordinator
	clock *fakeClock
	delay time.Duration
	once  sync.Once
	shard int
}

func (c *lateRenew) Renew(ctx context.Context, shard int, instance uuid.UUID, ttl time.Duration) (bool, error) {
	ok, err := c.Coordinator.Renew(ctx, shard, instance, ttl)
	c.once.Do(func() {
		c.shard = shard
		c.clock.Advance(c.delay)
	})
	return ok, err
}

// A renewal answered late keeps its lease only until a lease's life has
// passed since it was sent: the coordinator counts the TTL from when it
// landed, which may be as early as that. Counted from the answer, the loop
// would pass the shard after the lease may be another's. (The renewals
// sent beside it may go before or after the clock moves: only the late
// one's shard is judged.)
func TestALateRenewalCountsFromWhenItWasSent(t *testing.T) {
	h := newHarness(t0.Add(30 * time.Second))
	const delay = 5 * time.Second
	coord := &lateRenew{Coordinator: h.coord, clock: h.clock, delay: delay}
	a := New(Config{Instance: uuid.New(), LeaseTTL: testTTL}, h.ledger, h.fin.Finish, coord, discardLog())
	a.now = h.clock.Now
	mustCoordinate(t, a)
	life := testTTL - leaseSlack
	h.clock.Advance(life / 2)
	sent := h.clock.Now()
	mustCoordinate(t, a) // the first renewal's answer comes delay later
	late := coord.shard
	rec, _ := h.addPending(t, late, t0.Add(-10*time.Minute))

	h.clock.Set(sent.Add(life))
	if !slices.Contains(h.coord.LeasesOf(a.cfg.Instance), late) {
		t.Fatalf("shard %d's late renewal did not apply: the lease is not a's in the coordinator", late)
	}
	if _, err := a.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := h.fin.Calls(rec.RequestID); n != 0 {
		t.Errorf("a lease's life after the late renewal of shard %d was sent, a pass worked the shard (finisher called %d times); want its hold ended", late, n)
	}
}

// A pass that keeps moving on keeps its leases however long it runs; one
// that makes no progress for StallAfter (a call that never returns) lets
// its leases and its membership lapse, as if its instance had died, so
// that another instance takes its shards; once it moves on again, the
// loop coordinates again.
func TestAPassWithoutProgressLetsItsLeasesLapse(t *testing.T) {
	h := newHarness(t0.Add(30 * time.Second))
	const (
		shard      = 3
		entries    = 4
		slowEntry  = 40 * time.Second
		stallAfter = time.Minute
		step       = 5 * time.Second // how often the loop coordinates
	)
	for i := range entries + 1 {
		h.addPending(t, shard, t0.Add(-10*time.Minute).Add(time.Duration(i)*time.Second))
	}
	// The other shards are another instance's for the whole test, so that
	// a holds shard 3 alone: reading them would be progress too.
	for s := range ledger.PendingShards {
		if s != shard {
			if ok, err := h.coord.Acquire(context.Background(), s, uuid.New(), time.Hour); !ok || err != nil {
				t.Fatalf("setup: Acquire(%d) = %v, %v", s, ok, err)
			}
		}
	}
	a := h.loop(Config{Instance: uuid.New(), LeaseTTL: testTTL, StallAfter: stallAfter, Concurrency: 1})
	mustCoordinate(t, a)
	if got := ownedShards(a); !slices.Equal(got, []int{shard}) {
		t.Fatalf("setup: a holds %v, want [%d]", got, shard)
	}
	var (
		calls    atomic.Int32
		hung     = make(chan struct{})
		resume   = make(chan struct{})
		resumed  sync.Once
		keptErrs = make(chan error, entries)
	)
	// Each of the first entries takes slowEntry (more than half StallAfter
	// and of the TTL), with the loop coordinating meanwhile; the last hangs.
	h.fin.before = func(ledger.Record) {
		if calls.Add(1) > entries {
			close(hung)
			<-resume
			return
		}
		for range slowEntry / step {
			h.clock.Advance(step)
			if err := a.coordinate(context.Background()); err != nil {
				keptErrs <- err
				return
			}
			if got := h.coord.LeasesOf(a.cfg.Instance); !slices.Equal(got, []int{shard}) {
				keptErrs <- fmt.Errorf("a holds live leases on %v, want [%d]", got, shard)
				return
			}
		}
	}
	finish := func() { resumed.Do(func() { close(resume) }) }
	t.Cleanup(finish)
	passed := make(chan PassResult, 1)
	go func() {
		res, _ := a.Pass(context.Background())
		passed <- res
	}()
	select {
	case <-hung:
	case <-passed:
		t.Fatalf("the pass ended before its last entry (%d finisher calls); kept the leases: %v", calls.Load(), <-keptErrs)
	}
	close(keptErrs)
	for err := range keptErrs {
		t.Errorf("while the pass moved on, entry after entry: %v", err)
	}

	// Hung: renewals stop once StallAfter has passed without progress.
	for waited := step; waited <= stallAfter+testTTL; waited += step {
		h.clock.Advance(step)
		err := a.coordinate(context.Background())
		if stalled := waited > stallAfter; stalled != (err != nil) {
			t.Errorf("%s into the hung entry: coordinate = %v; want an error only past %s", waited, err, stallAfter)
			break
		}
	}
	if st := a.Stats(); st.OwnedShards != 0 || st.LostLeases != 1 {
		t.Errorf("Stats = %+v, want no shard owned and its lease counted lost", st)
	}
	if h.coord.IsMember(a.cfg.Instance) {
		t.Error("the stalled instance is still a member")
	}
	b := h.member(uuid.New())
	mustCoordinate(t, b)
	if got := ownedShards(b); !slices.Equal(got, []int{shard}) {
		t.Fatalf("another instance took %v, want the stalled instance's shard %d", got, shard)
	}

	finish()
	if res := <-passed; res.Lost != 1 || res.Finished != entries+1 {
		t.Errorf("PassResult = %+v, want shard %d lost and the hung entry finished", res, shard)
	}
	mustCoordinate(t, a) // moving on: coordinates again (and rejoins the group)
	if !h.coord.IsMember(a.cfg.Instance) {
		t.Error("after its pass ended, a is not a member again")
	}
}

// An instance whose clock is too far from the cluster's judges nothing
// due: it gives every lease back and leaves the group at once (the other
// instances take its share at their next coordinate, not after the leases
// lapse), passes nothing, even over due entries of shards it held, and
// takes its share again once its clock is back.
func TestASkewedClockGivesItsShardsToTheOthers(t *testing.T) {
	h := newHarness(t0.Add(30 * time.Second))
	var skew error
	a := h.loop(Config{Instance: uuid.New(), LeaseTTL: testTTL, Clock: func() error { return skew }})
	b := h.member(uuid.New())
	mustCoordinate(t, a)
	if n := len(ownedShards(a)); n != ledger.PendingShards {
		t.Fatalf("a alone holds %d shards, want all", n)
	}
	rec, _ := h.addPending(t, 4, t0.Add(-10*time.Minute))

	skew = fault.New(fault.ReasonClockSkewed, errors.New("this clock is 90s off the cluster's"))
	if err := a.coordinate(context.Background()); err != nil {
		t.Fatalf("coordinate with a skewed clock = %v, want its shards given back", err)
	}
	if got := ownedShards(a); len(got) != 0 {
		t.Errorf("a holds %v with a skewed clock, want none", got)
	}
	if h.coord.IsMember(a.cfg.Instance) {
		t.Error("a is still a member with a skewed clock")
	}
	if res, err := a.Pass(context.Background()); err != nil || res.Shards != 0 || h.fin.Calls(rec.RequestID) != 0 {
		t.Errorf("pass with a skewed clock = %+v, %v, finisher calls %d; want nothing passed", res, err, h.fin.Calls(rec.RequestID))
	}
	mustCoordinate(t, b)
	if n := len(ownedShards(b)); n != ledger.PendingShards {
		t.Errorf("b took %d shards at its next coordinate, want all of a's", n)
	}
	if st := a.Stats(); st.ClockSkipped < 2 {
		t.Errorf("Stats.ClockSkipped = %d, want the coordinate and the pass counted", st.ClockSkipped)
	}

	skew = nil
	h.clock.Advance(testTTL) // b's leases stay b's; a joins and gets its share as they rebalance
	mustCoordinate(t, a)
	if !h.coord.IsMember(a.cfg.Instance) {
		t.Error("a did not rejoin once its clock was back")
	}
}

// The outbox gauges hold between the passes that list a parked event
// (each lists it once per backoff), and a shard's events are counted by
// the instance holding it: given back, they leave this instance's gauges at
// once and join the taker's as they fall due there.
func TestBacklogGaugesHoldBetweenPassesAndGoWithTheShard(t *testing.T) {
	h := newHarness(t0.Add(30 * time.Second))
	h.fin.SetFail(-1)
	h.fin.SetUndelivered(fault.New(fault.ReasonDeliveryFailed, errors.New("broker down")))
	cfg := Config{LeaseTTL: time.Hour, MaxAttempts: 1, BackoffBase: 10 * time.Minute, BackoffMax: 10 * time.Minute}
	member := func() *Loop { c := cfg; c.Instance = uuid.New(); return h.loop(c) }
	pass := func(l *Loop) {
		t.Helper()
		if _, err := l.Pass(context.Background()); err != nil {
			t.Fatalf("pass: %v", err)
		}
	}
	want := func(l *Loop, name string, n int64) {
		t.Helper()
		if st := l.Stats(); st.Undelivered != n || st.Parked != n {
			t.Errorf("%s: Stats undelivered %d, parked %d; want %d of each", name, st.Undelivered, st.Parked, n)
		}
	}
	a := member()
	mustCoordinate(t, a)
	created := t0.Add(-10 * time.Minute)
	for s := range ledger.PendingShards {
		h.addPending(t, s, created)
	}
	pass(a)
	want(a, "a's first pass", ledger.PendingShards)

	h.clock.Advance(time.Minute) // none falls due again for five minutes at least
	pass(a)
	want(a, "a pass that lists none of them", ledger.PendingShards)
	if st := a.Stats(); st.OldestUndelivered < 11*time.Minute {
		t.Errorf("Stats.OldestUndelivered = %s, want the age of the oldest, over 11m", st.OldestUndelivered)
	}

	b := member()
	mustCoordinate(t, b) // b joins; a gives half back at its next coordinate, b takes it at its own
	mustCoordinate(t, a)
	mustCoordinate(t, b)
	if na, nb := len(ownedShards(a)), len(ownedShards(b)); na != 8 || nb != 8 {
		t.Fatalf("shards a=%d b=%d, want 8 each", na, nb)
	}
	pass(a)
	pass(b)
	want(a, "a after giving half its shards back", 8)
	want(b, "b before its shards' events fall due again", 0)

	h.clock.Advance(10 * time.Minute)
	pass(a)
	pass(b)
	want(a, "a once they fell due again", 8)
	want(b, "b once they fell due again", 8)

	h.fin.SetFail(0)
	h.clock.Advance(10 * time.Minute)
	pass(a)
	pass(b)
	want(a, "a once the broker took them", 0)
	want(b, "b once the broker took them", 0)
}

// Cassandra counts a lease's TTL in whole seconds from the second its write
// lands in, so a lease taken late in a second is gone up to a second before
// its TTL has passed since it was sent. The holder's hold ends before
// then: once another instance has taken the shard, the first starts no
// work there.
func TestAHoldEndsBeforeTheLeaseCanLapseInTheCluster(t *testing.T) {
	h := newHarness(t0.Add(30*time.Second + 900*time.Millisecond))
	a := h.member(uuid.New())
	mustCoordinate(t, a)
	const shard = 3
	rec, _ := h.addPending(t, shard, t0.Add(-10*time.Minute))

	h.clock.Advance(testTTL - 800*time.Millisecond) // the leases' second plus the TTL has passed
	if owners, err := h.coord.Owners(context.Background()); err != nil || len(owners) != 0 {
		t.Fatalf("leases in the cluster %v (%v): want all lapsed", owners, err)
	}
	b := h.member(uuid.New())
	mustCoordinate(t, b)
	res, err := a.Pass(context.Background())
	if err != nil || res.Shards != 0 || h.fin.Calls(rec.RequestID) != 0 {
		t.Fatalf("a's pass after b took its shards: %+v, %v, finisher calls %d; want no shard passed", res, err, h.fin.Calls(rec.RequestID))
	}
	if st := a.Stats(); st.OwnedShards != 0 {
		t.Errorf("a counts %d shards held after its leases lapsed in the cluster", st.OwnedShards)
	}
}

// slowRenew answers its first renewal only once every other renewal of the
// same coordinate has been answered (or a second has passed), after the
// clock moved on by delay, its outcome unknown: a renewal waiting out a
// timeout.
type slowRenew struct {
	leases.Coordinator
	clock  *fakeClock
	delay  time.Duration
	others int // renewals to wait for

	mu       sync.Mutex
	first    bool
	answered int
	done     chan struct{}
}

func (c *slowRenew) Renew(ctx context.Context, shard int, instance uuid.UUID, ttl time.Duration) (bool, error) {
	c.mu.Lock()
	slow := !c.first
	c.first = true
	c.mu.Unlock()
	if slow {
		select {
		case <-c.done:
		case <-time.After(time.Second):
		}
		c.clock.Advance(c.delay)
		return false, fault.New(fault.ReasonOutcomeUnknown, context.DeadlineExceeded)
	}
	ok, err := c.Coordinator.Renew(ctx, shard, instance, ttl)
	c.mu.Lock()
	if c.answered++; c.answered == c.others {
		close(c.done)
	}
	c.mu.Unlock()
	return ok, err
}

// One renewal that waits out a timeout holds back no other: the leases due
// with it are renewed meanwhile, and none is lost (only the slow one's own
// lease could have lapsed by the time it is answered).
func TestASlowRenewalHoldsBackNoOther(t *testing.T) {
	h := newHarness(t0.Add(30 * time.Second))
	slow := &slowRenew{Coordinator: h.coord, clock: h.clock, delay: 10 * time.Second, others: ledger.PendingShards - 1, done: make(chan struct{})}
	a := New(Config{Instance: uuid.New(), LeaseTTL: testTTL}, h.ledger, h.fin.Finish, slow, discardLog())
	a.now = h.clock.Now
	mustCoordinate(t, a)
	h.clock.Advance((testTTL - leaseSlack) / 2)
	if err := a.coordinate(context.Background()); err == nil {
		t.Fatal("coordinate with a renewal of unknown outcome returned no error")
	}
	if st := a.Stats(); st.LostLeases != 0 || st.OwnedShards != ledger.PendingShards-1 {
		t.Fatalf("after one slow renewal: Stats = %+v, want %d held, none lost", st, ledger.PendingShards-1)
	}
	if got := h.coord.LeasesOf(a.cfg.Instance); len(got) != ledger.PendingShards-1 {
		t.Errorf("leased to a: %v, want the %d renewed beside the slow one", got, ledger.PendingShards-1)
	}
}

// A renewal that times out while the lease is still this instance's (the
// settling read shows it, as acquired before) is a failure to retry, not a
// lost lease: the shard stays held, and the next coordinate renews it.
func TestATimedOutRenewalOfALeaseStillHeldKeepsIt(t *testing.T) {
	h := newHarness(t0.Add(30 * time.Second))
	a := h.member(uuid.New())
	mustCoordinate(t, a)
	h.clock.Advance((testTTL - leaseSlack) / 2)
	h.coord.Arm(leases.StmtRenew, cassandra.FaultTimeout, 1)
	if err := a.coordinate(context.Background()); err == nil {
		t.Fatal("coordinate with a timed-out renewal returned no error")
	}
	if st := a.Stats(); st.LostLeases != 0 || st.OwnedShards != ledger.PendingShards {
		t.Fatalf("after a timed-out renewal: Stats = %+v, want all %d held, none lost", st, ledger.PendingShards)
	}
	if n := h.coord.Pending(leases.StmtRenew); n != 0 {
		t.Fatalf("the armed timeout was never served")
	}
	h.clock.Advance(2 * time.Second)
	mustCoordinate(t, a)
	if got := h.coord.LeasesOf(a.cfg.Instance); len(got) != ledger.PendingShards {
		t.Errorf("leased to a after the next coordinate: %v, want all %d", got, ledger.PendingShards)
	}
}

// cancelOnAcquire stops the loop as its first acquire returns.
type cancelOnAcquire struct {
	leases.Coordinator
	cancel context.CancelFunc
}

func (c cancelOnAcquire) Acquire(ctx context.Context, shard int, instance uuid.UUID, ttl time.Duration) (bool, error) {
	defer c.cancel()
	return c.Coordinator.Acquire(ctx, shard, instance, ttl)
}

// An acquire that applied while the loop was stopping, its outcome never
// learned, is released on the way out with the rest: no lease of the
// leaving instance keeps a shard idle until its TTL.
func TestLeavingReleasesALeaseAnAcquireCutShortLeft(t *testing.T) {
	h := newHarness(t0.Add(30 * time.Second))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := New(Config{Instance: uuid.New(), LeaseTTL: testTTL}, h.ledger, h.fin.Finish, cancelOnAcquire{h.coord, cancel}, discardLog())
	a.now = h.clock.Now
	h.coord.Arm(leases.StmtAcquire, cassandra.FaultLoseResponse, 1) // applied, the answer lost
	h.coord.Arm(leases.StmtLease, cassandra.FaultUnavailable, 1)    // and the settling read fails
	if err := a.coordinate(ctx); err == nil {
		t.Fatal("coordinate cut short returned no error")
	}
	if held := h.coord.LeasesOf(a.cfg.Instance); len(held) != 1 || len(ownedShards(a)) != 0 {
		t.Fatalf("leased to a %v, a knows of %v: want one lease a does not know it holds", held, ownedShards(a))
	}
	a.leave()
	if held := h.coord.LeasesOf(a.cfg.Instance); len(held) != 0 {
		t.Errorf("leases of a after it left: %v, want none", held)
	}
}
