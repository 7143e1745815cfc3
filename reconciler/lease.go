package reconciler

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/ledger"
)

// This file keeps the instance's shard leases: taken, renewed and given
// back by coordinate, which Run calls on its own schedule (keepLeases),
// never waiting for a pass. A pass works each shard under the hold it found
// when it started and starts no more work there once that hold has ended
// (holding). docs/reconciler.md "Many instances" says why each rule is safe.

// hold is one uninterrupted holding of a shard's lease by this instance.
// A hold that ends is never resumed: a lease taken back later is a new hold,
// so a pass that lost a shard does not resume it.
type hold struct {
	// deadline is when the lease could have lapsed, by this instance's
	// clock: when the last acquire or renewal that applied was sent, plus
	// the lease's life (leaseLife). Cassandra counts the TTL from the
	// whole second the write landed in, never before it was sent, so the
	// lease lives at least until then, however long the answer took.
	// Times from time.Now carry its monotonic reading, so a step of the
	// wall clock neither lengthens nor shortens it. Guarded by Loop.mu.
	deadline time.Time
	// open is what the passes under this hold left unsettled (open.go).
	open *openSet
}

// errLost ends the pass of a shard whose lease this instance no longer
// holds: the rest of its entries are the next holder's.
var errLost = errors.New("shard lease lost")

// leaseSlack is how much sooner than LeaseTTL after it was sent a lease
// may be gone in the cluster: Cassandra counts a TTL in whole seconds from
// the second the write lands in (so up to 1 s less than the TTL from the
// moment it was sent), by the clock of the replica that applied it, and
// each replica judges it expired by its own clock. The other 500 ms are
// for those clocks: within 250 ms of true time each, as NTP keeps them
// (and as Cassandra's TTLs and LWT timestamps need anyway). model/leases.pml
// checks that no two instances then count one shard held.
const leaseSlack = 1500 * time.Millisecond

// minLeaseTTL is the shortest LeaseTTL Config takes: a lease must outlive
// its slack by more than the slack, so that half its life leaves time to
// renew it.
const minLeaseTTL = 4 * leaseSlack

// leaseLife is how long after it was sent an acquire or renewal that
// applied keeps the lease this instance's for certain.
func (l *Loop) leaseLife() time.Duration { return l.cfg.LeaseTTL - leaseSlack }

// leasePeriod is how often keepLeases looks after the leases: every
// Interval, and at least four times a lease's life, so that a lease due
// for renewal at half its life is tried again at least once before it
// could lapse.
func (l *Loop) leasePeriod() time.Duration { return min(l.cfg.Interval, l.leaseLife()/4) }

// keepLeases coordinates every leasePeriod until ctx ends.
func (l *Loop) keepLeases(ctx context.Context) {
	t := time.NewTicker(l.leasePeriod())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		l.coordinateOrWarn(ctx)
	}
}

func (l *Loop) coordinateOrWarn(ctx context.Context) {
	if err := l.coordinate(ctx); err != nil && ctx.Err() == nil {
		l.log.Warn("reconciler coordination failed", "error", err)
	}
}

// holding reports whether h is still this instance's hold on shard and
// cannot have lapsed yet. A nil h is a pass run without leases (PassShards).
func (l *Loop) holding(shard int, h *hold) bool {
	if h == nil {
		return true
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.owned[shard] == h && now.Before(h.deadline)
}

// heldLocked lists the shards held, with their holds, whose lease cannot
// have lapsed at now.
func (l *Loop) heldLocked(now time.Time) map[int]*hold {
	out := make(map[int]*hold, len(l.owned))
	for s, h := range l.owned {
		if now.Before(h.deadline) {
			out[s] = h
		}
	}
	return out
}

// loseLocked ends the hold on shard: the lease is no longer this
// instance's, or could have lapsed.
func (l *Loop) loseLocked(shard int, reason string) {
	l.forgetLocked(shard)
	l.counters.update(func(s *Stats) { s.LostLeases++ })
	l.log.Warn("lost shard lease", "shard", shard, "reason", reason)
}

// forgetLocked ends the hold on shard and the read position that was only
// valid while it lasted.
func (l *Loop) forgetLocked(shard int) {
	delete(l.owned, shard)
	delete(l.readTo, shard)
}

// leave releases this instance's leases so others take over at once.
// Run calls it once the passes and keepLeases have stopped. Besides the
// shards it holds, it releases every lease the cluster shows as this
// instance's: an acquire or renewal that stopping cut short may have
// applied without this instance knowing, and that lease would otherwise
// keep its shard idle until its TTL runs out.
func (l *Loop) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l.mu.Lock()
	shards := make(map[int]bool, len(l.owned))
	for s := range l.owned {
		shards[s] = true
		l.forgetLocked(s)
	}
	l.mu.Unlock()
	l.countOpen()
	owners, err := l.coord.Owners(ctx)
	if err != nil {
		l.log.Warn("could not read the shard leases: only the leases known held are released", "error", err)
	}
	for s, owner := range owners {
		if owner == l.cfg.Instance {
			shards[s] = true
		}
	}
	for _, s := range slices.Sorted(maps.Keys(shards)) {
		if err := l.coord.Release(ctx, s, l.cfg.Instance); err != nil {
			l.log.Warn("could not release shard lease", "shard", s, "error", err)
		}
	}
	if err := l.coord.Leave(ctx, l.cfg.Instance); err != nil {
		l.log.Warn("could not leave the reconciler group", "error", err)
	}
}

