// Package memtable is what the stores' in-memory tables share: one lock
// over their rows, a clock a test can move on, rows that expire with their
// TTL (counted as Cassandra counts it, in whole seconds from the second
// written), and statements run with the fault armed for them served as a
// cassandra.FaultSession serves it (cassandra.Served), each one logged.
// A store's in-memory table keeps only its own rows and the conditions of
// its statements; the protocol above them is the store's production code.
package memtable

import (
	"context"
	"maps"
	"sync"
	"time"

	"github.com/atlasmart/orderd/internal/platform/cassandra"
)

// Runtime runs an in-memory table's statements. Safe for concurrent use;
// make one with New.
type Runtime struct {
	// Faults armed by statement name, served before a statement runs.
	Faults *cassandra.Faults
	now    func() time.Time

	mu        sync.Mutex
	offset    time.Duration // Advance
	intercept func(cassandra.Stmt, any) cassandra.Fault
	log       []Logged
}

// Logged is one statement a Runtime ran or failed.
type Logged struct {
	Name cassandra.Stmt
	// About is what the statement concerns, as its table told Exec.
	About any
	// Fault is what was served instead of a plain execution; 0 for none.
	Fault cassandra.Fault
	// Applied: the statement ran and, if conditional, its condition held.
	Applied bool
}

// New returns a Runtime on the clock now (time.Now if nil) with nothing
// armed.
func New(now func() time.Time) *Runtime {
	if now == nil {
		now = time.Now
	}
	return &Runtime{Faults: cassandra.NewFaults(), now: now}
}

// Exec runs statement name as a session would: the fault armed for it, or
// else the one the intercept picks, is served by cassandra.Served; do runs
// under the lock, with the table's time, and reports whether it applied.
// about (what the statement concerns) goes to the intercept and the log.
func (r *Runtime) Exec(ctx context.Context, name cassandra.Stmt, about any, op string, write bool, do func(now time.Time) bool) (bool, error) {
	f, armed := r.Faults.Take(name)
	if !armed {
		r.mu.Lock()
		intercept := r.intercept
		r.mu.Unlock()
		if intercept != nil {
			f = intercept(name, about)
		}
	}
	ran := false
	applied, err := cassandra.Served(ctx, name, op, write, f, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		ran = do(r.nowLocked())
		return ran
	})
	r.mu.Lock()
	r.log = append(r.log, Logged{Name: name, About: about, Fault: f, Applied: ran})
	r.mu.Unlock()
	return applied, err
}

// Read runs a read; what do reads counts only if the error is nil.
func (r *Runtime) Read(ctx context.Context, name cassandra.Stmt, about any, op string, do func(now time.Time)) error {
	_, err := r.Exec(ctx, name, about, op, false, func(now time.Time) bool { do(now); return false })
	return err
}

// Write runs an unconditional write.
func (r *Runtime) Write(ctx context.Context, name cassandra.Stmt, about any, op string, do func(now time.Time)) error {
	_, err := r.Exec(ctx, name, about, op, true, func(now time.Time) bool { do(now); return true })
	return err
}

// Locked runs do under the lock, with the table's time, running no
// statement: a test's way to seed or inspect rows.
func (r *Runtime) Locked(do func(now time.Time)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	do(r.nowLocked())
}

// Now is the table's time: the clock plus everything Advance added.
func (r *Runtime) Now() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nowLocked()
}

func (r *Runtime) nowLocked() time.Time { return r.now().Add(r.offset).UTC() }

// Advance moves the table's time on by d (rows whose time is up vanish).
func (r *Runtime) Advance(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.offset += d
}

// SetIntercept makes fn pick, for every statement no armed fault claims,
// the fault it gets (0 for none), knowing what the statement concerns: a
// test can fail the reads of one row alone. fn runs without the lock and
// may run statements. nil removes it.
func (r *Runtime) SetIntercept(fn func(name cassandra.Stmt, about any) cassandra.Fault) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.intercept = fn
}

// Log lists the statements run (or failed) so far, in order; only those
// named name unless name is "".
func (r *Runtime) Log(name cassandra.Stmt) []Logged {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Logged
	for _, l := range r.log {
		if name == "" || l.Name == name {
			out = append(out, l)
		}
	}
	return out
}

// Expiring is a row (or cell) written with a TTL.
type Expiring[V any] struct {
	V       V
	Expires time.Time
}

// never is the expiry of what was written without a TTL.
var never = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// Expire is v written at now with ttl seconds to live (0: for ever).
func Expire[V any](v V, now time.Time, ttl int) Expiring[V] {
	if ttl == 0 {
		return Expiring[V]{V: v, Expires: never}
	}
	return Expiring[V]{V: v, Expires: ExpiresAt(now, ttl)}
}

// ExpiresAt is when what is written at now with ttl seconds to live
// expires, as Cassandra counts it: in whole seconds from the second the
// write lands in (its local deletion time is the write's second plus the
// TTL), so it lives between ttl-1 and ttl seconds.
func ExpiresAt(now time.Time, ttl int) time.Time {
	return now.Truncate(time.Second).Add(time.Duration(ttl) * time.Second)
}

// LiveAt reports whether e's time is not up at now.
func (e Expiring[V]) LiveAt(now time.Time) bool { return now.Before(e.Expires) }

// Live drops the rows of m whose TTL ran out at now, as Cassandra would,
// and returns m.
func Live[K comparable, V any](m map[K]Expiring[V], now time.Time) map[K]Expiring[V] {
	maps.DeleteFunc(m, func(_ K, e Expiring[V]) bool { return !e.LiveAt(now) })
	return m
}

// MS is t as a Cassandra timestamp reads back: UTC, to the millisecond
// (the zero time stays zero: a null).
func MS(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Truncate(time.Millisecond)
}
