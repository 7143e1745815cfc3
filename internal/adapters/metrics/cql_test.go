package metrics

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func TestStatementLabel(t *testing.T) {
	tests := []struct {
		cql   string
		label string
		lwt   bool
	}{
		{`INSERT INTO t (a, b) VALUES (?, ?)`, "insert_t", false},
		{`insert into T(a,b) values (?,?) if not exists`, "insert_t", true},
		{"UPDATE ks.t USING TTL ?\n\tSET a = ?\n\tWHERE k = ? IF a = 'x'", "update_t", true},
		{`UPDATE t SET a = 'IF' WHERE k = ?`, "update_t", false}, // IF inside a literal
		{`UPDATE t SET a = 'it''s IF ' WHERE k = ?`, "update_t", false},
		{`DELETE FROM t WHERE k = ? IF EXISTS`, "delete_t", true},
		{`DELETE a, b FROM t WHERE k = ?`, "delete_t", false},
		{`SELECT a, "from" FROM "MyTable" WHERE k = ?`, "select_mytable", false},
		{`SELECT * FROM system.local`, "select_system_local", false},
		{`SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = ?`, "select_system_schema_keyspaces", false},
		{`SELECT version FROM e2e_1700000000000.schema_migrations`, "select_schema_migrations", false},
		{`SELECT count(*) FROM t`, "select_t", false},
		{`TRUNCATE TABLE t`, "truncate_t", false},
		{`CREATE TABLE IF NOT EXISTS ks.t (k int PRIMARY KEY)`, "create_table", false},
		{`CREATE KEYSPACE IF NOT EXISTS e2e_1 WITH replication = {}`, "create_keyspace", false},
		{`CREATE CUSTOM INDEX ON t (a) USING 'sai'`, "create_index", false},
		{`CREATE OR REPLACE FUNCTION f() ...`, "create_function", false},
		{`ALTER TABLE t ADD c text`, "alter_table", false},
		{`DROP KEYSPACE IF EXISTS e2e_1`, "drop_keyspace", false},
		{`BEGIN BATCH INSERT INTO t (a) VALUES (?) APPLY BATCH`, "batch", false},
		{`USE orderd`, "use", false},
		{``, "other", false},
		{`   `, "other", false},
		{`SELECT`, "other", false},
		{`INSERT t VALUES (?)`, "other", false},
		{`SELECT a FROM t-1`, "other", false},
		{`GRANT ALL ON t TO r`, "other", false},
	}
	for _, tt := range tests {
		label, lwt := StatementLabel(tt.cql)
		if label != tt.label || lwt != tt.lwt {
			t.Errorf("StatementLabel(%q) = %q, %v; want %q, %v", tt.cql, label, lwt, tt.label, tt.lwt)
		}
	}
}

