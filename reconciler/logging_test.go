package reconciler

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/platform/lograte"
	"github.com/atlasmart/orderd/ledger"
	"github.com/atlasmart/orderd/ledger/ledgertest"
)

// logLines decodes the JSON lines in buf with message msg.
func logLines(t *testing.T, buf *bytes.Buffer, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(buf.Bytes()))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if line["msg"] == msg {
			out = append(out, line)
		}
	}
	return out
}

// An outage that fails every entry of a backlog, and the pass that heals
// it, write a bounded number of per-request lines; the requests themselves
// are all kept and then all finished, and the counters count each one.
func TestBacklogOutageAndHealingAreLoggedAtABoundedRate(t *testing.T) {
	const (
		shard   = 4
		backlog = 100
	)
	h := newHarness(t0.Add(10 * time.Second))
	recs := make([]ledger.Record, backlog)
	for i := range recs {
		recs[i], _ = h.addPending(t, shard, t0.Add(-5*time.Minute))
	}
	var buf bytes.Buffer
	l := New(Config{}, h.ledger, h.fin.Finish, h.coord, slog.New(slog.NewJSONHandler(&buf, nil)))
	l.now = h.clock.Now
	lineClock := newFakeClock(t0) // the log allowance's clock, apart from the ledger's
	l.lines = lograte.New[string](lineClock.Now)
	h.ledger.SetIntercept(func(st ledgertest.Statement) cassandra.Fault {
		if st.Name == ledger.StmtGet {
			return cassandra.FaultUnavailable
		}
		return 0
	})

	const failed = "could not reconcile request"
	res, _ := l.PassShards(t.Context(), []int{shard})
	if res.Entries != backlog || res.Finished != 0 {
		t.Fatalf("pass with the ledger unreadable = %+v, want %d entries listed and none finished", res, backlog)
	}
	if got := len(logLines(t, &buf, failed)); got != lograte.Burst {
		t.Errorf("%d %q lines for %d failed entries, want the burst (%d)", got, failed, backlog, lograte.Burst)
	}

	// A second later the next pass fails them all again: a second's
	// allowance is written, and one of its lines (the first admitted; the
	// pass's entries run side by side, so not always the first written)
	// says how many were held.
	buf.Reset()
	lineClock.Advance(time.Second)
	h.clock.Advance(time.Second)
	l.PassShards(t.Context(), []int{shard})
	lines := logLines(t, &buf, failed)
	if len(lines) != lograte.LinesPerSecond {
		t.Errorf("%d %q lines a second later, want %d", len(lines), failed, lograte.LinesPerSecond)
	}
	var told []any
	for _, line := range lines {
		if n, ok := line["suppressed"]; ok {
			told = append(told, n)
		}
	}
	if len(told) != 1 || told[0] != float64(backlog-lograte.Burst) {
		t.Errorf("lines after the held-back run carry suppressed = %v, want one line with %d", told, backlog-lograte.Burst)
	}
	for _, r := range recs {
		wantState(t, h, r.Key, ledger.Pending)
	}

	// The ledger answers again: every request is finished and counted, and
	// "reconciled request" has its own allowance.
	buf.Reset()
	h.ledger.SetIntercept(nil)
	h.clock.Advance(time.Second)
	res = mustPass(t, l, shard)
	if res.Finished != backlog || l.Stats().Finished != backlog {
		t.Errorf("healing pass = %+v, Stats.Finished %d; want all %d finished", res, l.Stats().Finished, backlog)
	}
	for _, r := range recs {
		wantFinished(t, h, r.Key)
		wantNoEntries(t, h, r.Key)
	}
	if got := len(logLines(t, &buf, "reconciled request")); got != lograte.Burst {
		t.Errorf("%d \"reconciled request\" lines for %d finished, want the burst (%d)", got, backlog, lograte.Burst)
	}
	if got := len(logLines(t, &buf, "reconciler pass")); got != 1 {
		t.Errorf("%d \"reconciler pass\" lines, want the pass's one summary, never held back", got)
	}
}
