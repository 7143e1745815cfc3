package main

import (
	"bytes"
	"log/slog"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// keepMemoryLimit restores the process's memory limit after the test.
func keepMemoryLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
}

func TestMemoryLimitFollowsTheContainersAndIsLogged(t *testing.T) {
	keepMemoryLimit(t)
	t.Setenv("GOMEMLIMIT", "")
	var out bytes.Buffer
	setMemoryLimit(slog.New(slog.NewTextHandler(&out, nil)), memlimit.Limit(1000<<20))
	if got, want := debug.SetMemoryLimit(-1), int64(900<<20); got != want {
		t.Errorf("GOMEMLIMIT = %d, want 90%% of a 1000 MiB limit, %d", got, want)
	}
	if !strings.Contains(out.String(), "gomemlimit_bytes=943718400") {
		t.Errorf("the limit set is not logged:\n%s", out.String())
	}
}

func TestGOMEMLIMITWinsOverTheContainersLimit(t *testing.T) {
	keepMemoryLimit(t)
	t.Setenv("GOMEMLIMIT", "123MiB") // the runtime read it at start, not now: only setMemoryLimit sees it
	before := debug.SetMemoryLimit(-1)
	var out bytes.Buffer
	setMemoryLimit(slog.New(slog.NewTextHandler(&out, nil)), memlimit.Limit(1000<<20))
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("GOMEMLIMIT set, the limit changed from %d to %d", before, got)
	}
	if !strings.Contains(out.String(), "gomemlimit=123MiB") {
		t.Errorf("the limit's source is not logged:\n%s", out.String())
	}
}
