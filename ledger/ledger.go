package ledger

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/domain/fault"
)

// State is a request's place in its life.
type State string

const (
	// Pending: claimed. The work is done when the request's order row
	// exists (orders_by_id: written last, it is the recorded outcome); the
	// ledger row stays PENDING until its TTL (docs/architecture.md).
	Pending State = "PENDING"
	// Complete: the work is done and Outcome is recorded in the row: a
	// change's conflict receipt (Store.Complete), or a CreateOrder claim
	// completed before the one-LWT protocol (such rows live until their
	// TTL; readers still honour them). Request views derive it for PENDING
	// rows whose order or change is recorded.
	Complete State = "COMPLETE"
	// Failed: set aside before anything of the work was written (its
	// stored command cannot be finished); LastError holds the reason.
	Failed State = "FAILED"
)

// Terminal reports whether no finisher will ever change a request in state s
// again (only an operator's Requeue moves FAILED back to PENDING).
func (s State) Terminal() bool { return s == Complete || s == Failed }

// Key is a request's scoped identity.
type Key struct {
	Tenant    string
	Operation string
	RequestID uuid.UUID
}

// Record is one ledger row.
type Record struct {
	Key
	EntityID    uuid.UUID
	Fingerprint string
	Command     []byte
	State       State
	CreatedAt   time.Time
	CompletedAt time.Time // zero unless Complete or Failed
	Outcome     []byte    // nil unless Complete
	// Attempts is the number of attempts that ended without finishing the
	// request (0 while the first is under way or when it succeeded).
	Attempts int
	// LastError is the stable reason (fault.Reason) that ended the last
	// failed attempt; never driver text.
	LastError  string
	ClaimToken uuid.UUID
	// TraceParent is the W3C traceparent of the call that claimed the
	// request ("" if it was not traced), kept so that whoever finishes the
	// request publishes its event in that trace. Opaque to the ledger.
	TraceParent string
}

// ExpiresAt is when every cell of the row expires: the claim time plus the
// retention. Every write to the row carries the TTL left until this instant.
func (r Record) ExpiresAt(retention time.Duration) time.Time { return r.CreatedAt.Add(retention) }

// ErrNotFound: no record for the key (never claimed, withdrawn, or expired).
// Like every store's not-found (projection.ErrNotFound), it is a sentinel
// *fault.Error of kind NotFound: test it with errors.Is, or by kind.
var ErrNotFound error = fault.New(fault.ReasonRequestNotFound, errors.New("ledger: no such request"))

// ErrUnfinishable marks a finisher's error that no retry can cure and that
// happened before anything of the work was written (the stored command
// cannot be decoded): the one case in which a request may be set aside as
// FAILED without leaving a visible order behind.
var ErrUnfinishable = errors.New("the stored command cannot be finished")

// ErrUnknownOperation marks a finisher's error for a request of an
// operation this release does not know: a newer release's. Nothing may be
// done to it (no attempt noted, no dead letter, no withdrawal): the due
// entry is kept for a release that knows the operation.
var ErrUnknownOperation = errors.New("operation unknown to this release")

// Settled is what a finisher made of a due request (workflow.Service.Settle,
// which the reconciler runs for each due entry): whether the obligations
// the entry stands for — the request's work, then the delivery of its
// event — are met. It is declared here, with the due queue it decides
// about, because the reconciler (a store) runs the use case's Settle
// without importing it.
type Settled int

const (
	// Unfinished: the work may not be recorded; the finisher's error says
	// why, and by its kind what became of the request (withdrawn, set
	// aside, ErrUnfinishable, ErrUnknownOperation, or retry later).
	Unfinished Settled = iota
	// Finished: the work is recorded and its event acknowledged by the
	// broker, or none is owed. The entry can go; the error is nil.
	Finished
	// EventOwed: the work is recorded and only its event is owed: the
	// broker did not acknowledge it (the error says why). The entry stays,
	// and from then on stands for the event's delivery (DueEntry.Owed).
	EventOwed
)

