// Package failpoint lets a test make the real orderd binary fail at a named
// point of the write path, through the ORDERD_FAILPOINTS setting:
//
//	ORDERD_FAILPOINTS="after-claim=exit;projection.orders_by_id=error"
//
// Actions: "exit" ends the process at once with exit code 86 (a crash: no
// deferred function, no graceful shutdown); "error" makes the step fail as a
// database write would; "panic" panics in the calling goroutine;
// "sleep(250ms)" delays the step. A nil *Set is disarmed and costs one nil
// check, so production code calls Eval freely.
//
// Failpoints can be armed only in a binary built with -tags failpoints (the
// e2e suite builds one); a release build refuses any specification.
package failpoint

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/atlasmart/orderd/internal/domain/fault"
)

// The points the write path evaluates.
const (
	// BeforeClaim: CreateOrder's input is valid, nothing is written yet.
	BeforeClaim = "before-claim"
	AfterClaim  = "after-claim"
	// BeforeVersion: a change is claimed, its version check not yet sent.
	BeforeVersion = "before-version"
	// AfterVersion: a change is accepted by its version check, nothing of
	// it projected yet.
	AfterVersion = "after-version"
	// BeforeRelease: the order is recorded (every projection written),
	// its due entry not yet released.
	BeforeRelease = "before-release"
	// BeforePublish: the order is recorded and answered, its event not yet
	// sent to the broker (the background delivery, or the reconciler's).
	BeforePublish = "before-publish"
	// AfterPublish: the broker acknowledged the event; its due entry is
	// not yet released.
	AfterPublish = "after-publish"
	// ProjectionPrefix + table name, evaluated before that table's write.
	ProjectionPrefix = "projection."
	// AfterProjectionPrefix + table name, evaluated after that table's write.
	AfterProjectionPrefix = "after-projection."
)

// ExitCode is the exit status of a process stopped by an "exit" failpoint.
const ExitCode = 86

type action struct {
	kind  string // exit, error, panic, sleep
	sleep time.Duration
	// times, if set, is how many more evaluations fire ("error*2": the
	// first two); nil fires every time.
	times *atomic.Int64
}

// Set is a set of armed failpoints.
type Set struct {
	points map[string]action
}

// Parse reads a specification like "after-claim=exit;projection.orders_by_id=error*2"
// (a "*N" suffix fires the action on the first N evaluations only).
// An empty specification gives a nil (disarmed) Set; any other is an error
// unless the binary was built with -tags failpoints.
func Parse(spec string) (*Set, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, nil
	}
	if !Compiled {
		return nil, fmt.Errorf("failpoints %q: this binary was built without failpoints (only test builds, go build -tags failpoints, can arm them)", spec)
	}
	return parse(spec)
}

func parse(spec string) (*Set, error) {
	s := &Set{points: map[string]action{}}
	for _, part := range strings.Split(spec, ";") {
		name, act, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("failpoint %q: want name=action", part)
		}
		var times *atomic.Int64
		if a, n, counted := strings.Cut(act, "*"); counted {
			k, err := strconv.Atoi(n)
			if err != nil || k < 1 {
				return nil, fmt.Errorf("failpoint %s: count %q: want a positive number", name, n)
			}
			times = new(atomic.Int64)
			times.Store(int64(k))
			act = a
		}
		switch {
		case act == "exit" || act == "error" || act == "panic":
			s.points[name] = action{kind: act, times: times}
		case strings.HasPrefix(act, "sleep(") && strings.HasSuffix(act, ")"):
			d, err := time.ParseDuration(act[len("sleep(") : len(act)-1])
			if err != nil {
				return nil, fmt.Errorf("failpoint %s: %w", name, err)
			}
			s.points[name] = action{kind: "sleep", sleep: d, times: times}
		default:
			return nil, fmt.Errorf("failpoint %s: unknown action %q (exit, error, panic, sleep(DURATION))", name, act)
		}
	}
	return s, nil
}

// Eval runs the failpoint name if it is armed: it exits the process, sleeps,
// or returns an injected Unavailable error.
func (s *Set) Eval(name string) error {
	if s == nil {
		return nil
	}
	a, ok := s.points[name]
	if !ok || (a.times != nil && a.times.Add(-1) < 0) {
		return nil
	}
	switch a.kind {
	case "exit":
		fmt.Fprintf(os.Stderr, "failpoint %s: exiting with code %d\n", name, ExitCode)
		os.Exit(ExitCode)
	case "panic":
		panic("failpoint " + name + ": injected panic")
	case "sleep":
		time.Sleep(a.sleep)
	case "error":
		return fault.New(fault.ReasonClusterUnavailable, fmt.Errorf("failpoint %s: injected error", name))
	}
	return nil
}

// ParseForTest is Parse in any build, for unit tests of the packages that
// evaluate failpoints. Binaries arm failpoints only through Parse.
func ParseForTest(spec string) (*Set, error) { return parse(spec) }
