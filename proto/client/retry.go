package client

import (
	"context"
	"math/rand/v2"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Policy is how the client retries. The zero value of a field takes its
// default (DefaultPolicy).
type Policy struct {
	// MaxAttempts bounds the calls of one operation, the first included.
	MaxAttempts int
	// AttemptTimeout bounds one call; the caller's context bounds them all.
	// An attempt that times out may have been applied: the next one uses
	// the same request_id, and the client settles before it gives up.
	AttemptTimeout time.Duration
	// InitialBackoff and MaxBackoff bound the wait between attempts
	// (exponential, doubled each time, with full jitter); a RetryInfo delay
	// from the server is waited instead when it is longer.
	InitialBackoff, MaxBackoff time.Duration
	// SettleTimeout is kept back from the caller's deadline for settling an
	// unknown outcome with GetRequest before giving up.
	SettleTimeout time.Duration
}

// DefaultPolicy: 8 attempts of up to 10 s each, 100 ms to 5 s apart, 2 s
// kept for settling. Together they ride out a Cassandra node restart or an
// orderd restart (about 20 s of answers that say "try again").
var DefaultPolicy = Policy{MaxAttempts: 8, AttemptTimeout: 10 * time.Second,
	InitialBackoff: 100 * time.Millisecond, MaxBackoff: 5 * time.Second, SettleTimeout: 2 * time.Second}

func (p Policy) withDefaults() Policy {
	d := DefaultPolicy
	if p.MaxAttempts > 0 {
		d.MaxAttempts = p.MaxAttempts
	}
	if p.AttemptTimeout > 0 {
		d.AttemptTimeout = p.AttemptTimeout
	}
	if p.InitialBackoff > 0 {
		d.InitialBackoff = p.InitialBackoff
	}
	if p.MaxBackoff > 0 {
		d.MaxBackoff = p.MaxBackoff
	}
	if p.SettleTimeout > 0 {
		d.SettleTimeout = p.SettleTimeout
	}
	return d
}

// backoff is the wait before attempt n+1 (n >= 1): full jitter over an
// exponentially growing cap, never shorter than the server's RetryInfo.
func (p Policy) backoff(n int, retryInfo time.Duration) time.Duration {
	ceiling := p.InitialBackoff << min(n-1, 20)
	if ceiling <= 0 || ceiling > p.MaxBackoff {
		ceiling = p.MaxBackoff
	}
	wait := time.Duration(rand.Int64N(int64(ceiling) + 1))
	return max(wait, retryInfo)
}

// settler finds out what became of a write whose outcome is unknown.
type settler func(ctx context.Context) (state string, err error)

// call runs one operation under p: attempt until an answer is final, the
// attempts run out, or the caller's context is done. A write passes settle:
// before it gives up on an unknown outcome, settle asks the ledger; a
// COMPLETE request is then answered by one more attempt (a replay: the
// server answers a known request_id from its record and writes nothing).
func call[T any](ctx context.Context, p Policy, requestID string, settle settler, attempt func(context.Context) (T, error)) (T, error) {
	var zero T
	write := settle != nil
	var last answer
	lastKind, sawAmbiguous := error(nil), false
	for n := 1; ; n++ {
		resp, timedOut, err := runAttempt(ctx, p, write, attempt)
		if err == nil {
			return resp, nil
		}
		last = readAnswer(err)
		if ctx.Err() != nil && !timedOut {
			// The caller gave up mid-call: the request may have reached
			// orderd, and there is no time left to find out.
			lastKind, sawAmbiguous = ErrUnavailable, true
			if write {
				lastKind = ErrOutcomeUnknown
			}
			return zero, newError(lastKind, last, requestID, n)
		}
		v, kind := judge(last, timedOut)
		if v == final {
			return zero, newError(kind, last, requestID, n)
		}
		lastKind, sawAmbiguous = kind, sawAmbiguous || v == ambiguous
		if n >= p.MaxAttempts || !sleep(ctx, p.backoff(n, last.retryAfter), p, write) {
			if !write {
				// A read changes nothing: its outcome is never in doubt.
				return zero, newError(ErrUnavailable, last, requestID, n)
			}
			e := newError(lastKind, last, requestID, n)
			if !sawAmbiguous {
				return zero, e
			}
			return settleOrGiveUp(ctx, p, e, settle, attempt)
		}
	}
}

// settleOrGiveUp asks the ledger what became of a write whose outcome is
// unknown, within SettleTimeout of what is left of the caller's deadline. A
// COMPLETE request is answered by one more attempt: a replay, which the
// server answers from its record without writing anything.
func settleOrGiveUp[T any](ctx context.Context, p Policy, e *Error, settle settler, attempt func(context.Context) (T, error)) (T, error) {
	var zero T
	sctx, cancel := context.WithTimeout(ctx, p.SettleTimeout)
	defer cancel()
	state, err := settle(sctx)
	e.Kind, e.RequestState = ErrOutcomeUnknown, state
	switch {
	case err != nil:
		e.RequestState = ""
	case state == "COMPLETE":
		resp, err := attempt(sctx)
		if err == nil {
			return resp, nil
		}
		// The replay answers what was recorded: a recorded refusal
		// (STALE_VERSION, ORDER_CANCELLED, ...) is as final as on a first
		// attempt, and is the answer.
		a := readAnswer(err)
		if v, kind := judge(a, false); v == final {
			return zero, newError(kind, a, e.RequestID, e.Attempts+1)
		}
	case state == "FAILED":
		e.Kind = ErrFailed
	}
	// PENDING: an attempt is still finishing it (or the reconciler will).
	// NOT_FOUND: not claimed yet, but an attempt still in flight could
	// claim it, so this is not "not applied". Either way: retry later with
	// the same request_id.
	return zero, e
}

// runAttempt makes one call under the attempt timeout. A write keeps
// SettleTimeout of the caller's deadline back for settling.
func runAttempt[T any](ctx context.Context, p Policy, write bool, attempt func(context.Context) (T, error)) (resp T, timedOut bool, err error) {
	budget := p.AttemptTimeout
	if dl, ok := ctx.Deadline(); ok && write {
		if left := time.Until(dl) - p.SettleTimeout; left < budget {
			budget = max(left, p.SettleTimeout) // the last attempt may use the reserve
		}
	}
	actx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	resp, err = attempt(actx)
	// The attempt's deadline travels to orderd (grpc-timeout), which may
	// answer DEADLINE_EXCEEDED a moment before this side's timer fires: the
	// code, with the caller's context still live, is what tells.
	timedOut = status.Code(err) == codes.DeadlineExceeded && ctx.Err() == nil
	return resp, timedOut, err
}

// sleep waits d, or returns false when the caller's context would end (or
// leave less than the settle reserve, for a write) before the next attempt.
func sleep(ctx context.Context, d time.Duration, p Policy, write bool) bool {
	if dl, ok := ctx.Deadline(); ok {
		reserve := time.Duration(0)
		if write {
			reserve = p.SettleTimeout
		}
		if time.Until(dl) < d+reserve {
			return false
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
