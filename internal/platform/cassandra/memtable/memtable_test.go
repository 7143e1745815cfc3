package memtable

import (
	"context"
	"testing"
	"time"

	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
)

// A statement gets its armed fault first, then what the intercept picks,
// and every one is logged with what it concerned and whether it applied.
func TestExecServesFaultsThenInterceptAndLogs(t *testing.T) {
	ctx := context.Background()
	r := New(nil)
	r.Faults.Arm("t.write", cassandra.FaultLoseResponse, 1)
	r.SetIntercept(func(name cassandra.Stmt, about any) cassandra.Fault {
		if about == "b" {
			return cassandra.FaultUnavailable
		}
		return 0
	})
	rows := map[string]int{}
	write := func(key string) error {
		return r.Write(ctx, "t.write", key, "write a row", func(time.Time) { rows[key]++ })
	}
	if err := write("a"); fault.KindOf(err) != fault.OutcomeUnknown {
		t.Fatalf("lost response: %v, want an unknown outcome", err)
	}
	if err := write("b"); fault.KindOf(err) != fault.Unavailable {
		t.Fatalf("intercepted: %v, want unavailable", err)
	}
	if err := write("a"); err != nil {
		t.Fatalf("plain write: %v", err)
	}
	if rows["a"] != 2 || rows["b"] != 0 {
		t.Errorf("rows %v: the lost response's write applies, the refused one does not", rows)
	}
	log := r.Log("t.write")
	want := []Logged{{"t.write", "a", cassandra.FaultLoseResponse, true}, {"t.write", "b", cassandra.FaultUnavailable, false}, {"t.write", "a", 0, true}}
	if len(log) != len(want) {
		t.Fatalf("log %v, want %v", log, want)
	}
	for i := range want {
		if log[i] != want[i] {
			t.Errorf("log[%d] = %v, want %v", i, log[i], want[i])
		}
	}
	if n := len(r.Log("other")); n != 0 {
		t.Errorf("%d statements logged under another name", n)
	}
}

// Rows expire with their TTL on the table's clock; a TTL of 0 never does.
func TestRowsExpireOnTheTablesClock(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := New(func() time.Time { return start })
	m := map[string]Expiring[int]{}
	r.Locked(func(now time.Time) {
		m["short"], m["forever"] = Expire(1, now, 10), Expire(2, now, 0)
	})
	r.Advance(10 * time.Second)
	r.Locked(func(now time.Time) { Live(m, now) })
	if _, ok := m["short"]; ok {
		t.Error("a row with a 10 s TTL is still live 10 s later")
	}
	if m["forever"].V != 2 {
		t.Error("a row without a TTL expired")
	}
	if got := r.Now(); !got.Equal(start.Add(10 * time.Second)) {
		t.Errorf("Now %s, want the clock plus what Advance added", got)
	}
}
