package cassandra

import (
	"context"
	"testing"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/atlasmart/orderd/internal/domain/fault"
)

// countingSession counts the executions that reach it.
type countingSession struct{ ran map[Stmt]int }

func (c *countingSession) Query(stmt string, _ ...any) Query { return &countingQuery{c, stmt} }
func (c *countingSession) Serial() gocql.Consistency         { return gocql.LocalSerial }

func (c *countingSession) ExecBatch(_ context.Context, stmt string, rows [][]any) error {
	c.ran[StatementName(stmt)] += len(rows)
	return nil
}

type countingQuery struct {
	c    *countingSession
	stmt string
}

func (q *countingQuery) Consistency(gocql.Consistency) Query       { return q }
func (q *countingQuery) SerialConsistency(gocql.Consistency) Query { return q }
func (q *countingQuery) WithTimestamp(int64) Query                 { return q }
func (q *countingQuery) ServerTimestamp() Query                    { return q }
func (q *countingQuery) Idempotent(bool) Query                     { return q }
func (q *countingQuery) PageSize(int) Query                        { return q }
func (q *countingQuery) PageState([]byte) Query                    { return q }
func (q *countingQuery) ExecContext(context.Context) error {
	q.c.ran[StatementName(q.stmt)]++
	return nil
}
func (q *countingQuery) ScanContext(ctx context.Context, _ ...any) error { return q.ExecContext(ctx) }
func (q *countingQuery) MapScanContext(ctx context.Context, _ map[string]any) error {
	return q.ExecContext(ctx)
}
func (q *countingQuery) MapScanCASContext(ctx context.Context, _ map[string]any) (bool, error) {
	return true, q.ExecContext(ctx)
}
func (q *countingQuery) IterContext(context.Context) Iter { return errIter{} }

func TestStatementName(t *testing.T) {
	for stmt, want := range map[string]Stmt{
		"/* ledger.claim */ INSERT INTO x":  "ledger.claim",
		"\n\t/*queue.due*/SELECT":           "queue.due",
		"SELECT * FROM x":                   "",
		"/* unterminated SELECT":            "",
		"SELECT 1 /* not leading */ FROM x": "",
	} {
		if got := StatementName(stmt); got != want {
			t.Errorf("StatementName(%q) = %q, want %q", stmt, got, want)
		}
	}
}

// Each fault does what it says to the statement and to the caller, in the
// order armed, and then the statement behaves again.
func TestFaultSessionServesArmedFaultsInOrder(t *testing.T) {
	inner := &countingSession{ran: map[Stmt]int{}}
	fs := NewFaultSession(inner)
	if err := fs.ArmSpec("ledger.complete=unavailable;ledger.complete=timeout;ledger.complete=lose-response*2", testStatements); err != nil {
		t.Fatal(err)
	}
	const stmt = "/* ledger.complete */ UPDATE t SET a = 1 WHERE k = 1 IF a = 0"
	ctx := context.Background()
	steps := []struct {
		wantKind fault.Kind
		wantRan  int // executions that reached the cluster so far
	}{
		{fault.Unavailable, 0},    // not sent
		{fault.OutcomeUnknown, 0}, // timeout: not sent, looks unknown
		{fault.OutcomeUnknown, 1}, // lose-response: sent, looks unknown
		{fault.OutcomeUnknown, 2},
	}
	for i, st := range steps {
		_, err := fs.Query(stmt).MapScanCASContext(ctx, map[string]any{})
		if got := fault.KindOf(WriteError("op", err)); got != st.wantKind {
			t.Errorf("step %d: kind %v, want %v (err %v)", i, got, st.wantKind, err)
		}
		if inner.ran["ledger.complete"] != st.wantRan {
			t.Errorf("step %d: %d executions reached the cluster, want %d", i, inner.ran["ledger.complete"], st.wantRan)
		}
	}
	if applied, err := fs.Query(stmt).MapScanCASContext(ctx, map[string]any{}); err != nil || !applied {
		t.Errorf("after its faults the statement runs again: %v %v", applied, err)
	}
	if fs.Hits("ledger.complete") != 4 || fs.Pending("ledger.complete") != 0 {
		t.Errorf("hits %d pending %d, want 4 and 0", fs.Hits("ledger.complete"), fs.Pending("ledger.complete"))
	}
	// Other statements and unnamed ones are untouched.
	if err := fs.Query("/* ledger.get */ SELECT").ExecContext(ctx); err != nil {
		t.Errorf("unarmed statement failed: %v", err)
	}
}

// testStatements are the statement names these tests may arm.
var testStatements = []Stmt{"ledger.claim", "ledger.complete", "ledger.get"}

