package grpcapi

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc/codes"

	"github.com/atlasmart/orderd/internal/fault"
)

// Refusal lines each (code, reason) may write: a steady rate with a burst.
// A flood of one refusal (an overload's RESOURCE_EXHAUSTED, an outage's
// UNAVAILABLE, a client replaying bad credentials or a bad payload) then
// costs a few lines a second instead of one per call, while the metrics
// still count every call and every other refusal keeps its own allowance.
const (
	refusalLinesPerSecond = 10
	refusalLineBurst      = 20
)

// refusalLog decides which refusals are logged and counts the ones held
// back, so that the next line of the same kind says how many there were.
type refusalLog struct {
	now   func() time.Time
	mu    sync.Mutex
	kinds map[refusalKind]*refusalAllowance
}

// refusalKind is one (code, reason): a bounded set (fault's reasons).
type refusalKind struct {
	code   codes.Code
	reason fault.Reason
}

type refusalAllowance struct {
	lines *rate.Limiter
	held  int64 // refusals not logged since the last line of this kind
}

func newRefusalLog(now func() time.Time) *refusalLog {
	return &refusalLog{now: now, kinds: map[refusalKind]*refusalAllowance{}}
}

// admit reports whether a refusal of (code, reason) is logged, and if so how
// many of its kind were held back since the last one logged.
func (l *refusalLog) admit(code codes.Code, reason fault.Reason) (ok bool, held int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := refusalKind{code, reason}
	a := l.kinds[k]
	if a == nil {
		a = &refusalAllowance{lines: rate.NewLimiter(refusalLinesPerSecond, refusalLineBurst)}
		l.kinds[k] = a
	}
	if !a.lines.AllowN(l.now(), 1) {
		a.held++
		return false, 0
	}
	held, a.held = a.held, 0
	return true, held
}
