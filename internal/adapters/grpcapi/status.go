package grpcapi

import (
	"context"
	"log/slog"
	"strconv"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/atlasmart/orderd/internal/domain/fault"
)

// ErrorDomain is the google.rpc.ErrorInfo domain of orderd's errors.
const ErrorDomain = "orderd.atlasmart.com"

// codeOf is the one table from fault kinds to gRPC codes.
var codeOf = map[fault.Kind]codes.Code{
	fault.Invalid:         codes.InvalidArgument,
	fault.NotFound:        codes.NotFound,
	fault.Conflict:        codes.FailedPrecondition,
	fault.Failed:          codes.FailedPrecondition,
	fault.InProgress:      codes.Aborted,
	fault.Unavailable:     codes.Unavailable,
	fault.OutcomeUnknown:  codes.Unavailable,
	fault.Limited:         codes.ResourceExhausted,
	fault.Unauthenticated: codes.Unauthenticated,
	fault.Forbidden:       codes.PermissionDenied,
	fault.Stale:           codes.Aborted,
	fault.Rejected:        codes.FailedPrecondition,
}

// Status turns any error into the gRPC status a client sees, with
// BadRequest, ErrorInfo and RetryInfo details. Unmapped errors become a bare
// Internal whose cause is logged here and never sent.
func (s *Server) Status(ctx context.Context, method string, err error, attrs ...slog.Attr) error {
	fe, ok := fault.As(err)
	code, mapped := codes.Internal, false
	if ok {
		code, mapped = codeOf[fe.Kind]
	}
	if !mapped {
		s.log.LogAttrs(ctx, slog.LevelError, "internal error", append(attrs, slog.String("method", method), slog.Any("error", err))...)
		return status.Error(codes.Internal, "internal error")
	}
	s.logRefusal(ctx, method, code, fe.Reason, err, attrs)

	msg, ok := messageOf[fe.Reason]
	if !ok {
		msg = "internal error"
	}
	st := status.New(code, msg)
	details := []protoadapt.MessageV1{&errdetails.ErrorInfo{Reason: string(fe.Reason), Domain: ErrorDomain, Metadata: fe.Metadata}}
	if len(fe.Violations) > 0 {
		br := &errdetails.BadRequest{}
		for _, v := range fe.Violations {
			br.FieldViolations = append(br.FieldViolations, &errdetails.BadRequest_FieldViolation{Field: v.Field, Description: v.Description})
		}
		details = append(details, br)
	}
	if fe.RetryAfter > 0 {
		details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(fe.RetryAfter)})
	}
	if withDetails, err := st.WithDetails(details...); err == nil {
		st = withDetails
	}
	if pushback, ok := pushbackOf(code, fe); ok {
		// Outside a gRPC call (a unit test calling a handler) there is no
		// trailer to set; the details above still carry the answer.
		_ = grpc.SetTrailer(ctx, metadata.Pairs(PushbackTrailer, pushback))
	}
	return st.Err()
}

// logRefusal writes the refusal's line (INFO; WARN for UNAVAILABLE) unless
// its (code, reason) used up its allowance (lograte); the first line after a
// held-back run carries "suppressed", how many were not written.
func (s *Server) logRefusal(ctx context.Context, method string, code codes.Code, reason fault.Reason, err error, attrs []slog.Attr) {
	level := slog.LevelInfo
	if code == codes.Unavailable {
		level = slog.LevelWarn
	}
	attrs = append(attrs, slog.String("method", method), slog.String("code", code.String()),
		slog.String("reason", string(reason)), slog.Any("error", err))
	s.refusals.Log(ctx, s.log, level, refusalKind{code, reason}, "request refused", attrs...)
}

// refusalKind is what refusal lines are rate-limited by: a bounded set.
type refusalKind struct {
	code   codes.Code
	reason fault.Reason
}

// PushbackTrailer is the trailer gRPC's built-in retry reads (gRFC A6): a
// client retrying under the shipped service config waits that many
// milliseconds, or does not retry at all when it is negative.
const PushbackTrailer = "grpc-retry-pushback-ms"

// pushbackOf is the grpc-retry-pushback-ms value for an answer whose code
// the shipped service config retries (UNAVAILABLE, ABORTED): RetryInfo's
// delay when there is one, and "-1" (do not retry) for a recorded answer
// that a retry would only read back (ABORTED STALE_VERSION). Other codes
// are never retried, so they carry none.
func pushbackOf(code codes.Code, fe *fault.Error) (string, bool) {
	if code != codes.Unavailable && code != codes.Aborted {
		return "", false
	}
	switch {
	case fe.Kind == fault.Stale:
		return "-1", true
	case fe.RetryAfter > 0:
		return strconv.FormatInt(fe.RetryAfter.Milliseconds(), 10), true
	}
	return "", false
}