// TestStatementLabelOfEveryStatement labels every CQL statement constant of
// the stores, read from their source, so that a new statement is reviewed
// here: its label must be sensible and say whether it is an LWT.
func TestStatementLabelOfEveryStatement(t *testing.T) {
	type want struct {
		label string
		lwt   bool
	}
	wants := map[string]want{
		"ledger.claimCQL":      {"insert_write_requests_by_id", true},
		"ledger.selectCQL":     {"select_write_requests_by_id", false},
		"ledger.selectManyCQL": {"select_write_requests_by_id", false},
		"ledger.attemptCQL":    {"update_write_requests_by_id", true},
		"ledger.failCQL":       {"update_write_requests_by_id", true},
		"ledger.completeCQL":   {"update_write_requests_by_id", true},
		"ledger.requeueCQL":    {"update_write_requests_by_id", true},
		"ledger.withdrawCQL":   {"delete_write_requests_by_id", true},
		"ledger.clusterNowCQL": {"select_system_local", false},
		"ledger.enqueueCQL":    {"insert_due_requests", false},
		"ledger.dequeueCQL":    {"update_due_requests", false},
		"ledger.dueCQL":        {"select_due_requests", false},
		"ledger.dropBucketCQL": {"delete_due_requests", false},
		"ledger.scanCQL":       {"select_write_requests_by_id", false},

		"projection.upsertByCustomerCQL": {"insert_orders_by_customer_time", false},
		"projection.upsertByIDCQL":       {"insert_orders_by_id", false},
		"projection.upsertEventCQL":      {"insert_order_events_by_order", false},
		"projection.selectByIDCQL":       {"select_orders_by_id", false},
		"projection.selectByIDsCQL":      {"select_orders_by_id", false},
		"projection.selectByCustomerCQL": {"select_orders_by_customer_time", false},
		"projection.scanByIDCQL":         {"select_orders_by_id", false},
		"versions.bindCQL":               {"insert_change_requests", false},
		"versions.boundCQL":              {"select_change_requests", false},
		"projection.selectEventsCQL":     {"select_order_events_by_order", false},
		"projection.changeByCustomerCQL": {"update_orders_by_customer_time", false},
		"projection.changeByIDCQL":       {"update_orders_by_id", false},
		"projection.changeByIDNoteCQL":   {"update_orders_by_id", false},
		"projection.changeEventCQL":      {"insert_order_events_by_order", false},
		"projection.copyReadCQL":         {"select_orders_by_customer", false},
		"projection.copyCreatedAtCQL":    {"select_orders_by_id", false},
		"projection.copyRowCQL":          {"insert_orders_by_customer_time", false},
		"projection.copyCreationCQL":     {"insert_orders_by_customer_time", false},
		"projection.copyStateCQL":        {"update_orders_by_customer_time", false},
		"projection.copyVersionCQL":      {"update_orders_by_customer_time", false},

		"versions.applyFirstCQL": {"update_order_versions", true},
		"versions.applyNextCQL":  {"update_order_versions", true},
		"versions.stateCQL":      {"select_order_versions", false},
		"versions.historyCQL":    {"select_order_versions", false},
		"versions.refuseCQL":     {"update_order_versions", true},
		"versions.lookupCQL":     {"select_order_versions", false},

		"leases.heartbeatCQL":  {"insert_reconciler_members", false},
		"leases.membersCQL":    {"select_reconciler_members", false},
		"leases.memberOpsCQL":  {"select_reconciler_members", false},
		"leases.leaveCQL":      {"delete_reconciler_members", false},
		"leases.ownersCQL":     {"select_reconciler_leases", false},
		"leases.leaseCQL":      {"select_reconciler_leases", false},
		"leases.acquireCQL":    {"insert_reconciler_leases", true},
		"leases.renewCQL":      {"update_reconciler_leases", true},
		"leases.releaseCQL":    {"delete_reconciler_leases", true},
		"leases.cursorCQL":     {"select_reconciler_cursors", false},
		"leases.saveCursorCQL": {"insert_reconciler_cursors", false},

		"cql.createKeyspace":   {"create_keyspace", false},
		"cql.createMigrations": {"create_table", false},
		"cql.createLock":       {"create_table", false},
		"cql.selectKeyspace":   {"select_system_schema_keyspaces", false},
		"cql.selectTable":      {"select_system_schema_tables", false},
		"cql.selectApplied":    {"select_schema_migrations", false},
		"cql.insertApplied":    {"insert_schema_migrations", true},
		"cql.takeLock":         {"insert_schema_lock", true},
		"cql.lockOwner":        {"select_schema_lock", false},
		"cql.renewLock":        {"update_schema_lock", true},
		"cql.releaseLock":      {"delete_schema_lock", true},
	}
	sources := []string{"../../../ledger/*.go", "../../../projection/*.go", "../../stores/versions/*.go", "../../stores/leases/*.go", "../../../cql/migrate.go"}
	found := map[string]string{}
	for _, pattern := range sources {
		files, err := filepath.Glob(pattern)
		if err != nil || len(files) == 0 {
			t.Fatalf("no sources match %s (%v)", pattern, err)
		}
		files = slices.DeleteFunc(files, func(f string) bool { return strings.HasSuffix(f, "_test.go") })
		for name, cql := range statementConsts(t, files) {
			found[name] = cql
		}
	}
	for name, cql := range found {
		w, ok := wants[name]
		if !ok {
			label, lwt := StatementLabel(cql)
			t.Errorf("statement %s is not in this test: add it (it is labelled %q, lwt %v)", name, label, lwt)
			continue
		}
		// The migrator formats its keyspace in.
		label, lwt := StatementLabel(strings.NewReplacer("%s", "orderd", "%d", "3").Replace(cql))
		if label != w.label || lwt != w.lwt {
			t.Errorf("%s: label %q, lwt %v; want %q, %v\n%s", name, label, lwt, w.label, w.lwt, cql)
		}
	}
	for name := range wants {
		if _, ok := found[name]; !ok {
			t.Errorf("statement %s not found in the sources any more: remove it here", name)
		}
	}
}

