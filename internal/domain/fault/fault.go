// Package fault is orderd's one error vocabulary. Every failure a client
// must tell apart (bad input, a reused request id, work in progress, a
// cluster that is down, an outcome that may have applied) is a *fault.Error
// with a stable Reason; each Reason has one Kind (what the caller should do)
// and, for the retryable ones, a retry delay. Storage and workflow code only
// pick a reason and attach the cause; the gRPC adapter alone turns a reason
// into a status code and a client-facing message (internal/adapters/grpcapi).
package fault

import (
	"errors"
	"fmt"
	"time"
)

// Kind classifies an error by what the caller should do about it.
type Kind int

const (
	// Internal is a bug or an unexpected failure; nothing to retry.
	Internal Kind = iota
	// Invalid input: nothing was written. Violations say what to fix.
	Invalid
	// NotFound: the thing asked for does not exist.
	NotFound
	// Conflict: the request id is bound to a different command.
	Conflict
	// Failed: the request ended FAILED (dead-lettered); an operator can requeue it.
	Failed
	// InProgress: another attempt holds the request; retry after RetryAfter.
	InProgress
	// Unavailable: definitely not applied (or left in a state the reconciler
	// finishes); retry with the same request id.
	Unavailable
	// OutcomeUnknown: a write may or may not have applied and could not be
	// settled; retry with the same request id to learn which.
	OutcomeUnknown
	// Limited: the caller's tenant is over its rate; nothing was done.
	// Retry after RetryAfter.
	Limited
	// Unauthenticated: the call carried no credentials, or none that
	// verify; nothing was done.
	Unauthenticated
	// Forbidden: the caller is known but may not make this call; nothing
	// was done.
	Forbidden
	// Stale: a change's expected version is not the order's; nothing
	// changed, and the answer is recorded (its retries get it again).
	// Read the order and send a corrected change with a new request id.
	Stale
	// Rejected: the order's state refuses the change (it is cancelled);
	// nothing changed, and the answer is recorded.
	Rejected
)

func (k Kind) String() string {
	switch k {
	case Invalid:
		return "invalid"
	case NotFound:
		return "not_found"
	case Conflict:
		return "conflict"
	case Failed:
		return "failed"
	case InProgress:
		return "in_progress"
	case Unavailable:
		return "unavailable"
	case OutcomeUnknown:
		return "outcome_unknown"
	case Limited:
		return "limited"
	case Unauthenticated:
		return "unauthenticated"
	case Forbidden:
		return "forbidden"
	case Stale:
		return "stale"
	case Rejected:
		return "rejected"
	default:
		return "internal"
	}
}

// Reason is the stable, machine-readable cause of an error: the
// google.rpc.ErrorInfo reason clients see, and what the ledger records as a
// request's last_error. Never driver text.
type Reason string

const (
	ReasonInvalidArgument    Reason = "INVALID_ARGUMENT"
	ReasonRequestIDReused    Reason = "REQUEST_ID_REUSED"
	ReasonRequestFailed      Reason = "REQUEST_FAILED"
	ReasonRequestInProgress  Reason = "REQUEST_IN_PROGRESS"
	ReasonRequestNotFound    Reason = "REQUEST_NOT_FOUND"
	ReasonOrderNotFound      Reason = "ORDER_NOT_FOUND"
	ReasonClusterUnavailable Reason = "CLUSTER_UNAVAILABLE"
	ReasonOutcomeUnknown     Reason = "OUTCOME_UNKNOWN"
	ReasonCommandUnreadable  Reason = "COMMAND_UNREADABLE"
	// ReasonDeliveryFailed: the order is recorded, its event not yet
	// acknowledged by the event broker (a request's last_error only; never
	// a CreateOrder answer).
	ReasonDeliveryFailed Reason = "DELIVERY_FAILED"
	ReasonRateLimited    Reason = "RATE_LIMITED"
	// ReasonUnauthenticated: no credentials, or none that verify. Which
	// check failed is logged, never told to the caller.
	ReasonUnauthenticated Reason = "UNAUTHENTICATED"
	// ReasonPermissionDenied: the identity lacks the call's permission.
	ReasonPermissionDenied Reason = "PERMISSION_DENIED"
	ReasonInternal         Reason = "INTERNAL"
	// ReasonStaleVersion: a change's expected_version is not the order's
	// version (ErrorInfo metadata current_version says what it is).
	ReasonStaleVersion Reason = "STALE_VERSION"
	// ReasonOrderCancelled: the order is cancelled and takes no change.
	ReasonOrderCancelled Reason = "ORDER_CANCELLED"
	// ReasonOperationUnknown: a request of an operation this release does
	// not know (a newer release's); never recorded as a last_error.
	ReasonOperationUnknown Reason = "OPERATION_UNKNOWN"
	// ReasonClockSkewed: this process's clock is too far from the
	// cluster's to date a claim or judge one due; nothing was written.
	ReasonClockSkewed Reason = "CLOCK_SKEWED"
	// ReasonOperationNotEnabled: an instance of an older release that does
	// not finish the operation is live; nothing was written.
	ReasonOperationNotEnabled Reason = "OPERATION_NOT_ENABLED"
	// ReasonHistoryBehind: the order's version history (order_versions)
	// is behind the version its row shows, as a restore can leave it; no
	// change of the order is decided until it is rebuilt. Nothing was
	// written.
	ReasonHistoryBehind Reason = "VERSION_HISTORY_BEHIND"
)

