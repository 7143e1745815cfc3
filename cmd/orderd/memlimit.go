package main

import (
	"log/slog"
	"math"
	"os"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// memoryLimitRatio is the share of the container's memory limit the Go
// runtime is told it may use (GOMEMLIMIT): the rest is for what the
// runtime does not count (thread stacks, cgo, the binary) and for the
// garbage collector to catch up before the kernel's OOM killer acts.
const memoryLimitRatio = 0.9

// setMemoryLimit sets the Go runtime's soft memory limit from the
// container's (the cgroup's memory limit, read by provider), unless
// GOMEMLIMIT is set, and logs what it did. Without it, a Go process in a
// container sees the host's memory, lets its heap grow to twice the live
// data before collecting, and is OOM-killed where a collection would
// have sufficed. AUTOMEMLIMIT (memlimit's variable) changes the ratio, or
// is "off".
func setMemoryLimit(log *slog.Logger, provider memlimit.Provider) {
	if v := os.Getenv("GOMEMLIMIT"); v != "" {
		log.Info("Go memory limit from GOMEMLIMIT", "gomemlimit", v)
		return
	}
	limit, err := memlimit.Set(memlimit.WithRatio(memoryLimitRatio), memlimit.WithProvider(provider))
	switch {
	case err != nil:
		log.Warn("could not read the container's memory limit: the Go runtime has none (set GOMEMLIMIT)", "error", err)
	case limit == math.MaxInt64:
		log.Info("no container memory limit: the Go runtime has none (set GOMEMLIMIT for one)")
	default:
		log.Info("Go memory limit set from the container's", "gomemlimit_bytes", limit, "ratio", memoryLimitRatio)
	}
}
