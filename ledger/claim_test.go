package ledger

import (
	"context"
	"strings"
	"testing"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/platform/cassandra/cassandratest"
)

// gatedSession is a Recorder whose entry writes (queue.enqueue) each wait
// for the test: started is told when one begins, and it ends once release
// receives.
type gatedSession struct {
	*cassandratest.Recorder
	started chan struct{}
	release chan struct{}
}

func (s *gatedSession) Query(stmt string, values ...any) cassandra.Query {
	q := s.Recorder.Query(stmt, values...)
	if strings.Contains(stmt, string(StmtEnqueue)) {
		return &gatedQuery{Query: q, s: s}
	}
	return q
}

type gatedQuery struct {
	cassandra.Query
	s *gatedSession
}

func (q *gatedQuery) Idempotent(bool) cassandra.Query { return q }

func (q *gatedQuery) ExecContext(ctx context.Context) error {
	q.s.started <- struct{}{}
	<-q.s.release
	return q.Query.ExecContext(ctx)
}

// A claim whose call ends while its (shared) entry is being written is not
// sent: the entry's write outlives the call, the claim must not, or it
// could go out after the call's deadline and the reconciler's grace.
func TestClaimWhoseCallEndedWhileItsEntryWasWrittenIsNotSent(t *testing.T) {
	rec := cassandratest.NewRecorder(gocql.LocalSerial)
	s := &gatedSession{Recorder: rec, started: make(chan struct{}), release: make(chan struct{})}
	store, err := NewCassandraStore(s, Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	answer := make(chan error, 1)
	go func() {
		_, _, err := store.Claim(ctx, testClaim(), nil)
		answer <- err
	}()
	<-s.started
	cancel()
	s.release <- struct{}{}
	if err := <-answer; fault.KindOf(err) != fault.Unavailable {
		t.Errorf("Claim = %v, want Unavailable (never sent)", err)
	}
	var wrote bool
	for _, run := range rec.Runs() {
		if run.Name == StmtClaim {
			t.Errorf("the claim was sent after its call ended: %+v", rec.Runs())
		}
		wrote = wrote || run.Name == StmtEnqueue
	}
	if !wrote {
		t.Errorf("the entry's write was given up with the call: %+v", rec.Runs())
	}
}
