package cassandra

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// Session is the seam every store runs its statements through: the driver's
// session in production (Wrap), a FaultSession in tests that make named
// statements fail, time out or lose their response.
//
// It is the part of *gocql.Session the stores use, nothing more, so that a
// wrapper can see (and tamper with) every execution.
type Session interface {
	Query(stmt string, values ...any) Query
	// ExecBatch runs stmt once for each set of values in rows, as one
	// unlogged batch: one request instead of len(rows), and one mutation
	// per replica when every row is in one partition (callers keep it so:
	// a batch across partitions only moves work to the coordinator). Only
	// for idempotent plain writes.
	ExecBatch(ctx context.Context, stmt string, rows [][]any) error
	// Serial is the serial consistency of this session's Paxos rounds
	// (Config.Serial: LOCAL_SERIAL or SERIAL). A store sets it on each
	// conditional statement (Query.SerialConsistency) and on each read
	// that must see the outcome of one (Query.Consistency), so that
	// settling reads and the LWTs they settle always run at one level.
	Serial() gocql.Consistency
}

// Query is one statement with its values, as the driver's *gocql.Query.
type Query interface {
	Consistency(gocql.Consistency) Query
	SerialConsistency(gocql.Consistency) Query
	WithTimestamp(int64) Query
	// ServerTimestamp has the coordinator date the write by its own clock
	// instead of this process's (the driver's default): for a delete whose
	// tombstone must never be dated ahead of the cluster by a clock that
	// leads.
	ServerTimestamp() Query
	Idempotent(bool) Query
	PageSize(int) Query
	PageState([]byte) Query

	ExecContext(ctx context.Context) error
	ScanContext(ctx context.Context, dest ...any) error
	MapScanContext(ctx context.Context, m map[string]any) error
	// MapScanCASContext runs a conditional statement: applied, and the
	// current row in m when it did not apply.
	MapScanCASContext(ctx context.Context, m map[string]any) (bool, error)
	IterContext(ctx context.Context) Iter
}

// Iter reads the rows of a query, as the driver's *gocql.Iter.
type Iter interface {
	Scan(dest ...any) bool
	// MapScan reads the next row into m, keyed by column name.
	MapScan(m map[string]any) bool
	PageState() []byte
	Close() error
}

// Wrap adapts a driver session to Session. Its Serial is the serial
// consistency the driver session was configured with (NewSession:
// Config.Serial), which is also what a conditional statement runs at if
// nothing sets one; SERIAL, the server's default, if none was configured.
func Wrap(s *gocql.Session) DriverSession {
	serial, ok := s.Query("").GetSerialConsistency()
	if !ok {
		serial = gocql.Serial
	}
	return DriverSession{s: s, serial: serial}
}

// DriverSession is the driver's session behind the Session seam.
type DriverSession struct {
	s      *gocql.Session
	serial gocql.Consistency
}

// Serial implements Session.
func (d DriverSession) Serial() gocql.Consistency { return d.serial }

// AwaitSchemaAgreement waits until every node reports the same schema (the migrator needs it).
func (d DriverSession) AwaitSchemaAgreement(ctx context.Context) error {
	return d.s.AwaitSchemaAgreement(ctx)
}

func (d DriverSession) Query(stmt string, values ...any) Query {
	return driverQuery{d.s.Query(driverText(stmt), values...)}
}

// driverText is stmt as the driver must see it: the driver prepares a
// statement, and binds its values, only if the statement's first word is
// its verb (SELECT, INSERT, ...); anything else it sends unprepared and
// without its values, which the server refuses ("Invalid amount of bind
// variables"). So a leading name comment moves to the end.
//
// Statements are a fixed set (constants, and grouped reads of a few
// sizes), so each one's text is built once: building it per execution was
// among the larger allocations of a new order (pprof, alloc_space).
func driverText(stmt string) string {
	if text, ok := driverTexts.Load(stmt); ok {
		return text.(string)
	}
	text := movedNameComment(stmt)
	if text != stmt && driverTextsKept.Add(1) <= maxDriverTexts {
		driverTexts.Store(stmt, text)
	}
	return text
}

// driverTexts caches driverText, up to maxDriverTexts statements (a bound
// against a caller that builds statements from data).
var (
	driverTexts     sync.Map // statement -> driver text
	driverTextsKept atomic.Int64
)

const maxDriverTexts = 4096

// movedNameComment is stmt with a leading /* name */ comment moved to its end.
func movedNameComment(stmt string) string {
	s := strings.TrimSpace(stmt)
	if !strings.HasPrefix(s, "/*") {
		return stmt
	}
	comment, rest, ok := strings.Cut(s[2:], "*/")
	if !ok {
		return stmt
	}
	return strings.TrimSpace(rest) + " /*" + comment + "*/"
}

// ExecBatch implements Session.
func (d DriverSession) ExecBatch(ctx context.Context, stmt string, rows [][]any) error {
	b := d.s.Batch(gocql.UnloggedBatch)
	text := driverText(stmt)
	for _, values := range rows {
		b.Entries = append(b.Entries, gocql.BatchEntry{Stmt: text, Args: values, Idempotent: true})
	}
	return b.ExecContext(ctx)
}

type driverQuery struct{ q *gocql.Query }

func (d driverQuery) Consistency(c gocql.Consistency) Query { return driverQuery{d.q.Consistency(c)} }
func (d driverQuery) SerialConsistency(c gocql.Consistency) Query {
	return driverQuery{d.q.SerialConsistency(c)}
}
func (d driverQuery) WithTimestamp(ts int64) Query { return driverQuery{d.q.WithTimestamp(ts)} }
func (d driverQuery) ServerTimestamp() Query       { return driverQuery{d.q.DefaultTimestamp(false)} }
func (d driverQuery) Idempotent(v bool) Query      { return driverQuery{d.q.Idempotent(v)} }
func (d driverQuery) PageSize(n int) Query         { return driverQuery{d.q.PageSize(n)} }
func (d driverQuery) PageState(s []byte) Query     { return driverQuery{d.q.PageState(s)} }

func (d driverQuery) ExecContext(ctx context.Context) error { return d.q.ExecContext(ctx) }
func (d driverQuery) ScanContext(ctx context.Context, dest ...any) error {
	return d.q.ScanContext(ctx, dest...)
}
func (d driverQuery) MapScanContext(ctx context.Context, m map[string]any) error {
	return d.q.MapScanContext(ctx, m)
}
func (d driverQuery) MapScanCASContext(ctx context.Context, m map[string]any) (bool, error) {
	return d.q.MapScanCASContext(ctx, m)
}
func (d driverQuery) IterContext(ctx context.Context) Iter { return d.q.IterContext(ctx) }

// StatementName is the name a statement gives itself in a leading comment,
// "/* ledger.claim */ INSERT ...", or "" if it has none. Names are how a
// FaultSession (and an operator reading traces) tells statements apart.
func StatementName(stmt string) Stmt {
	s := strings.TrimSpace(stmt)
	if !strings.HasPrefix(s, "/*") {
		return ""
	}
	name, _, ok := strings.Cut(s[2:], "*/")
	if !ok {
		return ""
	}
	return Stmt(strings.TrimSpace(name))
}

// Stmt is a statement's name: the store that runs a statement declares
// its name once, as a constant, and builds the statement's leading comment
// from it, so that faults (Faults.Arm, ORDERD_CQL_FAULTS), the in-memory
// tables and traces all call it by the same name.
type Stmt string
