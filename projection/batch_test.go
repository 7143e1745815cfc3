package projection

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
)

// The rows of orders whose writes meet go as one batch; what the rows hold
// is the contract suite's business (projectiontest, on the real cluster).
// These tests hold the store to how it groups them.

// TestRowsThatMeetShareABatch: while a table's writes fill every slot, the
// rows that arrive wait in one batch, and each keeps its own write time.
func TestRowsThatMeetShareABatch(t *testing.T) {
	s := newGatedSession()
	p := New(Config{Batch: 8}, s, nil)
	first, second := orders(inFlight), orders(7) // 7: a batch that is not full stays open, and Open counts it

	done := s.fillSlots(t, p, first)
	done2 := writeAll(p, second)
	for _, table := range []string{OrdersByCustomerTime, EventsByOrder} {
		waitFor(t, func() bool { return p.t.(*cqlTable).upserts.Open(table) == len(second) })
	}
	close(s.gate)
	for i, err := range append(done(), <-done2...) {
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}

	all := append(slices.Clone(first), second...)
	for _, table := range Tables {
		s.wantRows(t, table, all)
	}
	for _, table := range []string{OrdersByCustomerTime, EventsByOrder} {
		if got := s.batchSizes(table); !slices.Equal(got, []int{len(second)}) {
			t.Errorf("%s batches hold %v rows, want one of the %d rows that waited", table, got, len(second))
		}
	}
}

