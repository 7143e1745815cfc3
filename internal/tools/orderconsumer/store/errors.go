package store

import (
	"errors"
	"fmt"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// writeError says what a failed write means for the caller. A write is
// presumed to have possibly applied (ErrOutcomeUnknown) unless the driver
// proves it never reached a replica (ErrNotApplied) or the statement itself
// is wrong (a bug: neither). Unknown covers every timeout, including a
// RequestErrWriteTimeout with WriteType CAS (Paxos did not learn whether its
// proposal was accepted) and RequestErrCASWriteUnknown, and every connection
// lost after the request was sent.
func writeError(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case certainlyNotApplied(err):
		return fmt.Errorf("%s: %w: %w", op, ErrNotApplied, err)
	case isBug(err):
		return fmt.Errorf("%s: %w", op, err)
	}
	return fmt.Errorf("%s: %w: %w", op, ErrOutcomeUnknown, err)
}

// readError maps "no row" to ErrNotFound; a read changes nothing, so any
// other failure is just an error.
func readError(op string, err error) error {
	if errors.Is(err, gocql.ErrNotFound) {
		return fmt.Errorf("%s: %w", op, ErrNotFound)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// certainlyNotApplied: the request never reached a replica, or the
// coordinator refused it before writing anything.
func certainlyNotApplied(err error) bool {
	var (
		unavailable   *gocql.RequestErrUnavailable
		overloaded    *gocql.RequestErrOverloaded
		bootstrapping *gocql.RequestErrBootstrapping
	)
	return errors.As(err, &unavailable) || errors.As(err, &overloaded) || errors.As(err, &bootstrapping) ||
		errors.Is(err, gocql.ErrNoConnections) || errors.Is(err, gocql.ErrSessionClosed) ||
		errors.Is(err, gocql.ErrUnavailable) || errors.Is(err, gocql.ErrNoStreams) || errors.Is(err, gocql.ErrNoHosts)
}

// isBug: the server says the statement is wrong, or a value does not
// encode. Retrying cannot help.
func isBug(err error) bool {
	var (
		syntax    *gocql.RequestErrSyntax
		invalid   *gocql.RequestErrInvalid
		marshal   gocql.MarshalError
		unmarshal gocql.UnmarshalError
	)
	return errors.As(err, &syntax) || errors.As(err, &invalid) || errors.As(err, &marshal) ||
		errors.As(err, &unmarshal) || errors.Is(err, gocql.ErrQueryArgLength)
}
