package metrics

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the instrumentation scope of the CQL spans.
const TracerName = "github.com/atlasmart/orderd/internal/adapters/metrics"

// NewCQLObserver returns the driver hook for cassandra.Config.QueryObserver:
// it times every statement attempt in orderd_cql_duration_seconds (if m is
// not nil) and, if tracer is not nil, records it as a span, a child of the
// span in the query's context. Statements run outside any span (the
// reconciler's passes, health pings) get no span: they would each be a trace
// of their own. It returns nil when there is nothing to observe.
func NewCQLObserver(m *Metrics, tracer trace.Tracer) gocql.QueryObserver {
	if m == nil && tracer == nil {
		return nil
	}
	return &cqlObserver{m: m, tracer: tracer}
}

type cqlObserver struct {
	m      *Metrics
	tracer trace.Tracer

	// The statements a process runs are the constants of its stores (a few
	// dozen): their labels are derived once. The cache is bounded anyway so
	// that a stray dynamic text cannot grow it.
	cache  sync.Map // CQL text -> statement
	cached atomic.Int64
}

// ObserveBatch implements gocql.BatchObserver: a batch (every one orderd
// sends repeats one statement) counts as one execution of its statement.
func (o *cqlObserver) ObserveBatch(ctx context.Context, b gocql.ObservedBatch) {
	if len(b.Statements) == 0 {
		return
	}
	o.ObserveQuery(ctx, gocql.ObservedQuery{Keyspace: b.Keyspace, Statement: b.Statements[0], Start: b.Start, End: b.End,
		Host: b.Host, Err: b.Err, Attempt: b.Attempt})
}