// TestBatchOfOneWritesEveryRowAlone: Config.Batch 1 turns grouping off.
func TestBatchOfOneWritesEveryRowAlone(t *testing.T) {
	s := newGatedSession()
	close(s.gate)
	p := New(Config{Batch: 1}, s, nil)
	all := orders(12)
	for i, err := range <-writeAll(p, all) {
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	for _, table := range Tables {
		s.wantRows(t, table, all)
		if got := s.batchSizes(table); len(got) != 0 {
			t.Errorf("%s: batches of %v rows with Batch 1, want none", table, got)
		}
	}
}

// TestAFailedBatchFailsEveryOrderInIt: each order whose listing row was in
// the failed batch is told its write may have failed (and goes no further:
// no orders_by_id row); the orders written alone are whole.
func TestAFailedBatchFailsEveryOrderInIt(t *testing.T) {
	s := newGatedSession()
	s.failBatches, s.batchErr = StmtOrdersByCustomerTime, errors.New("connection reset mid-batch")
	p := New(Config{Batch: 8}, s, nil)
	first, second := orders(inFlight), orders(6)

	done := s.fillSlots(t, p, first)
	done2 := writeAll(p, second)
	for _, table := range []string{OrdersByCustomerTime, EventsByOrder} {
		waitFor(t, func() bool { return p.t.(*cqlTable).upserts.Open(table) == len(second) })
	}
	close(s.gate)
	for i, err := range done() {
		if err != nil {
			t.Errorf("write %d, alone: %v", i, err)
		}
	}
	for i, err := range <-done2 {
		if k := fault.KindOf(err); k != fault.OutcomeUnknown {
			t.Errorf("write %d, in the failed batch: %v (kind %s), want kind %s", i, err, k, fault.OutcomeUnknown)
		}
	}
	s.wantRows(t, OrdersByID, first)
}

// TestReadsThatMeetShareAQueryPerTenant: while every read slot of a tenant
// is taken, its reads that arrive wait in one query; another tenant's read
// has slots of its own and goes at once. Each is answered (here: NotFound,
// since the session finds nothing).
func TestReadsThatMeetShareAQueryPerTenant(t *testing.T) {
	s := newGatedSession()
	p := New(Config{Batch: 8}, s, nil)
	results := make(chan error, 32)
	read := func(tenant string) uuid.UUID {
		id := uuid.New()
		go func() { _, err := p.Order(context.Background(), tenant, id); results <- err }()
		return id
	}
	for i := range inFlight {
		read("a")
		s.waitBlocked(t, i+1)
	}
	var wantA []string
	for range 5 {
		wantA = append(wantA, read("a").String())
	}
	waitFor(t, func() bool { return p.t.(*cqlTable).reads.Open("a") == len(wantA) })
	read("b")
	s.waitBlocked(t, inFlight+1)
	close(s.gate)
	for i := range inFlight + len(wantA) + 1 {
		if err := <-results; !errors.Is(err, ErrNotFound) {
			t.Errorf("read %d: %v, want ErrNotFound", i, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if got := s.reads["a"]; len(got) != 1 || !sameSet(got[0], wantA) {
		t.Errorf("tenant a: grouped reads asked for %v, want one query for %v", got, wantA)
	}
	if got := s.reads["b"]; len(got) != 0 {
		t.Errorf("tenant b: grouped reads %v, want its one read alone", got)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func orders(n int) []order.Order {
	at := time.Date(2026, 3, 14, 10, 30, 0, 0, time.UTC)
	out := make([]order.Order, n)
	for i := range out {
		out[i] = order.New("batch", uuid.New(), order.Command{CustomerID: fmt.Sprintf("cust-%d", i%3), Total: "1.00", Currency: "EUR",
			Lines: []order.Line{{SKU: "sku-a", Quantity: 1, UnitPrice: "1.00"}}}, at.Add(time.Duration(i)*time.Millisecond))
	}
	return out
}

// writeAll writes the orders at once; the channel gets their errors.
func writeAll(p *Store, os []order.Order) <-chan []error {
	done := make(chan []error, 1)
	go func() {
		errs := make([]error, len(os))
		var wg sync.WaitGroup
		for i, o := range os {
			wg.Go(func() { errs[i] = p.Write(context.Background(), o) })
		}
		wg.Wait()
		done <- errs
	}()
	return done
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

// gatedSession is a cassandra.Session whose single statements wait for
// gate to close, and which records every row written, alone or batched.
type gatedSession struct {
	gate chan struct{}
	// failBatches names the statement whose batches fail with batchErr.
	failBatches cassandra.Stmt
	batchErr    error

	mu      sync.Mutex
	blocked int
	rows    map[cassandra.Stmt][][]any // by statement name
	batches map[cassandra.Stmt][]int   // by statement name: each batch's rows
	reads   map[string][][]string      // by tenant: the ids each grouped read asked for
}

func newGatedSession() *gatedSession {
	return &gatedSession{gate: make(chan struct{}), rows: map[cassandra.Stmt][][]any{}, batches: map[cassandra.Stmt][]int{}, reads: map[string][][]string{}}
}

func (s *gatedSession) Serial() gocql.Consistency { return gocql.LocalSerial }

func (s *gatedSession) Query(stmt string, values ...any) cassandra.Query {
	return &gatedQuery{s: s, name: cassandra.StatementName(stmt), values: values}
}

func (s *gatedSession) ExecBatch(_ context.Context, stmt string, rows [][]any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := cassandra.StatementName(stmt)
	s.batches[name] = append(s.batches[name], len(rows))
	if name == s.failBatches {
		return s.batchErr
	}
	s.rows[name] = append(s.rows[name], rows...)
	return nil
}

// fillSlots writes os (inFlight orders) one after another, each once the
// last one's listing and event rows are blocked in the session: every slot
// of those tables is then taken by a row written alone. done waits for
// their writes and returns their errors.
func (s *gatedSession) fillSlots(t *testing.T, p *Store, os []order.Order) (done func() []error) {
	t.Helper()
	var writes []<-chan []error
	for i, o := range os {
		writes = append(writes, writeAll(p, []order.Order{o}))
		s.waitBlocked(t, 2*(i+1))
	}
	return func() []error {
		var errs []error
		for _, w := range writes {
			errs = append(errs, <-w...)
		}
		return errs
	}
}

func (s *gatedSession) waitBlocked(t *testing.T, n int) {
	t.Helper()
	waitFor(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.blocked == n
	})
}

func (s *gatedSession) batchSizes(table string) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.batches[cassandra.Stmt("projection."+table)]
}

// wantRows wants exactly one row written into table for each order, with
// the order's id among its values and its claim time as its write time
// (the last value).
func (s *gatedSession) wantRows(t *testing.T, table string, want []order.Order) {
	t.Helper()
	s.mu.Lock()
	rows := s.rows[cassandra.Stmt("projection."+table)]
	s.mu.Unlock()
	if len(rows) != len(want) {
		t.Fatalf("%s: %d rows written, want %d", table, len(rows), len(want))
	}
	for _, o := range want {
		i := slices.IndexFunc(rows, func(r []any) bool { return slices.Contains(r, any(o.ID.String())) })
		if i < 0 {
			t.Errorf("%s: no row of order %s", table, o.ID)
			continue
		}
		if ts := rows[i][len(rows[i])-1]; ts != o.CreatedAt.UnixMicro() {
			t.Errorf("%s: order %s written at %v, want its claim time %d", table, o.ID, ts, o.CreatedAt.UnixMicro())
		}
	}
}

// gatedQuery is one statement of a gatedSession.
type gatedQuery struct {
	s      *gatedSession
	name   cassandra.Stmt
	values []any
}

func (q *gatedQuery) Consistency(gocql.Consistency) cassandra.Query       { return q }
func (q *gatedQuery) SerialConsistency(gocql.Consistency) cassandra.Query { return q }
func (q *gatedQuery) WithTimestamp(int64) cassandra.Query                 { return q }
func (q *gatedQuery) ServerTimestamp() cassandra.Query                    { return q }
func (q *gatedQuery) Idempotent(bool) cassandra.Query                     { return q }
func (q *gatedQuery) PageSize(int) cassandra.Query                        { return q }
func (q *gatedQuery) PageState([]byte) cassandra.Query                    { return q }

// pass counts the statement as blocked and waits for the gate.
func (q *gatedQuery) pass(ctx context.Context) error {
	q.s.mu.Lock()
	q.s.blocked++
	q.s.mu.Unlock()
	select {
	case <-q.s.gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (q *gatedQuery) ExecContext(ctx context.Context) error {
	if err := q.pass(ctx); err != nil {
		return err
	}
	q.s.mu.Lock()
	defer q.s.mu.Unlock()
	q.s.rows[q.name] = append(q.s.rows[q.name], q.values)
	return nil
}

// ScanContext is a read of one order: it waits for the gate, and finds
// nothing.
func (q *gatedQuery) ScanContext(ctx context.Context, _ ...any) error {
	if err := q.pass(ctx); err != nil {
		return err
	}
	return gocql.ErrNotFound
}
func (q *gatedQuery) MapScanContext(context.Context, map[string]any) error {
	return errors.New("gatedSession: no reads")
}
func (q *gatedQuery) MapScanCASContext(context.Context, map[string]any) (bool, error) {
	return false, errors.New("gatedSession: no conditional writes")
}

// IterContext is a read of several orders (order_id IN ?): recorded by
// tenant, and it finds nothing.
func (q *gatedQuery) IterContext(context.Context) cassandra.Iter {
	q.s.mu.Lock()
	defer q.s.mu.Unlock()
	tenant, ids := q.values[0].(string), q.values[1].([]string)
	q.s.reads[tenant] = append(q.s.reads[tenant], ids)
	return noRows{}
}

type noRows struct{}

func (noRows) Scan(...any) bool            { return false }
func (noRows) MapScan(map[string]any) bool { return false }
func (noRows) PageState() []byte           { return nil }
func (noRows) Close() error                { return nil }
