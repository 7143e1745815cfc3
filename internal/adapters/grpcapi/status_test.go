package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/atlasmart/orderd/internal/adapters/auth"
	"github.com/atlasmart/orderd/internal/domain/fault"
)

func testServer() *Server {
	s, err := New(Config{PageTokenKey: testKey, Auth: &auth.Authenticator{}}, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		panic(err)
	}
	return s
}

// statusDetails converts err and sorts its details by type.
func statusDetails(t *testing.T, err error) (*status.Status, *errdetails.ErrorInfo, *errdetails.BadRequest, *errdetails.RetryInfo) {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok {
		t.Fatalf("%v (%T) is not a gRPC status error", err, err)
	}
	var (
		info  *errdetails.ErrorInfo
		br    *errdetails.BadRequest
		retry *errdetails.RetryInfo
	)
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			info = d
		case *errdetails.BadRequest:
			br = d
		case *errdetails.RetryInfo:
			retry = d
		case error:
			t.Errorf("undecodable detail: %v", d)
		default:
			t.Errorf("unexpected detail %T: %v", d, d)
		}
	}
	return st, info, br, retry
}

func TestStatusInvalid(t *testing.T) {
	in := fault.InvalidArgs([]fault.Violation{
		{Field: "request_id", Description: "required"},
		{Field: "lines[0].quantity", Description: "must be 1 to 1000000"},
	})
	st, info, br, retry := statusDetails(t, testServer().Status(context.Background(), "CreateOrder", in))
	if st.Code() != codes.InvalidArgument {
		t.Errorf("code = %s, want InvalidArgument", st.Code())
	}
	if want := messageOf[fault.ReasonInvalidArgument]; st.Message() != want {
		t.Errorf("message = %q, want %q", st.Message(), want)
	}
	if info == nil || info.GetReason() != "INVALID_ARGUMENT" || info.GetDomain() != ErrorDomain {
		t.Errorf("ErrorInfo = %v, want reason INVALID_ARGUMENT in %s", info, ErrorDomain)
	}
	if br == nil {
		t.Fatal("no BadRequest detail")
	}
	got := br.GetFieldViolations()
	if len(got) != len(in.Violations) {
		t.Fatalf("field violations = %v, want %v", got, in.Violations)
	}
	for i, v := range in.Violations {
		if got[i].GetField() != v.Field || got[i].GetDescription() != v.Description {
			t.Errorf("violation %d = %s: %s, want %s: %s", i, got[i].GetField(), got[i].GetDescription(), v.Field, v.Description)
		}
	}
	if retry != nil {
		t.Errorf("unexpected RetryInfo %v on invalid input", retry)
	}
}

// secretCause stands for driver text: hosts, driver messages, payloads.
var secretCause = errors.New("gocql: no response from 127.0.0.2:9042: secret detail")

func TestStatusKinds(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		code      codes.Code
		reason    string
		retry     time.Duration // 0: no RetryInfo expected
		noDetails bool
	}{
		{name: "conflict", err: fault.New(fault.ReasonRequestIDReused, nil), code: codes.FailedPrecondition, reason: "REQUEST_ID_REUSED"},
		{name: "failed", err: fault.New(fault.ReasonRequestFailed, secretCause), code: codes.FailedPrecondition, reason: "REQUEST_FAILED"},
		{
			name: "in progress", err: fault.New(fault.ReasonRequestInProgress, context.DeadlineExceeded),
			code: codes.Aborted, reason: "REQUEST_IN_PROGRESS", retry: time.Second,
		},
		{
			name: "unavailable", err: fault.New(fault.ReasonClusterUnavailable, secretCause).WithRetryAfter(2 * time.Second),
			code: codes.Unavailable, reason: "CLUSTER_UNAVAILABLE", retry: 2 * time.Second,
		},
		{
			name: "outcome unknown", err: fault.New(fault.ReasonOutcomeUnknown, secretCause).WithRetryAfter(1500 * time.Millisecond),
			code: codes.Unavailable, reason: "OUTCOME_UNKNOWN", retry: 1500 * time.Millisecond,
		},
		{
			name: "wrapped unavailable", err: fmt.Errorf("project order: %w", fault.New(fault.ReasonClusterUnavailable, secretCause)),
			code: codes.Unavailable, reason: "CLUSTER_UNAVAILABLE", retry: time.Second,
		},
		{name: "request not found", err: fault.New(fault.ReasonRequestNotFound, nil), code: codes.NotFound, reason: "REQUEST_NOT_FOUND"},
		{name: "order not found", err: fault.New(fault.ReasonOrderNotFound, nil), code: codes.NotFound, reason: "ORDER_NOT_FOUND"},
		{name: "plain error", err: secretCause, code: codes.Internal, noDetails: true},
		{name: "internal fault", err: fault.New(fault.ReasonInternal, secretCause), code: codes.Internal, noDetails: true},
		{name: "unreadable command", err: fault.New(fault.ReasonCommandUnreadable, secretCause), code: codes.Internal, noDetails: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := testServer().Status(context.Background(), "CreateOrder", tc.err, slog.String("request_id", "x"))
			st, info, br, retry := statusDetails(t, err)
			if st.Code() != tc.code {
				t.Errorf("code = %s, want %s", st.Code(), tc.code)
			}
			if strings.Contains(st.Message(), "secret") || strings.Contains(st.Message(), "127.0.0") {
				t.Errorf("message %q leaks the cause", st.Message())
			}
			if tc.noDetails {
				if st.Message() != "internal error" {
					t.Errorf("message = %q, want \"internal error\"", st.Message())
				}
				if len(st.Details()) != 0 {
					t.Errorf("details = %v, want none", st.Details())
				}
				return
			}
			fe, _ := fault.As(tc.err)
			if want := messageOf[fe.Reason]; st.Message() != want {
				t.Errorf("message = %q, want %q", st.Message(), want)
			}
			if info == nil {
				t.Fatal("no ErrorInfo detail")
			}
			if info.GetReason() != tc.reason || info.GetDomain() != ErrorDomain {
				t.Errorf("ErrorInfo = %s in %s, want %s in %s", info.GetReason(), info.GetDomain(), tc.reason, ErrorDomain)
			}
			if br != nil {
				t.Errorf("unexpected BadRequest %v", br)
			}
			switch {
			case tc.retry == 0 && retry != nil:
				t.Errorf("unexpected RetryInfo %v", retry)
			case tc.retry > 0 && retry == nil:
				t.Error("no RetryInfo detail")
			case tc.retry > 0 && retry.GetRetryDelay().AsDuration() != tc.retry:
				t.Errorf("retry delay = %s, want %s", retry.GetRetryDelay().AsDuration(), tc.retry)
			}
		})
	}
}

