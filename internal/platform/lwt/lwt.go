// Package lwt is the one loop every conditional write (a Cassandra
// lightweight transaction) runs through: send it; when its outcome is
// unknown, read at the serial consistency and let the row decide; resend,
// a bounded number of times, only while the row shows that the write did
// not apply and that sending it again is safe.
//
// An unknown outcome is never taken as settled without a read. What the
// read shows is the caller's to interpret (Write.Applied, Write.Awaits);
// the order of the decisions and the bound are this package's alone, so
// every store (and every fake that runs a store's protocol) settles writes
// the same way. The models in model/ cite this loop.
package lwt

import (
	"context"
	"fmt"

	"github.com/atlasmart/orderd/internal/domain/fault"
)

// Outcome is how a write whose outcome was unknown was settled.
type Outcome string

const (
	SettledApplied    Outcome = "applied"     // the read showed the write applied
	SettledNotApplied Outcome = "not_applied" // it had not (or another writer's had)
	Unsettled         Outcome = "unsettled"   // the read failed too: the outcome stays unknown
)

// DefaultSends bounds the sends of one write when Write.Sends is 0.
const DefaultSends = 3

// Write is one conditional write and how to tell its outcome from a row.
// S is what the caller reads of the row: a record, a version state, a
// lease holder.
type Write[S any] struct {
	// Op names the write for errors and Observe ("claim", "renew shard
	// lease", ...).
	Op string
	// Send sends the write once. It returns whether it applied and, when it
	// did not, what its condition found (whatever the caller needs from
	// the row). Its error is a *fault.Error: of kind OutcomeUnknown when
	// the write may have applied (a timeout, a lost response), any other
	// kind when it definitely did not.
	Send func(ctx context.Context) (applied bool, found S, err error)
	// Read reads the row at the serial consistency, which finishes or
	// invalidates any Paxos round left in flight. It runs only after an
	// unknown outcome.
	Read func(ctx context.Context) (S, error)
	// Applied reports that the row read shows this write applied. nil: a
	// read never shows that (the caller decides from the row instead).
	Applied func(S) bool
	// Awaits reports that the row read still waits for this write: it did
	// not apply, nothing else changed the row, and sending it again is
	// safe. nil: never resent.
	Awaits func(S) bool
	// Sends bounds the sends (DefaultSends if 0). A row that still awaits
	// the write after the last one gives an Unavailable error: definitely
	// not applied.
	Sends int
	// Observe, if set, is told how each unknown outcome was settled, with
	// the error that made it unknown.
	Observe func(op string, o Outcome, cause error)
}

// Result is the settled outcome of a write.
type Result[S any] struct {
	// Applied: this write applied (its response said so, or a read showed
	// it).
	Applied bool
	// State is what the last send's condition found (not applied), or what
	// the settling read showed (applied or not); the zero S when the send
	// itself reported the write applied.
	State S
	// Settled: a read after an unknown outcome decided the result.
	Settled bool
}

// Do runs w until its outcome is known. It returns an error only when the
// outcome is not: the send's own error when it definitely did not apply
// (any kind but OutcomeUnknown), the unknown outcome's error when the
// settling read failed too (OutcomeUnknown), or an Unavailable error when
// the row still awaited the write after its last send.
func Do[S any](ctx context.Context, w Write[S]) (Result[S], error) {
	sends := w.Sends
	if sends == 0 {
		sends = DefaultSends
	}
	observe := w.Observe
	if observe == nil {
		observe = func(string, Outcome, error) {}
	}
	for attempt := 1; ; attempt++ {
		applied, found, err := w.Send(ctx)
		if err == nil {
			return Result[S]{Applied: applied, State: found}, nil
		}
		if fault.KindOf(err) != fault.OutcomeUnknown {
			return Result[S]{}, err
		}
		st, rerr := w.Read(ctx)
		switch {
		case rerr != nil:
			observe(w.Op, Unsettled, err)
			return Result[S]{}, err
		case w.Applied != nil && w.Applied(st):
			observe(w.Op, SettledApplied, err)
			return Result[S]{Applied: true, State: st, Settled: true}, nil
		case w.Awaits != nil && w.Awaits(st):
			observe(w.Op, SettledNotApplied, err)
			if attempt < sends {
				continue
			}
			return Result[S]{}, fault.New(fault.ReasonClusterUnavailable, notApplied(w.Op, attempt, err))
		}
		observe(w.Op, SettledNotApplied, err)
		return Result[S]{State: st, Settled: true}, nil
	}
}

// notApplied is the error of a write that a read showed still awaiting it
// after its last send.
func notApplied(op string, sends int, err error) error {
	if sends == 1 {
		return fmt.Errorf("%s: settled as not applied: %w", op, err)
	}
	return fmt.Errorf("%s did not apply in %d tries: %w", op, sends, err)
}