// String names s for logs and test failures.
func (s Settled) String() string {
	switch s {
	case Finished:
		return "finished"
	case EventOwed:
		return "event owed"
	}
	return "unfinished"
}

// Store is the request ledger. Errors other than ErrNotFound are
// *fault.Error values of kind Unavailable (definitely not applied),
// OutcomeUnknown (may have applied and could not be settled) or Internal.
// No method reports a conditional write as settled unless a read showed it.
type Store interface {
	// Claim creates rec (state PENDING, attempts 0) unless a record exists for
	// its key. It returns true and rec when this call created it, or false
	// and the existing record. Before the claim it writes the attempt's due
	// entry, so a crash right after the claim leaves the request findable.
	//
	// check, if not nil, runs concurrently with that entry write (a read
	// the caller must make before claiming, at no round trip of its own).
	// If check fails, the claim is never sent and Claim returns check's
	// error, whatever became of the entry: the entry may exist, and the
	// caller releases it (Release). Otherwise an entry write that failed
	// is Unavailable, and the claim is not sent either.
	Claim(ctx context.Context, rec Record, check func(context.Context) error) (bool, Record, error)
	// Get reads a record linearizably (at the session's serial consistency:
	// LOCAL_SERIAL, or SERIAL when so configured), settling any write in
	// flight. ErrNotFound if there is none.
	Get(ctx context.Context, key Key) (Record, error)
	// Peek reads a record at LOCAL_QUORUM: cheap, may miss a write in flight,
	// and a claim committed at ANY whose commit has not landed yet. Read it
	// through Read unless "not found" is an answer the caller can take back.
	Peek(ctx context.Context, key Key) (Record, error)
	// Release says that rec's work is done (its order is recorded where it
	// is read from): the claim's due entry is no longer needed and goes. The
	// claim itself stays as it is, PENDING, until its TTL. A Release that
	// fails leaves the entry for the reconciler, which finds the work done.
	Release(ctx context.Context, rec Record) error
	// RecordAttempt notes on rec's claim, still PENDING, that one more
	// attempt failed, with its reason. Losing a race to another note or a
	// state change is not an error: it is bookkeeping.
	RecordAttempt(ctx context.Context, rec Record, reason string) error
	// Complete records outcome as the request's outcome: rec's claim goes
	// from PENDING to COMPLETE (an LWT, like every write of the ledger) and
	// every later attempt is answered from it. The change workflow records
	// its conflict receipts so; a created order's outcome is its
	// order row instead, and an accepted change's its order_versions row.
	// It returns the record as it now is: COMPLETE with this outcome, or,
	// when another finisher of the same claim completed it first, with
	// that one's (the caller answers from the returned record); ErrNotFound
	// when the claim is gone.
	Complete(ctx context.Context, rec Record, outcome []byte) (Record, error)
	// Withdraw deletes rec's claim while it is still PENDING: its command
	// must never run (the request id's order exists with another command).
	// The request id is then free again; its due entry is removed.
	// It returns ErrNotFound when the claim is gone (withdrawn already or
	// expired) and the current record when it is no longer PENDING.
	Withdraw(ctx context.Context, rec Record) (Record, error)
}

// Reader is the part of Store that Read needs.
type Reader interface {
	Get(ctx context.Context, key Key) (Record, error)
	Peek(ctx context.Context, key Key) (Record, error)
}

// Read reads key's record at LOCAL_QUORUM (no Paxos round) and confirms
// only "not found" linearizably (Get), which settles a claim still in
// flight or committed at ANY and not yet visible to a quorum read. A row the
// quorum read returns is committed; it may be stale already, so whatever a
// caller does with it must be safe on a stale row (every ledger write is
// conditional on the state and the claim token).
func Read(ctx context.Context, s Reader, key Key) (Record, error) {
	rec, err := s.Peek(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return s.Get(ctx, key)
	}
	return rec, err
}
