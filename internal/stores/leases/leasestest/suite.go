package leasestest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/stores/leases"
)

// CoordinatorSubject is one coordinator under test.
type CoordinatorSubject struct {
	Coord leases.Coordinator
	// Arm makes the next times executions of a named statement fail
	// (MemoryCoordinator.Arm, or cassandra.FaultSession.Arm under
	// leases.NewCassandraCoordinator).
	Arm func(statement cassandra.Stmt, f cassandra.Fault, times int)
	// Wait lets d pass on the coordinator's clock: it advances a fake clock,
	// or sleeps for a real store.
	Wait func(d time.Duration)
	// Advertising is a coordinator on the same store whose heartbeats say
	// that their instance finishes operations (Coord's say none, as an
	// older release's).
	Advertising func(operations ...string) leases.Coordinator
}

// Lease TTLs the suite uses: long enough not to expire during a subtest,
// and short enough to wait out. Cassandra counts a TTL in whole seconds from
// the second a write lands, so a 1 s lease may be gone a millisecond after
// it was taken; a 2 s one lives at least a second.
const (
	longTTL  = 30 * time.Second
	shortTTL = 2 * time.Second
	// pastShort is a wait after which a shortTTL lease taken before it has
	// surely expired (and a renewed one surely outlived its first TTL).
	pastShort = shortTTL + time.Second
	// expiry bounds how long a shortTTL lease or membership may take to
	// disappear, with room for a slow cluster.
	expiry = shortTTL + 4*time.Second
	poll   = 200 * time.Millisecond
)

// FirstShard is the lowest shard the suite uses. The real leases table is
// shared by every shard and the reconciler only uses 0..15
// (ledger.PendingShards), so the suite stays far above them.
const FirstShard = 1000

// RunCoordinator is the lease coordinator's contract. newSubject is called
// once per subtest. Lease and cursor subtests run in parallel, each on its
// own shards (from FirstShard up, at a random offset per run) and its own
// instances, so subjects may share one keyspace with other users of other
// shards. Membership subtests run one at a time and measure the member
// count relative to what it was, so other live instances in the same group
// do not disturb them unless they join or expire mid-measurement (then the
// measurement is repeated).
func RunCoordinator(t *testing.T, newSubject func(t *testing.T) CoordinatorSubject) {
	next := &atomic.Int64{}
	next.Store(int64(FirstShard + 64*rand.IntN(1<<20)))
	run := func(t *testing.T, c coordCase) {
		s := newSubject(t)
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		c.run(t, &coordSuite{CoordinatorSubject: s, ctx: ctx, next: next})
	}
	t.Run("leases", func(t *testing.T) {
		for _, c := range leaseCases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				run(t, c)
			})
		}
	})
	t.Run("members", func(t *testing.T) {
		for _, c := range memberCases {
			t.Run(c.name, func(t *testing.T) { run(t, c) })
		}
	})
}

type coordSuite struct {
	CoordinatorSubject
	ctx  context.Context
	next *atomic.Int64
}

type coordCase struct {
	name string
	run  func(t *testing.T, s *coordSuite)
}

// shard is a shard no other subtest uses.
func (s *coordSuite) shard() int { return int(s.next.Add(1)) }

// acquire takes a fresh shard's lease for a case's setup. On a loaded
// cluster the LWT can time out and settle as not applied ("false, nil", as
// the contract allows); the setup then tries again, a few times. The cases
// themselves call Acquire once and check exactly what it answered.
func (s *coordSuite) acquire(t *testing.T, shard int, inst uuid.UUID, ttl time.Duration) {
	t.Helper()
	for try := 1; ; try++ {
		ok, err := s.Coord.Acquire(s.ctx, shard, inst, ttl)
		if err == nil && ok {
			return
		}
		if try == 3 {
			t.Fatalf("Acquire(%d) = %v, %v after %d tries; want true", shard, ok, err, try)
		}
		t.Logf("setup: Acquire(%d) = %v, %v; trying again", shard, ok, err)
	}
}

