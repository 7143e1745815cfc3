// Package cassandratest holds Recorder, a cassandra.Session that runs
// nothing and records, for every statement executed through it, the
// consistency levels it was given. Store tests use it to hold each
// statement to the levels it must run at (the serial consistency above
// all, which the session owns: cassandra.Config.Serial); what a statement
// does to rows is the contract suites' business, on the fakes and the real
// cluster.
package cassandratest

import (
	"context"
	"sync"
	"testing"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/atlasmart/orderd/internal/platform/cassandra"
)

// Run is one execution of a statement.
type Run struct {
	// Name is the statement's name (cassandra.StatementName), or its text
	// if it has none.
	Name cassandra.Stmt
	// Consistency and Serial are the levels the statement was given;
	// gocql.Any (0) when it was given none (the session's defaults apply).
	Consistency, Serial gocql.Consistency
	// ConsistencyGiven: Consistency was set (it may be gocql.Any, which a
	// conditional write's commit may run at).
	ConsistencyGiven bool
	// CAS: the statement ran as a conditional write (MapScanCASContext).
	CAS bool
	// ServerTimestamp: the write was dated by the coordinator's clock.
	ServerTimestamp bool
	// Values are the values bound to the statement, in order.
	Values []any
}

// Recorder is a Session whose serial consistency is the one it was made
// with. Every conditional write applies; every read finds no row
// (gocql.ErrNotFound, or an empty iterator); every other write succeeds.
// Safe for concurrent use.
type Recorder struct {
	serial gocql.Consistency

	mu   sync.Mutex
	runs []Run
}

var _ cassandra.Session = (*Recorder)(nil)

// NewRecorder returns a Recorder whose Paxos rounds run at serial.
func NewRecorder(serial gocql.Consistency) *Recorder { return &Recorder{serial: serial} }

// Serial implements cassandra.Session.
func (r *Recorder) Serial() gocql.Consistency { return r.serial }

// Query implements cassandra.Session.
func (r *Recorder) Query(stmt string, values ...any) cassandra.Query {
	name := cassandra.StatementName(stmt)
	if name == "" {
		name = cassandra.Stmt(stmt)
	}
	return &query{r: r, run: Run{Name: name, Values: values}}
}

// ExecBatch implements cassandra.Session: one run per row.
func (r *Recorder) ExecBatch(_ context.Context, stmt string, rows [][]any) error {
	for _, row := range rows {
		r.Query(stmt, row...).(*query).record()
	}
	return nil
}

// Runs is every execution so far, in order.
func (r *Recorder) Runs() []Run {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Run(nil), r.runs...)
}

type query struct {
	r   *Recorder
	run Run
}

func (q *query) record() {
	q.r.mu.Lock()
	defer q.r.mu.Unlock()
	q.r.runs = append(q.r.runs, q.run)
}

func (q *query) Consistency(c gocql.Consistency) cassandra.Query {
	q.run.Consistency, q.run.ConsistencyGiven = c, true
	return q
}
func (q *query) SerialConsistency(c gocql.Consistency) cassandra.Query { q.run.Serial = c; return q }
func (q *query) WithTimestamp(int64) cassandra.Query                   { return q }
func (q *query) ServerTimestamp() cassandra.Query                      { q.run.ServerTimestamp = true; return q }
func (q *query) Idempotent(bool) cassandra.Query                       { return q }
func (q *query) PageSize(int) cassandra.Query                          { return q }
func (q *query) PageState([]byte) cassandra.Query                      { return q }

func (q *query) ExecContext(context.Context) error { q.record(); return nil }
func (q *query) ScanContext(context.Context, ...any) error {
	q.record()
	return gocql.ErrNotFound
}
func (q *query) MapScanContext(context.Context, map[string]any) error {
	q.record()
	return gocql.ErrNotFound
}
func (q *query) MapScanCASContext(context.Context, map[string]any) (bool, error) {
	q.run.CAS = true
	q.record()
	return true, nil
}
func (q *query) IterContext(context.Context) cassandra.Iter { q.record(); return emptyIter{} }

type emptyIter struct{}

func (emptyIter) Scan(...any) bool            { return false }
func (emptyIter) MapScan(map[string]any) bool { return false }
func (emptyIter) PageState() []byte           { return nil }
func (emptyIter) Close() error                { return nil }

// CheckSerial reports (t.Errorf) every LWT among runs whose Paxos round was
// not given serial, and every run of the settling read named settle that was
// not read at serial; it returns how many of each it saw, for the caller to
// hold to what its scenario runs.
func CheckSerial(t testing.TB, runs []Run, serial gocql.Consistency, settle cassandra.Stmt) (lwts, reads int) {
	t.Helper()
	for _, run := range runs {
		switch {
		case run.CAS:
			lwts++
			if run.Serial != serial {
				t.Errorf("%s (an LWT) ran with serial consistency %v, want %v", run.Name, run.Serial, serial)
			}
		case run.Name == settle:
			reads++
			if run.Consistency != serial {
				t.Errorf("%s (a settling read) ran at %v, want %v", run.Name, run.Consistency, serial)
			}
		}
	}
	return lwts, reads
}