// coordinate renews this instance's leases once half their TTL has passed,
// lets go of those that could have lapsed, and takes or gives back shards
// until it holds its fair share of the live instances.
//
// A lease is renewed every half of its life or so (about 7 s by default),
// not at every coordinate (every Interval, 2 s): each renewal is a Paxos round, and
// renewing all 16 leases at every coordinate cost the cluster 8 LWTs a
// second with no traffic at all. The other half of the life leaves room for
// renewals that fail and are tried again. Leases are renewed before the
// heartbeat, so that a failing heartbeat does not keep them from it.
//
// While a pass is stalled (no progress for StallAfter) it does nothing but
// end the holds that could have lapsed.
//
// Only one goroutine coordinates at a time (keepLeases, or a test), and it
// holds Loop.mu only between the coordinator's calls, never across one:
// passes read the holds at every entry they start.
func (l *Loop) coordinate(ctx context.Context) error {
	l.expire()
	if !l.clockOK() {
		return l.standDown(ctx)
	}
	if idle, stalled := l.stalled(); stalled {
		return fmt.Errorf("the running pass made no progress for %s: its leases and membership are left to lapse so that other instances take its shards", idle)
	}
	renewErr := l.renew(ctx)
	if err := ctx.Err(); err != nil {
		return err
	}
	members, err := l.coord.Heartbeat(ctx, l.cfg.Instance, l.cfg.LeaseTTL)
	if err != nil {
		return errors.Join(renewErr, fmt.Errorf("heartbeat: %w", err))
	}
	fair := (ledger.PendingShards + max(members, 1) - 1) / max(members, 1)
	if err := l.giveBack(ctx, fair); err != nil {
		return errors.Join(renewErr, err)
	}
	return errors.Join(renewErr, l.take(ctx, fair, members))
}

// clockOK reports whether this instance's clock may judge entries due
// (Config.Clock), logging each change and counting each refusal.
func (l *Loop) clockOK() bool {
	if l.cfg.Clock == nil {
		return true
	}
	err := l.cfg.Clock()
	if was := l.skewed.Swap(err != nil); was != (err != nil) {
		if err != nil {
			l.log.Error("this instance's clock is too far from the cluster's: its shards are given to the other instances until it is back", "error", err)
		} else {
			l.log.Info("this instance's clock is back within the allowed skew: it takes its share of shards again")
		}
	}
	if err != nil {
		l.counters.update(func(s *Stats) { s.ClockSkipped++ })
	}
	return err == nil
}

// standDown gives every held lease back and leaves the group, so that the
// other instances take this one's share at their next coordinate instead
// of after the leases lapse; this instance holds nothing until its clock
// is back (coordinate).
func (l *Loop) standDown(ctx context.Context) error {
	giveErr := l.giveBack(ctx, 0)
	l.countOpen() // the shards' backlogs are the others' to count now
	if err := l.coord.Leave(ctx, l.cfg.Instance); err != nil {
		return errors.Join(giveErr, fmt.Errorf("leave the reconciler group: %w", err))
	}
	return giveErr
}

// noteProgress records that a pass moved on.
func (l *Loop) noteProgress() {
	now := l.now()
	l.progress.Store(&now)
}

// stalled reports whether a pass is running and has made no progress for
// longer than StallAfter, and for how long. Leases are renewed apart from
// the passes so that a long pass keeps them; a pass that hangs (a call
// that never returns) must not keep them for ever: such an instance stops
// renewing and heartbeating, as if it had died, until the pass moves on.
func (l *Loop) stalled() (time.Duration, bool) {
	last := l.progress.Load()
	if l.passing.Load() == 0 || last == nil {
		return 0, false
	}
	idle := l.now().Sub(*last)
	return idle, idle > l.cfg.StallAfter
}

// expire ends every hold whose lease could have lapsed by now: no renewal
// that applied was sent within a lease's life before now, so another
// instance may hold the lease already.
func (l *Loop) expire() {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for s, h := range l.owned {
		if !now.Before(h.deadline) {
			l.loseLocked(s, "no renewal applied within the lease TTL")
		}
	}
}

// renewConcurrency bounds the renewals in flight at once. Leases taken
// together fall due together, and one after another a renewal that waits
// out a timeout would hold back the others until they could have lapsed.
const renewConcurrency = 4