// wantResult checks an LWT's answer: ok and the error's kind (-1: nil).
func wantResult(t *testing.T, what string, ok bool, err error, wantOK bool, wantKind fault.Kind) {
	t.Helper()
	if ok != wantOK {
		t.Errorf("%s = %v (error %v), want %v", what, ok, err, wantOK)
	}
	wantErr(t, what, err, wantKind)
}

// noErr is the wantKind of "no error".
const noErr fault.Kind = -1

func wantErr(t *testing.T, what string, err error, wantKind fault.Kind) {
	t.Helper()
	switch {
	case wantKind == noErr && err != nil:
		t.Errorf("%s: error %v, want none", what, err)
	case wantKind != noErr && err == nil:
		t.Errorf("%s: no error, want kind %s", what, wantKind)
	case wantKind != noErr && fault.KindOf(err) != wantKind:
		t.Errorf("%s: error %v (kind %s), want kind %s", what, err, fault.KindOf(err), wantKind)
	}
}

// owner is shard's live lease holder, per Owners.
func (s *coordSuite) owner(t *testing.T, shard int) (uuid.UUID, bool) {
	t.Helper()
	owners, err := s.Coord.Owners(s.ctx)
	if err != nil {
		t.Fatalf("Owners: %v", err)
	}
	o, ok := owners[shard]
	return o, ok
}

func (s *coordSuite) wantOwner(t *testing.T, shard int, want uuid.UUID) {
	t.Helper()
	if got, ok := s.owner(t, shard); !ok || got != want {
		t.Fatalf("shard %d: owner %v (held %v), want %v", shard, got, ok, want)
	}
}

func (s *coordSuite) wantFree(t *testing.T, shard int) {
	t.Helper()
	if got, ok := s.owner(t, shard); ok {
		t.Fatalf("shard %d: held by %v, want free", shard, got)
	}
}

// eventuallyFree waits, polling, until shard's lease is gone.
func (s *coordSuite) eventuallyFree(t *testing.T, shard int) {
	t.Helper()
	for waited := time.Duration(0); ; waited += poll {
		if _, held := s.owner(t, shard); !held {
			return
		}
		if waited >= expiry {
			t.Fatalf("shard %d: still held %s after a %s lease", shard, expiry, shortTTL)
		}
		s.Wait(poll)
	}
}

var (
	unknownFaults = []cassandra.Fault{cassandra.FaultTimeout, cassandra.FaultLoseResponse}
	allFaults     = []cassandra.Fault{cassandra.FaultUnavailable, cassandra.FaultTimeout, cassandra.FaultLoseResponse}
)

