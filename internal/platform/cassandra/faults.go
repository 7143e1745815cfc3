package cassandra

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// Fault is what a FaultSession does to one execution of a named statement.
type Fault int

const (
	// FaultUnavailable: the statement is not sent; the coordinator's
	// Unavailable comes back (definitely not applied).
	FaultUnavailable Fault = iota + 1
	// FaultTimeout: the statement is not sent, but the caller sees a write
	// timeout, as if it might have applied (it did not).
	FaultTimeout
	// FaultLoseResponse: the statement runs and applies; its response is
	// replaced by a write timeout (it did apply).
	FaultLoseResponse
	// FaultPass: the statement runs as if nothing were armed. It lets a test
	// fault a later execution of a statement that also runs earlier (the
	// settling read after an unknown outcome, not the read before it).
	FaultPass
)

var faultNames = map[string]Fault{
	"unavailable":   FaultUnavailable,
	"timeout":       FaultTimeout,
	"lose-response": FaultLoseResponse,
	"pass":          FaultPass,
}

func (f Fault) String() string {
	for n, v := range faultNames {
		if v == f {
			return n
		}
	}
	return "fault(" + strconv.Itoa(int(f)) + ")"
}

// Faults is a set of faults armed by statement name, served one per
// execution in the order armed. A FaultSession serves them to real
// statements; the stores' in-memory fakes (ledgertest, projectiontest,
// versionstest, leasestest) serve them the same way (Served), so one test
// arms either alike.
// Safe for concurrent use.
type Faults struct {
	mu     sync.Mutex
	armed  map[Stmt][]Fault  // statement name -> faults, one per execution, in order
	hits   map[Stmt]int      // statement name -> faults served
	before map[Stmt][]func() // statement name -> what runs before its next executions
}

// NewFaults returns a set with nothing armed.
func NewFaults() *Faults {
	return &Faults{armed: map[Stmt][]Fault{}, hits: map[Stmt]int{}, before: map[Stmt][]func(){}}
}

// Arm makes the next times executions of statement name fail with f
// (after any faults already armed for it).
func (s *Faults) Arm(name Stmt, f Fault, times int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range times {
		s.armed[name] = append(s.armed[name], f)
	}
}

// Hits is how many faults statement name has been served.
func (s *Faults) Hits(name Stmt) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[name]
}

// Pending is how many armed faults of statement name are still unserved.
func (s *Faults) Pending(name Stmt) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.armed[name])
}

// ArmSpec arms faults from a specification such as
// "ledger.claim=lose-response;ledger.attempt=timeout*3" (ORDERD_CQL_FAULTS):
// statement=fault, optionally *N executions (default 1). A statement not
// among known is refused: a misspelt name would otherwise arm a fault that
// nothing ever serves, and the test relying on it would prove nothing.
func (s *Faults) ArmSpec(spec string, known []Stmt) error {
	for part := range strings.SplitSeq(spec, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, action, ok := strings.Cut(part, "=")
		if !ok || name == "" {
			return fmt.Errorf("cql fault %q: want statement=fault[*N]", part)
		}
		action, count, hasCount := strings.Cut(action, "*")
		times := 1
		if hasCount {
			n, err := strconv.Atoi(count)
			if err != nil || n < 1 {
				return fmt.Errorf("cql fault %q: count must be a positive number", part)
			}
			times = n
		}
		f, ok := faultNames[action]
		if !ok {
			return fmt.Errorf("cql fault %q: unknown fault %q (unavailable, timeout, lose-response, pass)", part, action)
		}
		stmt := Stmt(strings.TrimSpace(name))
		if !slices.Contains(known, stmt) {
			return fmt.Errorf("cql fault %q: no statement is named %q", part, stmt)
		}
		s.Arm(stmt, f, times)
	}
	return nil
}

// Before makes do run once, just before the next execution of statement
// name (before any fault armed for it is served): a test's way to change
// what a store's write finds between the store's read and that write, as a
// racing client would. do may run statements of its own, name included:
// FaultSession and ledgertest.Memory run it holding no lock of theirs.
func (s *Faults) Before(name Stmt, do func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.before[name] = append(s.before[name], do)
}

// runBefore runs the next Before hook of name, if any, outside the lock.
func (s *Faults) runBefore(name Stmt) {
	s.mu.Lock()
	q := s.before[name]
	if len(q) > 0 {
		s.before[name] = q[1:]
	}
	s.mu.Unlock()
	if len(q) > 0 {
		q[0]()
	}
}

