package cql

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/platform/lwt"
)

// ErrLeaseLost is the cause a migration stops with when its lease was taken
// over (it expired while a renewal was refused or unanswered). The versions
// applied before are recorded and a new run goes on from there, so it is of
// kind fault.Unavailable: worth running again, like a cluster that did not
// answer.
var ErrLeaseLost = fault.New(fault.ReasonClusterUnavailable, errors.New("lost the migration lease before the run finished; run the migration again"))

// holder is what a read of the lease row shows: its owner and the time the
// owner last wrote it (zero values: no lease).
type holder struct {
	owner   uuid.UUID
	takenAt time.Time
}

// lease is the migration lease a run holds. While the run lasts it is
// renewed every quarter of its TTL, so a run longer than the TTL keeps it.
// The run's context is cancelled with ErrLeaseLost, so that no further
// statement is sent, when a renewal finds another owner, or a quarter of
// the TTL before the last write known applied could expire: its TTL counts
// from no earlier than when it was sent, and every renewal is cut off at
// that point however long the cluster takes to answer. That is as strong
// as a lease without fencing can be: a statement already on its way when
// the lease is given up still lands (within the quarter TTL left).
type lease struct {
	s        Session
	keyspace string
	ttl      time.Duration
	owner    uuid.UUID

	lastSent time.Time // the taken_at of the last write sent
	// expires is when the last write known applied could expire at the
	// earliest: the time it was sent, by this process's clock, plus the TTL.
	expires time.Time
	stop    context.CancelFunc
	done    sync.WaitGroup
}

// takeLease takes the migration lease, waiting (lockMaxWaitTotal at most)
// while another migrator holds it. An unknown outcome of the LWT is settled
// by reading the lease at the serial consistency: this migrator's owner id
// there means it holds the lease (its response was lost); anything else
// means it does not, and it waits like any migrator that lost.
func takeLease(ctx context.Context, s Session, keyspace string, ttl time.Duration) (*lease, error) {
	l := &lease{s: s, keyspace: keyspace, ttl: ttl, owner: uuid.New()}
	deadline := time.Now().Add(lockMaxWaitTotal)
	for {
		sent, at := time.Now(), l.nextTakenAt()
		res, err := lwt.Do(ctx, lwt.Write[holder]{
			Op: "take the migration lease",
			Send: func(ctx context.Context) (bool, holder, error) {
				applied, err := s.Query(fmt.Sprintf(takeLock, keyspace), l.owner.String(), at, l.ttlSeconds()).
					SerialConsistency(s.Serial()).MapScanCASContext(ctx, map[string]any{})
				return applied, holder{}, cassandra.WriteError("take the migration lease", err)
			},
			Read: l.read,
			// Not this migrator's: it waits like any migrator that lost.
			Applied: func(h holder) bool { return h.owner == l.owner },
			Sends:   1,
		})
		if err != nil {
			return nil, err
		}
		if res.Applied {
			l.expires = sent.Add(ttl)
			return l, nil
		}
		if time.Now().After(deadline) {
			return nil, errors.New("another migrator holds the migration lease; try again later")
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(lockWait):
		}
	}
}

// keep renews the lease until release, and returns ctx cancelled with
// ErrLeaseLost once the lease is lost.
func (l *lease) keep(ctx context.Context) context.Context {
	ctx, lost := context.WithCancelCause(ctx)
	l.stop = func() { lost(nil) }
	l.done.Add(1)
	go func() {
		defer l.done.Done()
		l.renewUntil(ctx, lost)
	}()
	return ctx
}

// renewUntil renews the lease every quarter of its TTL until ctx ends. It
// gives the lease up (lost) when a renewal finds another owner, and, from
// a timer of its own (a renewal may wait for its answer however long the
// driver lets it), a quarter of the TTL before the last applied write
// could expire.
func (l *lease) renewUntil(ctx context.Context, lost context.CancelCauseFunc) {
	every := l.ttl / 4
	giveUp := func() time.Duration { return time.Until(l.expires.Add(-every)) }
	lapse := time.AfterFunc(giveUp(), func() {
		lost(fmt.Errorf("%w (no renewal applied in %s)", ErrLeaseLost, l.ttl-every))
	})
	defer lapse.Stop()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		ours, err := l.renew(ctx)
		switch {
		case err == nil && ours:
			lapse.Reset(giveUp())
		case err == nil:
			lost(ErrLeaseLost)
			return
		}
		// An error: tried again at the next tick, until the lease lapses.
	}
}

// renew rewrites the lease with a fresh TTL if this migrator still owns it,
// moving expires on when it applies. It reports false when another
// migrator (or none) holds it. An unknown outcome is settled by reading the
// lease: the taken_at this renewal wrote means it applied; this owner with
// an older one means it did not, and it is sent again (IF owner = ours
// still holds).
func (l *lease) renew(ctx context.Context) (bool, error) {
	sent, at := time.Now(), l.nextTakenAt()
	res, err := lwt.Do(ctx, lwt.Write[holder]{
		Op: "renew the migration lease",
		Send: func(ctx context.Context) (bool, holder, error) {
			applied, err := l.s.Query(fmt.Sprintf(renewLock, l.keyspace), l.ttlSeconds(), l.owner.String(), at, l.owner.String()).
				SerialConsistency(l.s.Serial()).MapScanCASContext(ctx, map[string]any{})
			return applied, holder{}, cassandra.WriteError("renew the migration lease", err)
		},
		Read:    l.read,
		Applied: func(h holder) bool { return h.owner == l.owner && h.takenAt.Equal(at) },
		Awaits:  func(h holder) bool { return h.owner == l.owner && !h.takenAt.Equal(at) },
	})
	if res.Applied {
		l.expires = sent.Add(l.ttl)
	}
	return res.Applied, err
}

// release stops the renewals and deletes the lease if this migrator still
// owns it. Best effort: the lease expires by its TTL anyway.
func (l *lease) release(ctx context.Context) {
	if l.stop != nil {
		l.stop()
		l.done.Wait()
	}
	_, _ = l.s.Query(fmt.Sprintf(releaseLock, l.keyspace), l.owner.String()).
		SerialConsistency(l.s.Serial()).MapScanCASContext(context.WithoutCancel(ctx), map[string]any{})
}

// read reads the lease row at the serial consistency.
func (l *lease) read(ctx context.Context) (holder, error) {
	var (
		owner gocql.UUID
		at    time.Time
	)
	err := l.s.Query(fmt.Sprintf(lockOwner, l.keyspace)).Consistency(l.s.Serial()).ScanContext(ctx, &owner, &at)
	switch {
	case errors.Is(err, gocql.ErrNotFound):
		return holder{}, nil
	case err != nil:
		return holder{}, fault.New(fault.ReasonClusterUnavailable, fmt.Errorf("read the migration lease: %w", err))
	}
	return holder{owner: uuid.UUID(owner), takenAt: at}, nil
}

// nextTakenAt is the taken_at of the next write: now, to the millisecond a
// timestamp keeps, and later than the last one sent, so that a read can
// tell whether this write applied.
func (l *lease) nextTakenAt() time.Time {
	at := time.Now().UTC().Truncate(time.Millisecond)
	if !at.After(l.lastSent) {
		at = l.lastSent.Add(time.Millisecond)
	}
	l.lastSent = at
	return at
}

func (l *lease) ttlSeconds() int { return int((l.ttl + time.Second - 1) / time.Second) }
