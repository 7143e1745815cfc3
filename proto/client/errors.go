package client

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrorDomain is the google.rpc.ErrorInfo domain of orderd's errors.
const ErrorDomain = "orderd.atlasmart.com"

// The kinds of answer a caller acts on. Test with errors.Is; errors.As to
// an *Error gives the details.
var (
	// ErrInvalid: the request is malformed (INVALID_ARGUMENT); nothing was
	// written. Error.Violations names every bad field. Fix the request.
	ErrInvalid = errors.New("invalid request")
	// ErrConflict: the request_id was used before with a different payload
	// (REQUEST_ID_REUSED); nothing was written. A programming error in the
	// caller: one request_id is one intent.
	ErrConflict = errors.New("request_id reused with a different payload")
	// ErrStale: a change named a version the order is no longer at
	// (STALE_VERSION); the answer is recorded. Error.CurrentVersion is the
	// order's version: read the order and send a new change with a new
	// request_id.
	ErrStale = errors.New("stale expected_version")
	// ErrRejected: the order takes no change (ORDER_CANCELLED); recorded.
	ErrRejected = errors.New("change rejected")
	// ErrFailed: the server set the request aside for good (REQUEST_FAILED);
	// nothing of it is visible. An operator can requeue it.
	ErrFailed = errors.New("request failed")
	// ErrNotFound: no such order or request.
	ErrNotFound = errors.New("not found")
	// ErrDenied: the credentials were refused (UNAUTHENTICATED) or lack the
	// permission (PERMISSION_DENIED).
	ErrDenied = errors.New("access denied")
	// ErrOutcomeUnknown: the retries ran out (attempts or the caller's
	// deadline) while the write's outcome was still unknown, and GetRequest
	// could not settle it: the write may yet be applied. Retry later with
	// the same request_id (Error.RequestID); never with a new one.
	ErrOutcomeUnknown = errors.New("outcome unknown")
	// ErrUnavailable: the retries ran out on answers that say nothing was
	// done (the cluster or orderd unavailable, rate limited). Retrying
	// later with the same request_id is safe.
	ErrUnavailable = errors.New("unavailable")
	// ErrUnexpected: an answer the protocol has no rule for (INTERNAL,
	// UNIMPLEMENTED, a message too large, ...): not retried, and not
	// retryable as is. Report it.
	ErrUnexpected = errors.New("unexpected answer")
)

// Error is an answer the client could not turn into a success.
type Error struct {
	// Kind is one of the Err* values above (also matched by errors.Is).
	Kind error
	// Code, Reason and Message are the last answer's gRPC code, ErrorInfo
	// reason (e.g. "STALE_VERSION"; empty when the server sent none) and
	// message.
	Code    codes.Code
	Reason  string
	Message string
	// Violations are INVALID_ARGUMENT's field violations.
	Violations []FieldViolation
	// CurrentVersion is the order's version, for ErrStale.
	CurrentVersion int64
	// RequestID is the idempotency key the attempts used: for a write that
	// ended in ErrOutcomeUnknown or ErrUnavailable, retry with it.
	RequestID string
	// Attempts is how many calls were made.
	Attempts int
	// RequestState is what GetRequest said when the client settled an
	// unknown outcome ("PENDING", "NOT_FOUND", ...); empty if it did not.
	RequestState string
	cause        error
}

// FieldViolation is one bad field of an INVALID_ARGUMENT answer.
type FieldViolation struct{ Field, Description string }

func (e *Error) Error() string {
	msg := fmt.Sprintf("orderd: %v", e.Kind)
	if e.Reason != "" {
		msg += " (" + e.Reason + ")"
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	for _, v := range e.Violations {
		msg += fmt.Sprintf("; %s: %s", v.Field, v.Description)
	}
	if e.RequestState != "" {
		msg += "; request " + e.RequestState
	}
	if e.Attempts > 1 {
		msg += fmt.Sprintf(" after %d attempts", e.Attempts)
	}
	return msg
}

// Is matches e's Kind.
func (e *Error) Is(target error) bool { return target == e.Kind }

// Unwrap is the last gRPC status error.
func (e *Error) Unwrap() error { return e.cause }

// answer is what the client reads from one failed call.
type answer struct {
	st         *status.Status
	reason     string
	metadata   map[string]string
	violations []FieldViolation
	retryAfter time.Duration // RetryInfo's delay, 0 if none
}

func readAnswer(err error) answer {
	st := status.Convert(err)
	a := answer{st: st}
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			if d.GetDomain() == ErrorDomain {
				a.reason, a.metadata = d.GetReason(), d.GetMetadata()
			}
		case *errdetails.BadRequest:
			for _, v := range d.GetFieldViolations() {
				a.violations = append(a.violations, FieldViolation{Field: v.GetField(), Description: v.GetDescription()})
			}
		case *errdetails.RetryInfo:
			a.retryAfter = d.GetRetryDelay().AsDuration()
		}
	}
	return a
}

// verdict is what the client does with an answer.
type verdict int

const (
	final     verdict = iota // give the caller the error
	retry                    // nothing was done: try again
	ambiguous                // it may have been applied: try again with the same request_id, settle before giving up
)

// judge classifies one failed call. attemptTimedOut: the client's own
// per-attempt deadline ended it (not the caller's context).
func judge(a answer, attemptTimedOut bool) (verdict, error) {
	switch a.st.Code() {
	case codes.InvalidArgument:
		return final, ErrInvalid
	case codes.NotFound:
		return final, ErrNotFound
	case codes.Unauthenticated, codes.PermissionDenied:
		return final, ErrDenied
	case codes.FailedPrecondition:
		switch a.reason {
		case "REQUEST_ID_REUSED":
			return final, ErrConflict
		case "ORDER_CANCELLED":
			return final, ErrRejected
		}
		return final, ErrFailed
	case codes.Aborted:
		if a.reason == "STALE_VERSION" {
			return final, ErrStale
		}
		return retry, ErrUnavailable // REQUEST_IN_PROGRESS: another attempt holds it
	case codes.ResourceExhausted:
		if a.retryAfter > 0 { // RATE_LIMITED: nothing done, come back later
			return retry, ErrUnavailable
		}
		return final, ErrUnexpected // e.g. a message too large: retrying cannot help
	case codes.Unavailable:
		switch a.reason {
		case "OUTCOME_UNKNOWN", "":
			// No reason: the transport failed (orderd restarting, a
			// connection reset): the request may have reached orderd.
			return ambiguous, ErrOutcomeUnknown
		}
		return retry, ErrUnavailable // CLUSTER_UNAVAILABLE, DELIVERY_FAILED, CLOCK_SKEWED, OPERATION_NOT_ENABLED, VERSION_HISTORY_BEHIND: nothing decided
	case codes.DeadlineExceeded:
		if attemptTimedOut {
			return ambiguous, ErrOutcomeUnknown
		}
	}
	return final, ErrUnexpected
}

// newError builds the caller's error from the last answer.
func newError(kind error, a answer, requestID string, attempts int) *Error {
	e := &Error{Kind: kind, Code: a.st.Code(), Reason: a.reason, Message: a.st.Message(), Violations: a.violations,
		RequestID: requestID, Attempts: attempts, cause: a.st.Err()}
	if v, err := strconv.ParseInt(a.metadata["current_version"], 10, 64); err == nil {
		e.CurrentVersion = v
	}
	return e
}