// renew renews each held lease that is half its life old, soonest
// deadline first, a few at a time. A renewal that did not apply means the
// lease is another instance's (or lapsed): the shard is let go at once.
// One that failed, or whose outcome is unknown, changes nothing: the lease
// lives until its deadline either way; it is tried again at the next
// coordinate, and expire lets it go once the deadline has passed. The
// deadline moves only by a renewal that applied, counted from when it was
// sent. A renewal whose turn comes after its lease's deadline is not sent.
func (l *Loop) renew(ctx context.Context) error {
	now := l.now()
	type due struct {
		shard int
		h     *hold
	}
	var dues []due
	l.mu.Lock()
	for s, h := range l.heldLocked(now) {
		if h.deadline.Sub(now) <= l.leaseLife()/2 {
			dues = append(dues, due{s, h})
		}
	}
	l.mu.Unlock()
	slices.SortFunc(dues, func(a, b due) int { return a.h.deadline.Compare(b.h.deadline) })
	var (
		g      errgroup.Group // no context: one failed renewal stops no other
		failed atomic.Int32
	)
	g.SetLimit(renewConcurrency)
	for _, d := range dues {
		g.Go(func() error {
			err := l.renewOne(ctx, d.shard, d.h)
			if err != nil {
				failed.Add(1)
			}
			return err
		})
	}
	first := g.Wait()
	if err := ctx.Err(); err != nil {
		// Stopping, not a lost lease: the shards are kept, so that leave
		// releases them rather than leaving them held until their TTL.
		return err
	}
	if first != nil {
		return fmt.Errorf("%d lease renewals failed (the leases are kept until they could have lapsed), the first: %w", failed.Load(), first)
	}
	return nil
}

// renewOne renews the lease of shard held by h (see renew).
func (l *Loop) renewOne(ctx context.Context, shard int, h *hold) error {
	sent := l.now()
	l.mu.Lock()
	lapsed := !sent.Before(h.deadline)
	l.mu.Unlock()
	if lapsed || ctx.Err() != nil {
		return nil // expire lets it go; or stopping
	}
	ok, err := l.coord.Renew(ctx, shard, l.cfg.Instance, l.cfg.LeaseTTL)
	if ctx.Err() != nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err != nil:
		return fmt.Errorf("renew shard %d: %w", shard, err)
	case !ok:
		l.loseLocked(shard, "renewal not applied")
	default:
		h.deadline = sent.Add(l.leaseLife())
	}
	return nil
}

// giveBack releases leases above the fair share. Each shard is let go
// before its release is sent, so that no pass starts work there once
// another instance may hold it. A release that surely did not apply gives
// the hold back (the lease is still this instance's until its deadline);
// one whose outcome is unknown may have applied, so the shard stays let
// go: had it not applied, the lease lapses within its TTL, or take takes
// it back once this instance is below its share.
func (l *Loop) giveBack(ctx context.Context, fair int) error {
	for {
		l.mu.Lock()
		if len(l.owned) <= fair {
			l.mu.Unlock()
			return nil
		}
		var (
			s int
			h *hold
		)
		for s, h = range l.owned {
			break
		}
		l.forgetLocked(s)
		l.mu.Unlock()
		err := l.coord.Release(ctx, s, l.cfg.Instance)
		if err == nil {
			continue
		}
		if fault.KindOf(err) != fault.OutcomeUnknown {
			l.mu.Lock()
			l.owned[s] = &hold{deadline: h.deadline, open: h.open}
			l.mu.Unlock()
		}
		return fmt.Errorf("release shard %d: %w", s, err)
	}
}

// take acquires free shards until this instance holds its fair share.
func (l *Loop) take(ctx context.Context, fair, members int) error {
	l.mu.Lock()
	n := len(l.owned)
	l.mu.Unlock()
	if n >= fair {
		return nil
	}
	owners, err := l.coord.Owners(ctx)
	if err != nil {
		return fmt.Errorf("read leases: %w", err)
	}
	for _, s := range rand.Perm(ledger.PendingShards) {
		l.mu.Lock()
		_, held := l.owned[s]
		n := len(l.owned)
		l.mu.Unlock()
		if n >= fair {
			break
		}
		var ok bool
		owner, taken := owners[s]
		sent := l.now()
		switch {
		case held:
			continue
		case taken && owner == l.cfg.Instance:
			// A lease of ours this loop let go (a renewal that settled as
			// not applied while the lease was still ours, or one that could
			// have lapsed and did not): take it back now rather than leave
			// the shard idle until it expires.
			ok, err = l.coord.Renew(ctx, s, l.cfg.Instance, l.cfg.LeaseTTL)
		case taken:
			continue
		default:
			ok, err = l.coord.Acquire(ctx, s, l.cfg.Instance, l.cfg.LeaseTTL)
		}
		if err != nil {
			return fmt.Errorf("acquire shard %d: %w", s, err)
		}
		if ok {
			l.mu.Lock()
			l.forgetLocked(s)
			l.owned[s] = &hold{deadline: sent.Add(l.leaseLife()), open: newOpenSet()}
			l.mu.Unlock()
			l.log.Info("acquired shard lease", "shard", s, "members", members)
		}
	}
	return nil
}
