package reconciler

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/domain/fault"
)

// MemberReader lists the live reconciler instances with the operations each
// says it finishes (Coordinator.Members).
type MemberReader interface {
	Members(ctx context.Context) (map[uuid.UUID][]string, error)
}

// Fleet says whether every live reconciler instance finishes an operation.
//
// A reconciler finishes the due requests of every shard it leases, of any
// operation. One of a release that does not know an operation would have
// finished its requests as something they are not (a release before
// CancelOrder and AmendOrder finished a change as a create, found "another
// command" and withdrew it; the one before this dead-lettered it), so an
// operation that not every release finishes is accepted only while every
// live instance says it finishes it. This release and later ones say so in
// every heartbeat (migration 0007); an older one says nothing and counts as
// finishing nothing that needs asking.
//
// What a Fleet read is cached for TTL: an older instance that joins just
// after a read can meet a request accepted within that window. Rolling back
// below the release that introduced an operation while its requests are
// pending is unsafe for that reason (docs/operations.md "Upgrading").
type Fleet struct {
	members MemberReader
	ttl     time.Duration
	now     func() time.Time

	mu   sync.Mutex
	read time.Time // when cached was read; zero: never
	live map[uuid.UUID][]string
}

// NewFleet returns a Fleet reading members at most once per ttl.
func NewFleet(members MemberReader, ttl time.Duration) *Fleet {
	return &Fleet{members: members, ttl: ttl, now: time.Now}
}

// Finishes is nil if every live reconciler instance says it finishes op,
// an OPERATION_NOT_ENABLED error (kind Unavailable) naming how many do not
// if any does not, and the read's error if the members cannot be read.
func (f *Fleet) Finishes(ctx context.Context, op string) error {
	live, err := f.liveMembers(ctx)
	if err != nil {
		return err
	}
	lacking := 0
	for _, ops := range live {
		if !slices.Contains(ops, op) {
			lacking++
		}
	}
	if lacking > 0 {
		return fault.New(fault.ReasonOperationNotEnabled, fmt.Errorf(
			"%d of %d live reconciler instances do not say they finish %s (an older release): it is accepted once every instance runs a release that does",
			lacking, len(live), op))
	}
	return nil
}

func (f *Fleet) liveMembers(ctx context.Context) (map[uuid.UUID][]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.read.IsZero() && f.now().Sub(f.read) < f.ttl {
		return f.live, nil
	}
	live, err := f.members.Members(ctx)
	if err != nil {
		return nil, fmt.Errorf("which operations the reconcilers finish: %w", err)
	}
	f.live, f.read = live, f.now()
	return live, nil
}
