package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/atlasmart/orderd/proto/client"
)

// The exit codes a script can rely on. exitCodes is the one table from
// errors to them; exitCode reads it, and --help and the README print it.
const (
	exitOK       = 0
	exitInternal = 1
	exitUsage    = 2
	exitInvalid  = 3
	exitNotFound = 4
	exitRefused  = 5
	exitRetry    = 6
	exitDenied   = 7
	exitProblems = 8
)

// orderctl's own kinds of error, beside the client's.
var (
	// errUsage: bad flags, arguments or input files (usageErr).
	errUsage = errors.New("usage")
	// errPending: the request is PENDING, its outcome not decided yet; a
	// retry with the same request_id may finish it.
	errPending = errors.New("request PENDING")
	// errProblems: verify found requests that are not good.
	errProblems = errors.New("verify found problems")
)

var exitCodes = []struct {
	code    int
	meaning string
	kinds   []error // matched with errors.Is, in table order
}{
	{exitOK, "success", nil},
	{exitInternal, "unexpected answer or internal error", []error{client.ErrUnexpected}},
	{exitUsage, "usage: bad flags or arguments, unreadable credential or input file", []error{errUsage}},
	{exitInvalid, "invalid argument (each field violation printed); nothing written", []error{client.ErrInvalid}},
	{exitNotFound, "not found: no such order or request", []error{client.ErrNotFound}},
	{exitRefused, "refused for good: request_id reused, stale version (current_version\n" +
		"     printed), order cancelled, request FAILED", []error{client.ErrConflict, client.ErrStale, client.ErrRejected, client.ErrFailed}},
	{exitRetry, "not done yet (unavailable, outcome unknown, request PENDING): retry\n" +
		"     later with the same request_id (printed)", []error{client.ErrUnavailable, client.ErrOutcomeUnknown, errPending}},
	{exitDenied, "denied: credentials refused or permission missing", []error{client.ErrDenied}},
	{exitProblems, "verify found requests that are not COMPLETE with their order", []error{errProblems}},
}

// exitCode is the exit code of err (nil: 0).
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	for _, e := range exitCodes {
		for _, k := range e.kinds {
			if errors.Is(err, k) {
				return e.code
			}
		}
	}
	return exitInternal
}

// exitCodeHelp is the table for --help.
func exitCodeHelp() string {
	var b strings.Builder
	for _, e := range exitCodes {
		fmt.Fprintf(&b, "  %d  %s\n", e.code, e.meaning)
	}
	return b.String()
}

// usageError is a usage mistake: exit code 2.
type usageError struct{ err error }

func usageErr(err error) error { return &usageError{err} }

func (e *usageError) Error() string        { return e.err.Error() }
func (e *usageError) Unwrap() error        { return e.err }
func (e *usageError) Is(target error) bool { return target == errUsage }

// stateError is a request that is not COMPLETE, as replay and verify see
// it: kind is errPending or client.ErrFailed.
type stateError struct {
	kind      error
	requestID string
	lastError string
}

func (e *stateError) Is(target error) bool { return target == e.kind }

func (e *stateError) Error() string {
	if e.kind == errPending {
		return fmt.Sprintf("request %s is PENDING: its outcome is not decided yet; retry later with --request-id %s", e.requestID, e.requestID)
	}
	msg := fmt.Sprintf("request %s is FAILED", e.requestID)
	if e.lastError != "" {
		msg += " (" + e.lastError + ")"
	}
	return msg + fmt.Sprintf(": a retry is refused; an operator can requeue it (orderctl requeue %s)", e.requestID)
}
