package ledger

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// Table is the ledger's storage, statement by statement: the request rows
// (write_requests_by_id) and the due queue (due_requests). The store's
// protocol (Ledger: claims, settling unknown outcomes, resends, entries
// before claims) runs on it and on nothing else, so the one protocol runs
// on Cassandra (NewCQLTable) and, in unit tests, on the in-memory table of
// ledgertest; the contract suite (ledgertest.Run) holds both to the same
// answers.
//
// Each method is one statement (or one batch of one statement), sent
// once, never retried. Errors are *fault.Error values as
// cassandra.ReadError and WriteError make them: a failed read is
// Unavailable, a refused write Unavailable (not applied), a write that
// timed out or lost its response OutcomeUnknown (it may have applied).
// Rows come back as Cassandra returns them: times in UTC to the
// millisecond, "" for a null text, nil for a null blob.
type Table interface {
	// InsertClaim inserts rec's row (PENDING, attempts 0, every cell with
	// ttl seconds) unless a row exists for its key: applied, or the row
	// the condition found. That row may be an expired remnant (Remnant):
	// its cells expired, the marker the claim wrote not yet. commitAny
	// runs the Paxos commit at ANY (Config.ClaimCommitAny).
	InsertClaim(ctx context.Context, rec Record, ttl int, commitAny bool) (applied bool, existing Record, err error)
	// Update applies u if its condition holds. Whether it applied is all
	// it says: what the condition found is read apart.
	Update(ctx context.Context, u Update) (applied bool, err error)
	// Read reads key's row, at the serial consistency when serial (which
	// finishes any Paxos round in flight), else at LOCAL_QUORUM.
	// ErrNotFound if there is none, or only a remnant.
	Read(ctx context.Context, key Key, serial bool) (Record, error)
	// ReadMany reads at LOCAL_QUORUM the rows of one tenant's and
	// operation's request ids that exist, in any order (no remnants).
	ReadMany(ctx context.Context, tenant, operation string, ids []uuid.UUID) ([]Record, error)
	// ScanChunk reads up to ScanChunk rows of the whole table at
	// LOCAL_QUORUM, from position from (nil: the start), without their
	// outcomes, and the position after them (nil: the table was read to
	// its end). A remnant comes back without a state.
	ScanChunk(ctx context.Context, from []byte) (rows []Record, after []byte, err error)
	// ClusterNow is the time by the cluster's clock.
	ClusterNow(ctx context.Context) (time.Time, error)

	// WriteEntries writes entries, each with its TTL (0: none), in one
	// request; an entry removed before stays removed.
	WriteEntries(ctx context.Context, entries []DueEntry, ttl func(DueEntry) int) error
	// RemoveEntries marks entries done (a removed entry's row stays, with
	// its TTL), in one request; an entry never written is written done.
	RemoveEntries(ctx context.Context, entries []DueEntry, ttl func(DueEntry) int) error
	// ListDue lists the entries not done of one shard's minute that fall
	// due in (after, through], by due time.
	ListDue(ctx context.Context, shard int, bucket, after, through time.Time) ([]DueEntry, error)
	// DropBucket deletes one shard's minute whole, dated by the cluster's
	// clock.
	DropBucket(ctx context.Context, shard int, bucket time.Time) error
}

// ScanChunk is how many rows Table.ScanChunk reads at a time.
const ScanChunk = 200

// UpdateKind names one of the claim's conditional updates (and its
// statement).
type UpdateKind string

const (
	UpdateAttempt  UpdateKind = "attempt"  // one more attempt failed (PENDING stays)
	UpdateFail     UpdateKind = "fail"     // PENDING -> FAILED
	UpdateComplete UpdateKind = "complete" // PENDING -> COMPLETE, with the outcome
	UpdateRequeue  UpdateKind = "requeue"  // FAILED -> PENDING, attempts 0
	UpdateWithdraw UpdateKind = "withdraw" // the row deleted
)

// Update is one conditional update of a claim's row. Every update but a
// withdrawal rewrites every cell that can hold a value with one TTL, so
// all cells of a row expire together.
type Update struct {
	Kind UpdateKind
	// Row is the row as the update leaves it (every cell; a withdrawal
	// reads only its key).
	Row Record
	// TTL is the seconds left until the claim's expiry instant.
	TTL int
	// The condition: the row is in state IfState under claim IfToken and,
	// for an attempt, has IfAttempts attempts.
	IfState    State
	IfToken    uuid.UUID
	IfAttempts int
}

// Holds reports whether row meets u's condition.
func (u Update) Holds(row Record) bool {
	return row.State == u.IfState && row.ClaimToken == u.IfToken &&
		(u.Kind != UpdateAttempt || row.Attempts == u.IfAttempts)
}

// Remnant reports whether rec is an expired remnant: a row whose cells
// have all expired while its row marker (written by the claim, whose TTL
// is rounded apart from the later cells' by under a second) lives on. It
// is a request past its retention.
func Remnant(rec Record) bool { return rec.State == "" && rec.Fingerprint == "" }