// reasons is the one table of what each reason means to a caller.
var reasons = map[Reason]struct {
	kind       Kind
	retryAfter time.Duration
}{
	ReasonInvalidArgument:     {kind: Invalid},
	ReasonRequestIDReused:     {kind: Conflict},
	ReasonRequestFailed:       {kind: Failed},
	ReasonRequestInProgress:   {kind: InProgress, retryAfter: time.Second},
	ReasonRequestNotFound:     {kind: NotFound},
	ReasonOrderNotFound:       {kind: NotFound},
	ReasonClusterUnavailable:  {kind: Unavailable, retryAfter: time.Second},
	ReasonOutcomeUnknown:      {kind: OutcomeUnknown, retryAfter: time.Second},
	ReasonCommandUnreadable:   {kind: Internal},
	ReasonDeliveryFailed:      {kind: Unavailable, retryAfter: time.Second},
	ReasonRateLimited:         {kind: Limited, retryAfter: time.Second},
	ReasonUnauthenticated:     {kind: Unauthenticated},
	ReasonPermissionDenied:    {kind: Forbidden},
	ReasonInternal:            {kind: Internal},
	ReasonStaleVersion:        {kind: Stale},
	ReasonOrderCancelled:      {kind: Rejected},
	ReasonOperationUnknown:    {kind: Unavailable, retryAfter: time.Second},
	ReasonClockSkewed:         {kind: Unavailable, retryAfter: time.Second},
	ReasonOperationNotEnabled: {kind: Unavailable, retryAfter: 5 * time.Second},
	ReasonHistoryBehind:       {kind: Unavailable, retryAfter: 5 * time.Second},
}

// Reasons lists every reason (for tests that check each has a message).
func Reasons() []Reason {
	out := make([]Reason, 0, len(reasons))
	for r := range reasons {
		out = append(out, r)
	}
	return out
}

// Violation is one problem with one request field.
type Violation struct {
	Field       string
	Description string
}

// Error is an error with a Reason (and the Kind that reason has). Cause is
// for logs only; it never reaches a client.
type Error struct {
	Kind       Kind
	Reason     Reason
	Violations []Violation
	RetryAfter time.Duration
	// Metadata is told to the client in ErrorInfo (e.g. current_version).
	Metadata map[string]string
	Cause    error
}

// New is the error for reason, caused by cause (may be nil).
func New(reason Reason, cause error) *Error {
	r, ok := reasons[reason]
	if !ok {
		r.kind = Internal
	}
	return &Error{Kind: r.kind, Reason: reason, RetryAfter: r.retryAfter, Cause: cause}
}

// InvalidArgs is the error for invalid input: nothing was written.
func InvalidArgs(violations []Violation) *Error {
	e := New(ReasonInvalidArgument, nil)
	e.Violations = violations
	return e
}

// WithRetryAfter sets how long a client should wait before retrying.
func (e *Error) WithRetryAfter(d time.Duration) *Error {
	e.RetryAfter = d
	return e
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("%s: %v", e.Reason, e.Cause)
	}
	return string(e.Reason)
}

func (e *Error) Unwrap() error { return e.Cause }

// KindOf returns the Kind of the first *Error in err's chain, or Internal.
func KindOf(err error) Kind {
	var fe *Error
	if errors.As(err, &fe) {
		return fe.Kind
	}
	return Internal
}

// ReasonOf returns the Reason of the first *Error in err's chain, or
// ReasonInternal: what the ledger records as an attempt's last_error.
func ReasonOf(err error) Reason {
	var fe *Error
	if errors.As(err, &fe) {
		return fe.Reason
	}
	return ReasonInternal
}

// As returns the first *Error in err's chain.
func As(err error) (*Error, bool) {
	var fe *Error
	ok := errors.As(err, &fe)
	return fe, ok
}
