package failpoint

import (
	"strings"
	"testing"

	"github.com/atlasmart/orderd/internal/domain/fault"
)

// A release build refuses every specification; a test build arms it.
func TestParseArmsOnlyInATestBuild(t *testing.T) {
	s, err := Parse("after-claim=error")
	if Compiled {
		if err != nil || s.Eval(AfterClaim) == nil {
			t.Errorf("test build: Parse = %v, %v; want an armed set", s, err)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), "built without failpoints") {
		t.Errorf("release build: Parse = %v, %v; want it refused", s, err)
	}
	if s, err := Parse("  "); s != nil || err != nil {
		t.Errorf("empty spec: %v, %v; want disarmed, no error", s, err)
	}
}

func TestActions(t *testing.T) {
	s, err := parse("a=error;b=sleep(1ms);c=panic")
	if err != nil {
		t.Fatal(err)
	}
	if fault.KindOf(s.Eval("a")) != fault.Unavailable || s.Eval("b") != nil || s.Eval("unarmed") != nil {
		t.Error("error, sleep or an unarmed point misbehaved")
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("panic action did not panic")
			}
		}()
		_ = s.Eval("c")
	}()
	once, err := parse("a=error*2")
	if err != nil {
		t.Fatal(err)
	}
	if once.Eval("a") == nil || once.Eval("a") == nil || once.Eval("a") != nil {
		t.Error("error*2 did not fire exactly twice")
	}
	for _, bad := range []string{"a", "=exit", "a=explode", "a=sleep(x)", "a=error*0", "a=error*x"} {
		if _, err := parse(bad); err == nil {
			t.Errorf("parse(%q) accepted", bad)
		}
	}
	var disarmed *Set
	if disarmed.Eval(AfterClaim) != nil {
		t.Error("nil set failed")
	}
}