// statementConsts returns the string constants of one package's files
// (paths) that hold a CQL statement, by "package.name", evaluating
// concatenations of literals and other constants of the package.
func statementConsts(t *testing.T, paths []string) map[string]string {
	t.Helper()
	exprs := map[string]ast.Expr{}
	pkg := ""
	for _, path := range paths {
		file, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		pkg = file.Name.Name
		addConsts(exprs, file)
	}
	var eval func(e ast.Expr) (string, bool)
	eval = func(e ast.Expr) (string, bool) {
		switch e := e.(type) {
		case *ast.BasicLit:
			if e.Kind != token.STRING {
				return "", false
			}
			s, err := strconv.Unquote(e.Value)
			return s, err == nil
		case *ast.BinaryExpr:
			l, ok1 := eval(e.X)
			r, ok2 := eval(e.Y)
			return l + r, ok1 && ok2 && e.Op == token.ADD
		case *ast.Ident:
			if x, ok := exprs[e.Name]; ok {
				return eval(x)
			}
		case *ast.ParenExpr:
			return eval(e.X)
		case *ast.CallExpr: // string(StmtClaim): a typed name converted
			if fn, ok := e.Fun.(*ast.Ident); ok && fn.Name == "string" && len(e.Args) == 1 {
				return eval(e.Args[0])
			}
		}
		return "", false
	}
	verbs := []string{"SELECT", "INSERT", "UPDATE", "DELETE", "CREATE", "ALTER", "DROP", "TRUNCATE", "BEGIN"}
	out := map[string]string{}
	for name, e := range exprs {
		s, ok := eval(e)
		if !ok {
			continue
		}
		// A statement may start with its name comment: the verb follows.
		if toks := tokens(s, 1); len(toks) == 1 && slices.Contains(verbs, strings.ToUpper(toks[0])) {
			out[pkg+"."+name] = s
		}
	}
	return out
}

// addConsts adds the constants file declares to exprs, by name.
func addConsts(exprs map[string]ast.Expr, file *ast.File) {
	for _, decl := range file.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if i < len(vs.Values) {
					exprs[n.Name] = vs.Values[i]
				}
			}
		}
	}
}

func TestCQLObserverTimesStatements(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	obs := NewCQLObserver(m, nil)
	start := time.Now()
	obs.ObserveQuery(context.Background(), gocql.ObservedQuery{
		Statement: `INSERT INTO write_requests_by_id (a) VALUES (?) IF NOT EXISTS`, Start: start, End: start.Add(3 * time.Millisecond)})
	obs.ObserveQuery(context.Background(), gocql.ObservedQuery{
		Statement: `SELECT a FROM pending_requests WHERE shard = ?`, Start: start, End: start.Add(time.Millisecond), Err: errors.New("timeout")})

	if n := testutil.CollectAndCount(m.cqlDuration); n != 2 {
		t.Errorf("%d cql series, want 2", n)
	}
	for _, c := range []struct{ statement, lwt, outcome string }{
		{"insert_write_requests_by_id", "true", "ok"},
		{"select_pending_requests", "false", "error"},
	} {
		h, err := m.cqlDuration.GetMetricWithLabelValues(c.statement, c.lwt, c.outcome)
		if err != nil {
			t.Fatal(err)
		}
		if got := histogramCount(t, h.(prometheus.Histogram)); got != 1 {
			t.Errorf("%v: %d observations, want 1", c, got)
		}
	}
}