var leaseCases = []coordCase{
	{"acquire: applied", func(t *testing.T, s *coordSuite) {
		shard, a := s.shard(), uuid.New()
		ok, err := s.Coord.Acquire(s.ctx, shard, a, longTTL)
		wantResult(t, "Acquire of a free shard", ok, err, true, noErr)
		s.wantOwner(t, shard, a)
	}},

	{"acquire: not applied, the lease is held", func(t *testing.T, s *coordSuite) {
		shard, a, b := s.shard(), uuid.New(), uuid.New()
		s.acquire(t, shard, a, longTTL)
		ok, err := s.Coord.Acquire(s.ctx, shard, b, longTTL)
		wantResult(t, "Acquire of a shard another holds", ok, err, false, noErr)
		ok, err = s.Coord.Acquire(s.ctx, shard, a, longTTL)
		wantResult(t, "Acquire of a shard one already holds", ok, err, false, noErr)
		s.wantOwner(t, shard, a)
	}},

	{"acquire: refused", func(t *testing.T, s *coordSuite) {
		shard, a := s.shard(), uuid.New()
		s.Arm(leases.StmtAcquire, cassandra.FaultUnavailable, 1)
		ok, err := s.Coord.Acquire(s.ctx, shard, a, longTTL)
		wantResult(t, "Acquire refused", ok, err, false, fault.Unavailable)
		s.wantFree(t, shard)
		s.acquire(t, shard, a, longTTL)
	}},

	{"acquire: a timeout settles as not held", func(t *testing.T, s *coordSuite) {
		shard, a, b := s.shard(), uuid.New(), uuid.New()
		s.Arm(leases.StmtAcquire, cassandra.FaultTimeout, 1)
		ok, err := s.Coord.Acquire(s.ctx, shard, a, longTTL)
		wantResult(t, "Acquire timed out", ok, err, false, noErr)
		s.wantFree(t, shard)
		s.acquire(t, shard, b, longTTL)
	}},

	{"acquire: a lost response settles as held", func(t *testing.T, s *coordSuite) {
		shard, a := s.shard(), uuid.New()
		s.Arm(leases.StmtAcquire, cassandra.FaultLoseResponse, 1)
		ok, err := s.Coord.Acquire(s.ctx, shard, a, longTTL)
		wantResult(t, "Acquire with its response lost", ok, err, true, noErr)
		s.wantOwner(t, shard, a)
	}},

	{"acquire: a lost response on a held lease settles as not held", func(t *testing.T, s *coordSuite) {
		shard, a, b := s.shard(), uuid.New(), uuid.New()
		s.acquire(t, shard, b, longTTL)
		s.Arm(leases.StmtAcquire, cassandra.FaultLoseResponse, 1)
		ok, err := s.Coord.Acquire(s.ctx, shard, a, longTTL)
		wantResult(t, "Acquire of another's lease with its response lost", ok, err, false, noErr)
		s.wantOwner(t, shard, b)
	}},

	{"acquire: unsettled", func(t *testing.T, s *coordSuite) {
		// The settling read fails too: an error, and not held, whatever
		// the lease row says (a lease taken in fact then idles until its TTL).
		for _, f := range unknownFaults {
			shard, a := s.shard(), uuid.New()
			s.Arm(leases.StmtAcquire, f, 1)
			s.Arm(leases.StmtLease, cassandra.FaultUnavailable, 1)
			ok, err := s.Coord.Acquire(s.ctx, shard, a, longTTL)
			wantResult(t, "Acquire "+f.String()+", settling read refused", ok, err, false, fault.OutcomeUnknown)
			if f == cassandra.FaultLoseResponse {
				s.wantOwner(t, shard, a)
			} else {
				s.wantFree(t, shard)
			}
		}
	}},

	{"renew: applied, the lease is extended", func(t *testing.T, s *coordSuite) {
		shard, a := s.shard(), uuid.New()
		s.acquire(t, shard, a, shortTTL)
		ok, err := s.Coord.Renew(s.ctx, shard, a, longTTL)
		wantResult(t, "Renew of one's lease", ok, err, true, noErr)
		s.Wait(pastShort)
		s.wantOwner(t, shard, a)
		// Held past its first TTL, it still keeps others out.
		ok, err = s.Coord.Acquire(s.ctx, shard, uuid.New(), longTTL)
		wantResult(t, "Acquire of a renewed lease", ok, err, false, noErr)
	}},

	{"renew: not applied, the lease is another's or nobody's", func(t *testing.T, s *coordSuite) {
		shard, free, a, b := s.shard(), s.shard(), uuid.New(), uuid.New()
		s.acquire(t, shard, a, longTTL)
		ok, err := s.Coord.Renew(s.ctx, shard, b, longTTL)
		wantResult(t, "Renew of another's lease", ok, err, false, noErr)
		s.wantOwner(t, shard, a)
		ok, err = s.Coord.Renew(s.ctx, free, a, longTTL)
		wantResult(t, "Renew of a free shard", ok, err, false, noErr)
		s.wantFree(t, free)
	}},

	{"renew: not applied, the lease expired", func(t *testing.T, s *coordSuite) {
		shard, a, b := s.shard(), uuid.New(), uuid.New()
		s.acquire(t, shard, a, shortTTL)
		s.eventuallyFree(t, shard)
		ok, err := s.Coord.Renew(s.ctx, shard, a, longTTL)
		wantResult(t, "Renew of an expired lease", ok, err, false, noErr)
		s.wantFree(t, shard)
		s.acquire(t, shard, b, longTTL)
		ok, err = s.Coord.Renew(s.ctx, shard, a, longTTL)
		wantResult(t, "Renew of a lease lost to another", ok, err, false, noErr)
		s.wantOwner(t, shard, b)
	}},

	{"renew: refused", func(t *testing.T, s *coordSuite) {
		shard, a := s.shard(), uuid.New()
		s.acquire(t, shard, a, shortTTL)
		s.Arm(leases.StmtRenew, cassandra.FaultUnavailable, 1)
		ok, err := s.Coord.Renew(s.ctx, shard, a, longTTL)
		wantResult(t, "Renew refused", ok, err, false, fault.Unavailable)
		s.eventuallyFree(t, shard) // not extended
	}},

	{"renew: a timeout on a lease still held is Unavailable, not lost", func(t *testing.T, s *coordSuite) {
		// The lease still shows this owner, but as acquired before: the
		// renew did not apply, and the lease is still this owner's until
		// its old TTL runs out. "Not renewed" would make the caller give
		// up a lease it holds; an Unavailable error keeps it trying.
		shard, a := s.shard(), uuid.New()
		s.acquire(t, shard, a, shortTTL)
		s.Arm(leases.StmtRenew, cassandra.FaultTimeout, 1)
		ok, err := s.Coord.Renew(s.ctx, shard, a, longTTL)
		wantResult(t, "Renew timed out", ok, err, false, fault.Unavailable)
		s.wantOwner(t, shard, a)
		s.eventuallyFree(t, shard) // not extended
	}},

	{"renew: a timeout on a lease that lapsed settles as not renewed", func(t *testing.T, s *coordSuite) {
		shard, a := s.shard(), uuid.New()
		s.acquire(t, shard, a, shortTTL)
		s.eventuallyFree(t, shard)
		s.Arm(leases.StmtRenew, cassandra.FaultTimeout, 1)
		ok, err := s.Coord.Renew(s.ctx, shard, a, longTTL)
		wantResult(t, "Renew of a lapsed lease timed out", ok, err, false, noErr)
		s.wantFree(t, shard)
	}},

	{"renew: a lost response settles as renewed", func(t *testing.T, s *coordSuite) {
		shard, a := s.shard(), uuid.New()
		s.acquire(t, shard, a, shortTTL)
		s.Arm(leases.StmtRenew, cassandra.FaultLoseResponse, 1)
		ok, err := s.Coord.Renew(s.ctx, shard, a, longTTL)
		wantResult(t, "Renew with its response lost", ok, err, true, noErr)
		s.Wait(pastShort)
		s.wantOwner(t, shard, a)
	}},

	{"renew: a lost response on another's lease settles as not renewed", func(t *testing.T, s *coordSuite) {
		shard, a, b := s.shard(), uuid.New(), uuid.New()
		s.acquire(t, shard, b, longTTL)
		s.Arm(leases.StmtRenew, cassandra.FaultLoseResponse, 1)
		ok, err := s.Coord.Renew(s.ctx, shard, a, longTTL)
		wantResult(t, "Renew of another's lease with its response lost", ok, err, false, noErr)
		s.wantOwner(t, shard, b)
	}},

	{"renew: unsettled", func(t *testing.T, s *coordSuite) {
		for _, f := range unknownFaults {
			shard, a := s.shard(), uuid.New()
			s.acquire(t, shard, a, shortTTL)
			s.Arm(leases.StmtRenew, f, 1)
			s.Arm(leases.StmtLease, cassandra.FaultUnavailable, 1)
			ok, err := s.Coord.Renew(s.ctx, shard, a, longTTL)
			wantResult(t, "Renew "+f.String()+", settling read refused", ok, err, false, fault.OutcomeUnknown)
			if f == cassandra.FaultLoseResponse {
				s.Wait(pastShort) // renewed in fact
				s.wantOwner(t, shard, a)
			} else {
				s.eventuallyFree(t, shard)
			}
		}
	}},

	{"release: applied", func(t *testing.T, s *coordSuite) {
		shard, a, b := s.shard(), uuid.New(), uuid.New()
		s.acquire(t, shard, a, longTTL)
		wantErr(t, "Release of one's lease", s.Coord.Release(s.ctx, shard, a), noErr)
		s.wantFree(t, shard)
		s.acquire(t, shard, b, longTTL)
	}},

	{"release: not applied, the lease is another's or nobody's", func(t *testing.T, s *coordSuite) {
		shard, free, a, b := s.shard(), s.shard(), uuid.New(), uuid.New()
		s.acquire(t, shard, a, longTTL)
		wantErr(t, "Release of another's lease", s.Coord.Release(s.ctx, shard, b), noErr)
		s.wantOwner(t, shard, a)
		wantErr(t, "Release of a free shard", s.Coord.Release(s.ctx, free, b), noErr)
		s.wantFree(t, free)
	}},

	{"release: refused", func(t *testing.T, s *coordSuite) {
		shard, a := s.shard(), uuid.New()
		s.acquire(t, shard, a, longTTL)
		s.Arm(leases.StmtRelease, cassandra.FaultUnavailable, 1)
		wantErr(t, "Release refused", s.Coord.Release(s.ctx, shard, a), fault.Unavailable)
		s.wantOwner(t, shard, a)
	}},

	{"release: a timeout settles as not released", func(t *testing.T, s *coordSuite) {
		// The lease is still this instance's: Release must not answer as
		// if it were given up.
		shard, a := s.shard(), uuid.New()
		s.acquire(t, shard, a, longTTL)
		s.Arm(leases.StmtRelease, cassandra.FaultTimeout, 1)
		wantErr(t, "Release timed out", s.Coord.Release(s.ctx, shard, a), fault.Unavailable)
		s.wantOwner(t, shard, a)
		wantErr(t, "Release again", s.Coord.Release(s.ctx, shard, a), noErr)
		s.wantFree(t, shard)
	}},

	{"release: a timeout on another's lease settles as done", func(t *testing.T, s *coordSuite) {
		shard, a, b := s.shard(), uuid.New(), uuid.New()
		s.acquire(t, shard, b, longTTL)
		s.Arm(leases.StmtRelease, cassandra.FaultTimeout, 1)
		wantErr(t, "Release of another's lease timed out", s.Coord.Release(s.ctx, shard, a), noErr)
		s.wantOwner(t, shard, b)
	}},

	{"release: a lost response settles as released", func(t *testing.T, s *coordSuite) {
		shard, a := s.shard(), uuid.New()
		s.acquire(t, shard, a, longTTL)
		s.Arm(leases.StmtRelease, cassandra.FaultLoseResponse, 1)
		wantErr(t, "Release with its response lost", s.Coord.Release(s.ctx, shard, a), noErr)
		s.wantFree(t, shard)
	}},

	{"release: unsettled", func(t *testing.T, s *coordSuite) {
		for _, f := range unknownFaults {
			shard, a := s.shard(), uuid.New()
			s.acquire(t, shard, a, longTTL)
			s.Arm(leases.StmtRelease, f, 1)
			s.Arm(leases.StmtLease, cassandra.FaultUnavailable, 1)
			wantErr(t, "Release "+f.String()+", settling read refused", s.Coord.Release(s.ctx, shard, a), fault.OutcomeUnknown)
			if f == cassandra.FaultLoseResponse {
				s.wantFree(t, shard)
			} else {
				s.wantOwner(t, shard, a)
			}
		}
	}},

	{"owners", func(t *testing.T, s *coordSuite) {
		s1, s2, s3, a, b := s.shard(), s.shard(), s.shard(), uuid.New(), uuid.New()
		s.acquire(t, s1, a, longTTL)
		s.acquire(t, s2, b, longTTL)
		owners, err := s.Coord.Owners(s.ctx)
		if err != nil {
			t.Fatalf("Owners: %v", err)
		}
		if owners[s1] != a || owners[s2] != b {
			t.Errorf("Owners: shard %d → %v, shard %d → %v; want %v, %v", s1, owners[s1], s2, owners[s2], a, b)
		}
		if o, ok := owners[s3]; ok {
			t.Errorf("Owners: free shard %d held by %v", s3, o)
		}
		for _, f := range allFaults {
			s.Arm(leases.StmtOwners, f, 1)
			_, err := s.Coord.Owners(s.ctx)
			wantErr(t, "Owners with "+f.String(), err, fault.Unavailable)
		}
	}},

	{"a lease expires after its TTL", func(t *testing.T, s *coordSuite) {
		shard, a, b := s.shard(), uuid.New(), uuid.New()
		s.acquire(t, shard, a, shortTTL)
		s.eventuallyFree(t, shard)
		s.acquire(t, shard, b, longTTL)
	}},

	{"cursor: unset", func(t *testing.T, s *coordSuite) {
		shard := s.shard()
		got, ok, err := s.Coord.Cursor(s.ctx, shard)
		if err != nil || ok || !got.IsZero() {
			t.Errorf("Cursor of a shard never saved = %v, %v, %v; want zero, false, nil", got, ok, err)
		}
	}},

	{"cursor: saved and read back", func(t *testing.T, s *coordSuite) {
		shard := s.shard()
		// Nanoseconds in another zone come back in UTC, to the millisecond.
		t1 := time.Date(2026, 5, 2, 1, 30, 0, 123_456_789, time.FixedZone("UTC+2", 2*3600))
		s.saveCursor(t, shard, t1)
		s.wantCursor(t, shard, time.Date(2026, 5, 1, 23, 30, 0, 123_000_000, time.UTC))
		// A later save wins, even of an earlier minute (a plain overwrite).
		t0 := time.Date(2026, 5, 1, 20, 0, 0, 0, time.UTC)
		s.saveCursor(t, shard, t0)
		s.wantCursor(t, shard, t0)
	}},

	{"cursor: faults", func(t *testing.T, s *coordSuite) {
		shard := s.shard()
		t0 := time.Date(2026, 5, 1, 20, 0, 0, 0, time.UTC)
		s.saveCursor(t, shard, t0)
		for _, f := range allFaults {
			s.Arm(leases.StmtCursor, f, 1)
			_, _, err := s.Coord.Cursor(s.ctx, shard)
			wantErr(t, "Cursor with "+f.String(), err, fault.Unavailable)
		}
		for i, f := range allFaults {
			at := t0.Add(time.Duration(i+1) * time.Minute)
			s.Arm(leases.StmtSaveCursor, f, 1)
			want := fault.OutcomeUnknown
			if f == cassandra.FaultUnavailable {
				want = fault.Unavailable
			}
			wantErr(t, "SaveCursor with "+f.String(), s.Coord.SaveCursor(s.ctx, shard, at), want)
			if f == cassandra.FaultLoseResponse {
				s.wantCursor(t, shard, at)
			} else {
				s.wantCursor(t, shard, t0)
			}
		}
	}},
}

