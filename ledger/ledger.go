package ledger

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
)

// State is a request's place in its life.
type State string

const (
	// Pending: claimed; the work may or may not be done yet.
	Pending State = "PENDING"
	// Complete: the work is done and Outcome is recorded.
	Complete State = "COMPLETE"
	// Failed: given up after repeated errors (dead letter); LastError says why.
	Failed State = "FAILED"
)

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
	CompletedAt time.Time // zero unless Complete
	Outcome     []byte    // nil unless Complete
	Attempts    int
	LastError   string
	ClaimToken  uuid.UUID
}

// ErrNotFound: no record for the key (never claimed, or expired).
var ErrNotFound = errors.New("ledger: no such request")

// Store is the request ledger. Errors other than ErrNotFound are
// *fault.Error values of kind Unavailable (definitely not applied),
// OutcomeUnknown (could not be settled) or Internal.
type Store interface {
	// Claim creates rec (state PENDING) unless a record exists for its key.
	// It returns true and rec when this call created it, or false and the
	// existing record.
	Claim(ctx context.Context, rec Record) (bool, Record, error)
	// Get reads a record linearizably (LOCAL_SERIAL), settling any write in
	// flight. ErrNotFound if there is none.
	Get(ctx context.Context, key Key) (Record, error)
	// Peek reads a record at LOCAL_QUORUM: cheap, may miss a write in flight.
	Peek(ctx context.Context, key Key) (Record, error)
	// Complete moves a PENDING record to COMPLETE with its outcome and
	// returns the record as it now is (COMPLETE, by this call or an earlier one,
	// or whatever state it was found in).
	Complete(ctx context.Context, rec Record, outcome []byte, at time.Time) (Record, error)
	// RecordAttempt notes, on a record still PENDING, one more attempt and the
	// error that ended the last one. Lost races are ignored: it is bookkeeping.
	RecordAttempt(ctx context.Context, rec Record, lastErr string) error
}