// ObserveQuery implements gocql.QueryObserver.
func (o *cqlObserver) ObserveQuery(ctx context.Context, q gocql.ObservedQuery) {
	st := o.statementOf(q.Statement)
	if o.m != nil {
		outcome := "ok"
		if q.Err != nil {
			outcome = "error"
		}
		o.m.cqlDuration.WithLabelValues(st.label, st.lwt, outcome).Observe(q.End.Sub(q.Start).Seconds())
	}
	if o.tracer == nil || ctx == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	attrs := []attribute.KeyValue{
		attribute.String("db.system.name", "cassandra"),
		attribute.String("orderd.cql.statement", st.label),
		attribute.Bool("orderd.cql.lwt", st.lwt == "true"),
		attribute.Int("orderd.cql.attempt", q.Attempt),
		attribute.Bool("error", q.Err != nil),
	}
	if st.name != "" {
		attrs = append(attrs, attribute.String("orderd.cql.name", string(st.name)))
	}
	if q.Keyspace != "" {
		attrs = append(attrs, attribute.String("db.namespace", q.Keyspace))
	}
	if q.Host != nil {
		attrs = append(attrs, attribute.String("server.address", q.Host.ConnectAddress().String()))
	}
	_, span := o.tracer.Start(ctx, "cql "+st.label, trace.WithTimestamp(q.Start),
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	if q.Err != nil {
		// The driver's error names the failure (timeout, unavailable, ...),
		// never bound values.
		span.SetStatus(codes.Error, q.Err.Error())
	}
	span.End(trace.WithTimestamp(q.End))
}

// statement is what the labels say about one CQL text.
type statement struct {
	label string // <verb>_<table>, e.g. insert_write_requests_by_id
	// name is the name the statement gives itself (ledger.claim), the one
	// faults are armed by; "" if it has none.
	name cassandra.Stmt
	lwt  string // "true" or "false"
}

const maxCachedStatements = 512

func (o *cqlObserver) statementOf(cql string) statement {
	if v, ok := o.cache.Load(cql); ok {
		return v.(statement)
	}
	label, lwt := StatementLabel(cql)
	st := statement{label: label, lwt: "false", name: cassandra.StatementName(cql)}
	if lwt {
		st.lwt = "true"
	}
	if o.cached.Load() < maxCachedStatements {
		if _, loaded := o.cache.LoadOrStore(cql, st); !loaded {
			o.cached.Add(1)
		}
	}
	return st
}

// StatementLabel derives a low-cardinality label from a CQL text:
// <verb>_<table> for DML (insert_write_requests_by_id,
// select_due_requests, delete_reconciler_leases), <verb>_<kind> for DDL
// (create_table, create_keyspace, alter_table), "batch", "use", or "other".
// A keyspace qualifier is dropped (keyspace names vary, e.g. per test run)
// except for the system keyspaces (select_system_local). lwt reports a
// conditional DML statement: one with an IF clause (IF NOT EXISTS, IF
// EXISTS, IF cond) outside string literals.
func StatementLabel(cql string) (label string, lwt bool) {
	toks := tokens(cql, 512)
	if len(toks) == 0 {
		return "other", false
	}
	verb := strings.ToLower(toks[0])
	next := func(i int) string {
		if i < len(toks) {
			return toks[i]
		}
		return ""
	}
	indexOf := func(word string) int {
		for i, t := range toks {
			if strings.EqualFold(t, word) {
				return i
			}
		}
		return -1
	}
	var table string
	switch verb {
	case "insert":
		if strings.EqualFold(next(1), "into") {
			table = next(2)
		}
	case "update":
		table = next(1)
	case "delete", "select":
		if i := indexOf("from"); i > 0 {
			table = next(i + 1)
		}
	case "truncate":
		table = next(1)
		if strings.EqualFold(table, "table") {
			table = next(2)
		}
	case "create", "alter", "drop":
		kind := strings.ToLower(next(1))
		switch kind {
		case "or": // CREATE OR REPLACE FUNCTION / AGGREGATE
			kind = strings.ToLower(next(3))
		case "custom": // CREATE CUSTOM INDEX
			kind = strings.ToLower(next(2))
		case "materialized":
			kind = "materialized_view"
		}
		switch kind {
		case "keyspace", "table", "columnfamily", "type", "index", "materialized_view", "function", "aggregate", "role", "user", "trigger":
			return verb + "_" + kind, false
		}
		return "other", false
	case "begin":
		return "batch", false
	case "use":
		return "use", false
	default:
		return "other", false
	}
	name, ok := tableName(table)
	if !ok {
		return "other", false
	}
	if verb != "select" {
		lwt = indexOf("if") > 0
	}
	return verb + "_" + name, lwt
}

// tableName turns [keyspace.]table into the label's table part.
func tableName(s string) (string, bool) {
	s = strings.ToLower(strings.ReplaceAll(s, `"`, ""))
	ks, table, qualified := strings.Cut(s, ".")
	if !qualified {
		table, ks = ks, ""
	}
	if strings.HasPrefix(ks, "system") {
		table = ks + "_" + table
	}
	if table == "" || len(table) > 96 {
		return "", false
	}
	for _, r := range table {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_' {
			return "", false
		}
	}
	return table, true
}

// tokens splits a CQL text into at most limit words: runs of characters
// other than white space and ( ) , ; = < > ?, with string literals
// ('...') left out and quoted identifiers ("...") kept whole.
func tokens(cql string, limit int) []string {
	var out []string
	i := 0
	for i < len(cql) && len(out) < limit {
		c := cql[i]
		switch {
		case c == '\'':
			// A string literal; '' inside it is an escaped quote.
			i++
			for i < len(cql) {
				if cql[i] == '\'' {
					if i+1 < len(cql) && cql[i+1] == '\'' {
						i += 2
						continue
					}
					break
				}
				i++
			}
			i++
		case c == '/' && i+1 < len(cql) && cql[i+1] == '*':
			// A comment (statements name themselves in one): not a token.
			end := strings.Index(cql[i+2:], "*/")
			if end < 0 {
				return out
			}
			i += end + 4
		case isSeparator(c):
			i++
		default:
			start := i
			for i < len(cql) && !isSeparator(cql[i]) && cql[i] != '\'' {
				if cql[i] == '"' {
					if end := strings.IndexByte(cql[i+1:], '"'); end >= 0 {
						i += end + 2
						continue
					}
				}
				i++
			}
			out = append(out, cql[start:i])
		}
	}
	return out
}

func isSeparator(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', '(', ')', ',', ';', '=', '<', '>', '?':
		return true
	}
	return false
}