// Every kind must map to a non-OK code: a kind missing from codeOf would
// give codes.OK, and status.Error(codes.OK, ...) is a nil error.
func TestStatusEveryKindIsAnError(t *testing.T) {
	for k := fault.Internal; k <= fault.OutcomeUnknown; k++ {
		err := testServer().Status(context.Background(), "CreateOrder", &fault.Error{Kind: k, Reason: "R"})
		if err == nil {
			t.Errorf("kind %s: Status returned nil", k)
			continue
		}
		if code := status.Code(err); code == codes.OK || code == codes.Unknown {
			t.Errorf("kind %s: code %s", k, code)
		}
	}
}

// Every reason has its client-facing message here, the only place one is
// written.
func TestEveryReasonHasAMessage(t *testing.T) {
	for _, r := range fault.Reasons() {
		if messageOf[r] == "" {
			t.Errorf("reason %s has no message in messageOf", r)
		}
	}
}

// A recorded conflict of a change says the order's version in
// ErrorInfo's metadata; a stale change is ABORTED, a change of a cancelled
// order FAILED_PRECONDITION; neither is retryable as is (no RetryInfo).
func TestStatusChangeConflicts(t *testing.T) {
	for reason, code := range map[fault.Reason]codes.Code{
		fault.ReasonStaleVersion:   codes.Aborted,
		fault.ReasonOrderCancelled: codes.FailedPrecondition,
	} {
		e := fault.New(reason, nil)
		e.Metadata = map[string]string{"current_version": "8"}
		st, info, br, retry := statusDetails(t, testServer().Status(context.Background(), "AmendOrder", e))
		if st.Code() != code || info == nil || info.GetReason() != string(reason) || info.GetMetadata()["current_version"] != "8" ||
			br != nil || retry != nil || st.Message() != messageOf[reason] {
			t.Errorf("%s = %v, ErrorInfo %v, BadRequest %v, RetryInfo %v; want %s with current_version 8", reason, st, info, br, retry, code)
		}
	}
}

// The grpc-retry-pushback-ms trailer matches RetryInfo on the codes the
// shipped service config retries, and stops the retry of a recorded answer.
func TestPushback(t *testing.T) {
	tests := []struct {
		reason fault.Reason
		want   string // "" = no trailer
	}{
		{fault.ReasonClusterUnavailable, "1000"},
		{fault.ReasonOutcomeUnknown, "1000"},
		{fault.ReasonRequestInProgress, "1000"},
		{fault.ReasonStaleVersion, "-1"},
		{fault.ReasonRateLimited, ""}, // RESOURCE_EXHAUSTED: not retried by the config
		{fault.ReasonRequestIDReused, ""},
		{fault.ReasonInvalidArgument, ""},
	}
	for _, tc := range tests {
		fe := fault.New(tc.reason, nil)
		got, ok := pushbackOf(codeOf[fe.Kind], fe)
		if tc.want == "" && ok || got != tc.want {
			t.Errorf("%s: pushback %q (set %v), want %q", tc.reason, got, ok, tc.want)
		}
	}
}
