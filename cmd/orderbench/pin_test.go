package main

import (
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Every party gets cores of its own where there are enough, the broker from
// 3 cores; on 2 cores the cluster has one to itself, the broker, orderd
// and the client share the other.
func TestPlanPins(t *testing.T) {
	for _, tc := range []struct {
		cores                           int
		cluster, broker, orderd, client string
	}{
		{2, "0", "1", "1", "1"},
		{3, "0", "1", "2", "2"},
		{4, "0", "1", "2", "3"},
		{6, "0-2", "3", "4", "5"},
		{8, "0-3", "4", "5-6", "7"},
		{16, "0-11", "12", "13-14", "15"},
	} {
		p, err := planPins(tc.cores)
		if err != nil {
			t.Fatalf("planPins(%d): %v", tc.cores, err)
		}
		got := []string{cpuList(p.cluster), cpuList(p.broker), cpuList(p.orderd), cpuList(p.client)}
		if want := []string{tc.cluster, tc.broker, tc.orderd, tc.client}; !slices.Equal(got, want) {
			t.Errorf("planPins(%d) = cluster, broker, orderd, client %v, want %v", tc.cores, got, want)
		}
	}
	if _, err := planPins(1); err == nil {
		t.Error("planPins(1) = nil error, want one: one core cannot be split")
	}
}

// setAffinity pins every thread of a running process, as the kernel then
// reports it, and the affinity read before restores it.
func TestSetAffinityOfARunningProcess(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 cores")
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := cmd.Process.Pid
	before := allowedCPUs(pid)
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(pid, &old); err != nil {
		t.Fatal(err)
	}
	if err := setAffinity(pid, cpuSet([]int{1})); err != nil {
		t.Fatal(err)
	}
	if got := allowedCPUs(pid); got != "1" {
		t.Errorf("after pinning to core 1, the kernel allows %q", got)
	}
	(&pinning{before: map[int]unix.CPUSet{pid: old}}).restore()
	if got := allowedCPUs(pid); got != before || before == "1" {
		t.Errorf("after restoring, the kernel allows %q, want %q as before", got, before)
	}
}

// The report says when the broker has no core of its own (2 cores), and
// only then: whose it shares.
func TestPinningSaysWhenTheBrokerSharesACore(t *testing.T) {
	for _, tc := range []struct {
		cores  int
		shares bool
	}{{2, true}, {3, false}, {4, false}} {
		plan, err := planPins(tc.cores)
		if err != nil {
			t.Fatal(err)
		}
		got := (&pinning{plan: plan, cores: tc.cores}).describe()
		if strings.Contains(got, "the broker shares orderd's and the client's core, never the cluster's") != tc.shares {
			t.Errorf("on %d cores: %q, want the broker sharing orderd's core said: %v", tc.cores, got, tc.shares)
		}
	}
}
