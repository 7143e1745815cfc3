// Package fault is orderd's small table of error kinds. Every package reports
// failures a client must tell apart (bad input, a reused request id, work in
// progress, a cluster that is down, an outcome that may have applied) as a
// *fault.Error; the gRPC adapter maps each Kind to a status code in one place.
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
	default:
		return "internal"
	}
}

// Violation is one problem with one request field.
type Violation struct {
	Field       string
	Description string
}

// Error is an error with a Kind. Message is safe to show a client; Cause is
// for logs only.
type Error struct {
	Kind Kind
	// Reason is the google.rpc.ErrorInfo reason, e.g. REQUEST_ID_REUSED.
	Reason     string
	Message    string
	Violations []Violation
	RetryAfter time.Duration
	Cause      error
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("%s: %v", e.Message, e.Cause)
	}
	return e.Message
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

// As returns the first *Error in err's chain.
func As(err error) (*Error, bool) {
	var fe *Error
	ok := errors.As(err, &fe)
	return fe, ok
}

// InvalidArgs builds an Invalid error from violations.
func InvalidArgs(violations []Violation) *Error {
	return &Error{Kind: Invalid, Reason: "INVALID_ARGUMENT", Message: "the request has invalid fields", Violations: violations}
}