func TestArmSpecRejectsBadSpecifications(t *testing.T) {
	for _, spec := range []string{"ledger.claim", "=timeout", "ledger.claim=explode", "ledger.claim=timeout*0", "ledger.claim=timeout*x",
		"ledger.claimm=timeout", "ledger.complete=timeout;ledger.compete=unavailable"} {
		if err := NewFaultSession(&countingSession{}).ArmSpec(spec, testStatements); err == nil {
			t.Errorf("ArmSpec(%q) accepted", spec)
		}
	}
}

// A pass lets one execution through, so a later one can be faulted.
func TestFaultPassLetsOneExecutionThrough(t *testing.T) {
	inner := &countingSession{ran: map[Stmt]int{}}
	fs := NewFaultSession(inner)
	if err := fs.ArmSpec("ledger.get=pass;ledger.get=unavailable", testStatements); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := fs.Query("/* ledger.get */ SELECT").ExecContext(ctx); err != nil || inner.ran["ledger.get"] != 1 {
		t.Fatalf("first execution: %v, ran %d; want it through", err, inner.ran["ledger.get"])
	}
	if err := fs.Query("/* ledger.get */ SELECT").ExecContext(ctx); fault.KindOf(ReadError("get", err)) != fault.Unavailable {
		t.Fatalf("second execution: %v, want the armed unavailable", err)
	}
	if fs.Hits("ledger.get") != 2 || inner.ran["ledger.get"] != 1 {
		t.Errorf("hits %d, ran %d; want 2 and 1", fs.Hits("ledger.get"), inner.ran["ledger.get"])
	}
}

// A fault armed for a statement applies to a batch of it as a whole: the
// batch is one request.
func TestFaultSessionFailsABatchAsOneRequest(t *testing.T) {
	inner := &countingSession{ran: map[Stmt]int{}}
	fs := NewFaultSession(inner)
	fs.Arm("queue.remove", FaultUnavailable, 1)
	fs.Arm("queue.remove", FaultLoseResponse, 1)
	const stmt = "/* queue.remove */ UPDATE t SET done = true WHERE k = ?"
	rows := [][]any{{1}, {2}, {3}}
	ctx := context.Background()
	if err := fs.ExecBatch(ctx, stmt, rows); fault.KindOf(WriteError("op", err)) != fault.Unavailable || inner.ran["queue.remove"] != 0 {
		t.Errorf("unavailable: %v, %d rows reached the cluster; want Unavailable and none", err, inner.ran["queue.remove"])
	}
	if err := fs.ExecBatch(ctx, stmt, rows); fault.KindOf(WriteError("op", err)) != fault.OutcomeUnknown || inner.ran["queue.remove"] != 3 {
		t.Errorf("lose-response: %v, %d rows reached the cluster; want OutcomeUnknown and all 3", err, inner.ran["queue.remove"])
	}
	if err := fs.ExecBatch(ctx, stmt, rows); err != nil || inner.ran["queue.remove"] != 6 {
		t.Errorf("after its faults: %v, %d rows; want nil and 6", err, inner.ran["queue.remove"])
	}
}

// A Before hook runs once, just before the statement's next execution and
// before a fault armed for it is served: a statement the hook runs itself
// is that next execution, and gets the fault; the one that ran the hook
// goes through.
func TestBeforeRunsOnceJustBeforeTheNextExecution(t *testing.T) {
	inner := &countingSession{ran: map[Stmt]int{}}
	fs := NewFaultSession(inner)
	ctx := context.Background()
	const stmt = "/* ledger.requeue */ UPDATE t SET a = 1 WHERE k = 1 IF a = 0"
	fs.Arm("ledger.requeue", FaultUnavailable, 1)
	hooks, ranAtHook := 0, -1
	var nested error
	fs.Before("ledger.requeue", func() {
		hooks++
		ranAtHook = inner.ran["ledger.requeue"]
		_, nested = fs.Query(stmt).MapScanCASContext(ctx, map[string]any{})
	})
	if _, err := fs.Query(stmt).MapScanCASContext(ctx, map[string]any{}); err != nil {
		t.Fatalf("the execution that ran the hook: %v, want it through", err)
	}
	if fault.KindOf(WriteError("requeue", nested)) != fault.Unavailable {
		t.Errorf("the hook's own execution: %v, want the armed unavailable", nested)
	}
	if _, err := fs.Query(stmt).MapScanCASContext(ctx, map[string]any{}); err != nil {
		t.Fatal(err)
	}
	if hooks != 1 || ranAtHook != 0 || inner.ran["ledger.requeue"] != 2 {
		t.Errorf("hook ran %d times, with %d executions before it; %d executions in all; want 1, 0, 2", hooks, ranAtHook, inner.ran["ledger.requeue"])
	}
}