// Take runs the next Before hook of statement name, then consumes the next
// fault armed for it, if any. A FaultPass is consumed and counted, but
// reported as no fault.
func (s *Faults) Take(name Stmt) (Fault, bool) {
	s.runBefore(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.armed[name]
	if len(q) == 0 {
		return 0, false
	}
	if len(q) == 1 {
		delete(s.armed, name)
	} else {
		s.armed[name] = q[1:]
	}
	s.hits[name]++
	if q[0] == FaultPass {
		return 0, false
	}
	return q[0], true
}

// FaultSession wraps a Session and makes executions of named statements
// (see StatementName) fail deterministically: the next N executions of a
// statement get the armed Fault, then it behaves again. Statements without
// an armed fault pass through untouched. Safe for concurrent use.
type FaultSession struct {
	*Faults
	inner Session
}

var _ Session = (*FaultSession)(nil)

// NewFaultSession wraps inner with nothing armed.
func NewFaultSession(inner Session) *FaultSession {
	return &FaultSession{Faults: NewFaults(), inner: inner}
}

// take consumes the next fault armed for stmt, if any.
func (s *FaultSession) take(stmt string) (Fault, bool) {
	name := StatementName(stmt)
	if name == "" {
		return 0, false
	}
	return s.Take(name)
}

// AwaitSchemaAgreement passes through to the wrapped session, if it can.
func (s *FaultSession) AwaitSchemaAgreement(ctx context.Context) error {
	if a, ok := s.inner.(interface{ AwaitSchemaAgreement(context.Context) error }); ok {
		return a.AwaitSchemaAgreement(ctx)
	}
	return nil
}

// Serial implements Session: the wrapped session's.
func (s *FaultSession) Serial() gocql.Consistency { return s.inner.Serial() }

// Query implements Session.
func (s *FaultSession) Query(stmt string, values ...any) Query {
	return &faultQuery{s: s, stmt: stmt, q: s.inner.Query(stmt, values...)}
}

// ExecBatch implements Session: an armed fault of stmt's name applies to
// the whole batch, as the driver fails or applies a batch as one request.
func (s *FaultSession) ExecBatch(ctx context.Context, stmt string, rows [][]any) error {
	f := &faultQuery{s: s, stmt: stmt}
	return f.run(func() error { return s.inner.ExecBatch(ctx, stmt, rows) })
}

type faultQuery struct {
	s    *FaultSession
	stmt string
	q    Query
}

func (f *faultQuery) with(q Query) Query { f.q = q; return f }

func (f *faultQuery) Consistency(c gocql.Consistency) Query { return f.with(f.q.Consistency(c)) }
func (f *faultQuery) SerialConsistency(c gocql.Consistency) Query {
	return f.with(f.q.SerialConsistency(c))
}
func (f *faultQuery) WithTimestamp(ts int64) Query { return f.with(f.q.WithTimestamp(ts)) }
func (f *faultQuery) ServerTimestamp() Query       { return f.with(f.q.ServerTimestamp()) }
func (f *faultQuery) Idempotent(v bool) Query      { return f.with(f.q.Idempotent(v)) }
func (f *faultQuery) PageSize(n int) Query         { return f.with(f.q.PageSize(n)) }
func (f *faultQuery) PageState(st []byte) Query    { return f.with(f.q.PageState(st)) }

// run executes the statement through do unless a fault says otherwise.
func (f *faultQuery) run(do func() error) error {
	fault, ok := f.s.take(f.stmt)
	if !ok {
		return do()
	}
	if fault == FaultLoseResponse {
		_ = do() // applied (or failed on its own); either way the caller learns nothing
	}
	return injected(StatementName(f.stmt), writeType(f.stmt), fault)
}

// injected is the driver's error for fault f on statement name: the
// coordinator's Unavailable for a refusal, a write timeout otherwise.
func injected(name Stmt, writeType string, f Fault) error {
	if f == FaultUnavailable {
		return fmt.Errorf("injected fault on %s: %w", name,
			&gocql.RequestErrUnavailable{Consistency: gocql.LocalQuorum, Required: 2, Alive: 1})
	}
	return fmt.Errorf("injected fault on %s: %w", name,
		&gocql.RequestErrWriteTimeout{Consistency: gocql.LocalQuorum, Received: 1, BlockFor: 2, WriteType: writeType})
}

// Served runs one statement of an in-memory table (a store's fake) as a
// FaultSession over a real session serves it, so that one armed fault
// means the same to a fake and to the real store: f (0: none) is served
// instead of a plain execution, and the error is what the store's own
// conversion makes of the driver's error (ReadError for a read, WriteError
// for a write, under op). do runs the statement and reports whether it
// applied; it runs only without a fault or with FaultLoseResponse, and
// never on an ended context (the driver sends nothing then). applied is
// false whenever the error is not nil.
func Served(ctx context.Context, name Stmt, op string, write bool, f Fault, do func() bool) (applied bool, err error) {
	switch {
	case ctx.Err() != nil:
		err = ctx.Err()
	case f == 0 || f == FaultPass:
		return do(), nil
	case f == FaultLoseResponse:
		do()
		err = injected(name, "CAS", f)
	default:
		err = injected(name, "CAS", f)
	}
	if write {
		return false, WriteError(op, err)
	}
	return false, ReadError(op, err)
}

func writeType(stmt string) string {
	if strings.Contains(strings.ToUpper(stmt), " IF ") {
		return "CAS"
	}
	return "SIMPLE"
}

func (f *faultQuery) ExecContext(ctx context.Context) error {
	return f.run(func() error { return f.q.ExecContext(ctx) })
}

func (f *faultQuery) ScanContext(ctx context.Context, dest ...any) error {
	return f.run(func() error { return f.q.ScanContext(ctx, dest...) })
}

func (f *faultQuery) MapScanContext(ctx context.Context, m map[string]any) error {
	return f.run(func() error { return f.q.MapScanContext(ctx, m) })
}

func (f *faultQuery) MapScanCASContext(ctx context.Context, m map[string]any) (bool, error) {
	var applied bool
	err := f.run(func() error {
		var err error
		applied, err = f.q.MapScanCASContext(ctx, m)
		return err
	})
	if err != nil {
		return false, err
	}
	return applied, nil
}

func (f *faultQuery) IterContext(ctx context.Context) Iter {
	var it Iter
	err := f.run(func() error { it = f.q.IterContext(ctx); return nil })
	if err != nil {
		return errIter{err}
	}
	return it
}

type errIter struct{ err error }

func (e errIter) Scan(...any) bool            { return false }
func (e errIter) MapScan(map[string]any) bool { return false }
func (e errIter) PageState() []byte           { return nil }
func (e errIter) Close() error                { return e.err }