func (s *coordSuite) saveCursor(t *testing.T, shard int, at time.Time) {
	t.Helper()
	if err := s.Coord.SaveCursor(s.ctx, shard, at); err != nil {
		t.Fatalf("SaveCursor(%d, %s): %v", shard, at, err)
	}
}

func (s *coordSuite) wantCursor(t *testing.T, shard int, want time.Time) {
	t.Helper()
	got, ok, err := s.Coord.Cursor(s.ctx, shard)
	if err != nil || !ok || !got.Equal(want) || got.Location() != time.UTC {
		t.Errorf("Cursor(%d) = %v, %v, %v; want %v (UTC), true, nil", shard, got, ok, err, want)
	}
}

// ---------------------------------------------------------------- members

// members is how many live members Heartbeat(inst) reports.
func (s *coordSuite) members(inst uuid.UUID) (int, error) {
	n, err := s.Coord.Heartbeat(s.ctx, inst, longTTL)
	if err != nil {
		return 0, fmt.Errorf("Heartbeat: %w", err)
	}
	return n, nil
}

// measure runs a membership measurement; one that fails is repeated (twice
// at most), since on a shared table another instance may have joined or
// expired meanwhile.
func (s *coordSuite) measure(t *testing.T, m func() error) {
	t.Helper()
	for try := 1; ; try++ {
		err := m()
		if err == nil {
			return
		}
		if try == 3 {
			t.Fatal(err)
		}
		t.Logf("measurement %d: %v; repeating it", try, err)
		s.Wait(poll)
	}
}