// A batch counts once, under the statement it repeats.
func TestCQLObserverTimesBatchesAsTheirStatement(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	obs, ok := NewCQLObserver(m, nil).(gocql.BatchObserver)
	if !ok {
		t.Fatal("the CQL observer does not observe batches: released entries would not be counted")
	}
	start := time.Now()
	const stmt = `UPDATE due_requests USING TTL ? SET done = true WHERE shard = ?`
	obs.ObserveBatch(context.Background(), gocql.ObservedBatch{Statements: []string{stmt, stmt, stmt},
		Start: start, End: start.Add(2 * time.Millisecond)})
	h, err := m.cqlDuration.GetMetricWithLabelValues("update_due_requests", "false", "ok")
	if err != nil {
		t.Fatal(err)
	}
	if got := histogramCount(t, h.(prometheus.Histogram)); got != 1 {
		t.Errorf("%d observations of the batch, want 1", got)
	}
}

func TestCQLObserverMakesChildSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	tracer := tp.Tracer("test")
	obs := NewCQLObserver(nil, tracer)

	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	q := gocql.ObservedQuery{Statement: `/* ledger.complete */ UPDATE write_requests_by_id SET a = ? WHERE k = ? IF state = 'PENDING'`,
		Start: start, End: start.Add(2 * time.Millisecond), Err: errors.New("write timeout")}
	obs.ObserveQuery(context.Background(), q) // no parent: no span

	ctx, parent := tracer.Start(context.Background(), "CreateOrder")
	obs.ObserveQuery(ctx, q)
	parent.End()

	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want the parent and one CQL span", len(spans))
	}
	s := spans[0]
	if s.Name() != "cql update_write_requests_by_id" || s.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("span %q with parent %s; want cql update_write_requests_by_id under %s", s.Name(), s.Parent().SpanID(), parent.SpanContext().SpanID())
	}
	if !s.StartTime().Equal(q.Start) || !s.EndTime().Equal(q.End) {
		t.Errorf("span times %s..%s, want the query's %s..%s", s.StartTime(), s.EndTime(), q.Start, q.End)
	}
	attrs := map[string]string{}
	for _, a := range s.Attributes() {
		attrs[string(a.Key)] = a.Value.Emit()
	}
	for k, v := range map[string]string{"orderd.cql.statement": "update_write_requests_by_id",
		"orderd.cql.name": "ledger.complete", "orderd.cql.lwt": "true", "error": "true"} {
		if attrs[k] != v {
			t.Errorf("attribute %s = %q, want %q (all: %v)", k, attrs[k], v, attrs)
		}
	}
	if s.Status().Code.String() != "Error" {
		t.Errorf("status %v, want Error", s.Status())
	}
}

func TestNilCQLObserver(t *testing.T) {
	if obs := NewCQLObserver(nil, nil); obs != nil {
		t.Errorf("NewCQLObserver(nil, nil) = %v, want nil", obs)
	}
}

func histogramCount(t *testing.T, h prometheus.Histogram) uint64 {
	t.Helper()
	var pb dto.Metric
	if err := h.Write(&pb); err != nil {
		t.Fatal(err)
	}
	return pb.GetHistogram().GetSampleCount()
}

func ExampleStatementLabel() {
	fmt.Println(StatementLabel(`UPDATE write_requests_by_id USING TTL ? SET state = 'COMPLETE' WHERE request_id = ? IF state = 'PENDING'`))
	// Output: update_write_requests_by_id true
}
