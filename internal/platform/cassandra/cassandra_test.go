package cassandra

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"
	"testing"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/atlasmart/orderd/internal/domain/fault"
)

func TestErrorClassification(t *testing.T) {
	reset := fmt.Errorf("gocql: failed to read uncompressed frame, err: %w", syscall.ECONNRESET)
	cases := []struct {
		name        string
		err         error
		write, read fault.Kind
	}{
		{"unavailable", &gocql.RequestErrUnavailable{}, fault.Unavailable, fault.Unavailable},
		{"no connections", gocql.ErrNoConnections, fault.Unavailable, fault.Unavailable},
		{"overloaded", &gocql.RequestErrOverloaded{}, fault.Unavailable, fault.Unavailable},
		{"write timeout", &gocql.RequestErrWriteTimeout{WriteType: "CAS"}, fault.OutcomeUnknown, fault.Unavailable},
		{"cas unknown", &gocql.RequestErrCASWriteUnknown{}, fault.OutcomeUnknown, fault.Unavailable},
		{"client timeout", gocql.ErrTimeoutNoResponse, fault.OutcomeUnknown, fault.Unavailable},
		{"connection reset mid-request", reset, fault.OutcomeUnknown, fault.Unavailable},
		{"connection closed", gocql.ErrConnectionClosed, fault.OutcomeUnknown, fault.Unavailable},
		{"eof", io.ErrUnexpectedEOF, fault.OutcomeUnknown, fault.Unavailable},
		{"deadline", context.DeadlineExceeded, fault.OutcomeUnknown, fault.Unavailable},
		{"read timeout", &gocql.RequestErrReadTimeout{}, fault.OutcomeUnknown, fault.Unavailable},
		{"syntax", &gocql.RequestErrSyntax{}, fault.Internal, fault.Internal},
		{"invalid", &gocql.RequestErrInvalid{}, fault.Internal, fault.Internal},
		{"marshal", gocql.MarshalError("can not marshal"), fault.Internal, fault.Internal},
		{"arg count", gocql.ErrQueryArgLength, fault.Internal, fault.Internal},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := fault.KindOf(WriteError("op", tc.err)); got != tc.write {
				t.Errorf("WriteError: %v, want %v", got, tc.write)
			}
			if got := fault.KindOf(ReadError("op", tc.err)); got != tc.read {
				t.Errorf("ReadError: %v, want %v", got, tc.read)
			}
			if !errors.Is(WriteError("op", tc.err), tc.err) {
				t.Errorf("the cause is not kept")
			}
		})
	}
	if WriteError("op", nil) != nil || ReadError("op", nil) != nil {
		t.Error("nil must stay nil")
	}
}