// wantMember measures whether b is a member: the count a's heartbeat
// reports, against the count right after b leaves (so b is no member
// afterwards either way, and the measurement cannot be repeated).
func (s *coordSuite) wantMember(t *testing.T, a, b uuid.UUID, want bool) {
	t.Helper()
	with, err := s.members(a)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Coord.Leave(s.ctx, b); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	without, err := s.members(a)
	if err != nil {
		t.Fatal(err)
	}
	if member := with-without == 1; member != want || with-without > 1 || with < without {
		t.Errorf("member count %d with %v, %d after it left: member = %v, want %v", with, b, without, member, want)
	}
}

var memberCases = []coordCase{
	{"heartbeat counts the live members; leave removes one", func(t *testing.T, s *coordSuite) {
		a, b := uuid.New(), uuid.New()
		defer s.Coord.Leave(context.WithoutCancel(s.ctx), a)
		s.measure(t, func() error {
			alone, err := s.members(a)
			if err != nil {
				return err
			}
			if alone < 1 {
				return fmt.Errorf("Heartbeat counts %d members, want at least the caller", alone)
			}
			both, err := s.members(b)
			if err != nil {
				return err
			}
			again, err := s.members(a)
			if err != nil {
				return err
			}
			if both != alone+1 || again != both {
				return fmt.Errorf("members: %d, then %d after another joined, then %d; want n, n+1, n+1", alone, both, again)
			}
			if err := s.Coord.Leave(s.ctx, b); err != nil {
				return fmt.Errorf("Leave: %w", err)
			}
			if err := s.Coord.Leave(s.ctx, b); err != nil {
				return fmt.Errorf("Leave of a non-member: %w", err)
			}
			after, err := s.members(a)
			if err != nil {
				return err
			}
			if after != alone {
				return fmt.Errorf("members: %d, %d after another joined, %d after it left; want n, n+1, n", alone, both, after)
			}
			return nil
		})
	}},

	{"a membership expires after its TTL", func(t *testing.T, s *coordSuite) {
		a, b := uuid.New(), uuid.New()
		defer s.Coord.Leave(context.WithoutCancel(s.ctx), a)
		s.measure(t, func() error {
			alone, err := s.members(a)
			if err != nil {
				return err
			}
			both, err := s.Coord.Heartbeat(s.ctx, b, shortTTL)
			if err != nil {
				return fmt.Errorf("Heartbeat: %w", err)
			}
			if both != alone+1 {
				return fmt.Errorf("members: %d, then %d after another joined; want n, n+1", alone, both)
			}
			for waited := time.Duration(0); waited < expiry; waited += poll {
				s.Wait(poll)
				n, err := s.members(a)
				switch {
				case err != nil:
					return err
				case n == alone:
					return nil
				case n != both:
					return fmt.Errorf("members: %d, %d after another joined, then %d", alone, both, n)
				}
			}
			return fmt.Errorf("a member with a %s TTL still counted after %s", shortTTL, expiry)
		})
	}},

	{"members list the operations their heartbeats say they finish", func(t *testing.T, s *coordSuite) {
		a, b := uuid.New(), uuid.New()
		newer := s.Advertising("CREATE_ORDER", "AMEND_ORDER", "CANCEL_ORDER")
		defer s.Coord.Leave(context.WithoutCancel(s.ctx), a)
		defer s.Coord.Leave(context.WithoutCancel(s.ctx), b)
		if _, err := newer.Heartbeat(s.ctx, a, longTTL); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Coord.Heartbeat(s.ctx, b, longTTL); err != nil {
			t.Fatal(err)
		}
		got, err := s.Coord.Members(s.ctx)
		if err != nil {
			t.Fatalf("Members: %v", err)
		}
		if ops, ok := got[a]; !ok || !slices.Equal(ops, []string{"AMEND_ORDER", "CANCEL_ORDER", "CREATE_ORDER"}) {
			t.Errorf("Members()[a] = %v (listed %v), want its three operations, sorted", ops, ok)
		}
		if ops, ok := got[b]; !ok || len(ops) != 0 {
			t.Errorf("Members()[b] = %v (listed %v), want it listed with no operations", ops, ok)
		}
		// A later heartbeat of the same instance says what it says now.
		if _, err := s.Coord.Heartbeat(s.ctx, a, longTTL); err != nil {
			t.Fatal(err)
		}
		if err := s.Coord.Leave(s.ctx, b); err != nil {
			t.Fatal(err)
		}
		got, err = newer.Members(s.ctx)
		if err != nil {
			t.Fatalf("Members: %v", err)
		}
		if ops, ok := got[a]; !ok || len(ops) != 0 {
			t.Errorf("after a heartbeat that says none: Members()[a] = %v (listed %v), want no operations", ops, ok)
		}
		if _, ok := got[b]; ok {
			t.Errorf("Members() lists %v after it left", b)
		}
		for _, f := range allFaults {
			s.Arm(leases.StmtMemberOps, f, 1)
			_, err := s.Coord.Members(s.ctx)
			wantErr(t, "Members with "+f.String(), err, fault.Unavailable)
		}
	}},

	{"heartbeat faults", func(t *testing.T, s *coordSuite) {
		a := uuid.New()
		defer s.Coord.Leave(context.WithoutCancel(s.ctx), a)
		if _, err := s.members(a); err != nil {
			t.Fatal(err)
		}
		for _, f := range allFaults {
			b := uuid.New()
			s.Arm(leases.StmtHeartbeat, f, 1)
			_, err := s.Coord.Heartbeat(s.ctx, b, longTTL)
			want := fault.OutcomeUnknown
			if f == cassandra.FaultUnavailable {
				want = fault.Unavailable
			}
			wantErr(t, "Heartbeat with "+f.String(), err, want)
			s.wantMember(t, a, b, f == cassandra.FaultLoseResponse)
		}
		for _, f := range allFaults {
			b := uuid.New()
			s.Arm(leases.StmtMembers, f, 1)
			_, err := s.Coord.Heartbeat(s.ctx, b, longTTL)
			wantErr(t, "Heartbeat with its count "+f.String(), err, fault.Unavailable)
			s.wantMember(t, a, b, true) // the heartbeat itself was written
		}
	}},

	{"leave faults", func(t *testing.T, s *coordSuite) {
		a := uuid.New()
		defer s.Coord.Leave(context.WithoutCancel(s.ctx), a)
		for _, f := range allFaults {
			b := uuid.New()
			s.measure(t, func() error {
				before, err := s.members(a)
				if err != nil {
					return err
				}
				with, err := s.members(b)
				if err != nil {
					return err
				}
				if with != before+1 {
					return fmt.Errorf("members: %d, then %d after another joined; want n, n+1", before, with)
				}
				return nil
			})
			s.Arm(leases.StmtLeave, f, 1)
			want := fault.OutcomeUnknown
			if f == cassandra.FaultUnavailable {
				want = fault.Unavailable
			}
			wantErr(t, "Leave with "+f.String(), s.Coord.Leave(s.ctx, b), want)
			// A lost response left; the others did not.
			s.wantMember(t, a, b, f != cassandra.FaultLoseResponse)
		}
	}},
}
