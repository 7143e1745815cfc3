package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// pinPlan is which cores each party of a run gets under -pin.
type pinPlan struct {
	cluster, broker, orderd, client []int
}

// planPins splits n cores between the Cassandra JVMs, the Kafka broker,
// orderd and this client. Each gets cores of its own where there are
// enough: the client and the broker one each, orderd one (two from 8
// cores), the cluster the rest. From 3 cores the broker always has one of
// its own, so delivery's cost is not taken from the cluster's or orderd's
// CPU: with 3, orderd and the client share one. With 2, the cluster has
// core 0 to itself and the broker, orderd and the client share core 1:
// the database, which is what limits the throughput, never runs the
// broker, so what delivery costs the cluster shows apart from what the
// broker costs (core 1 has room: at 64 streams the three use well under
// half of it). Fewer than 2 cannot be split.
func planPins(n int) (pinPlan, error) {
	switch {
	case n < 2:
		return pinPlan{}, fmt.Errorf("pinning needs at least 2 cores, this machine has %d", n)
	case n == 2:
		return pinPlan{cluster: []int{0}, broker: []int{1}, orderd: []int{1}, client: []int{1}}, nil
	case n == 3:
		return pinPlan{cluster: []int{0}, broker: []int{1}, orderd: []int{2}, client: []int{2}}, nil
	}
	orderd := 1
	if n >= 8 {
		orderd = 2
	}
	clusterCores := n - 2 - orderd
	return pinPlan{
		cluster: seq(0, clusterCores),
		broker:  []int{clusterCores},
		orderd:  seq(clusterCores+1, orderd),
		client:  []int{n - 1},
	}, nil
}

func seq(from, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = from + i
	}
	return out
}

// cpuList formats cores as taskset does ("0-3", "5").
func cpuList(cores []int) string {
	if len(cores) == 1 {
		return strconv.Itoa(cores[0])
	}
	return fmt.Sprintf("%d-%d", cores[0], cores[len(cores)-1])
}

// pinning is what -pin did: the plan, and each pinned process's affinity
// before, to restore when the run ends.
type pinning struct {
	plan    pinPlan
	cores   int
	brokers int
	nodes   int
	before  map[int]unix.CPUSet // pid -> its affinity before the run
}

// orderdCPUs is the core list every orderd the run starts is pinned to
// (through taskset, so the process starts pinned); empty: not pinned.
var orderdCPUs string

// pinProcesses pins, for the run, every Cassandra JVM and Kafka broker on
// this machine (found as clusterCPU finds them), the orderd already started
// (pid), this process, and every orderd started later.
func pinProcesses(orderdPid int) (*pinning, error) {
	n := runtime.NumCPU()
	plan, err := planPins(n)
	if err != nil {
		return nil, err
	}
	p := &pinning{plan: plan, cores: n, before: map[int]unix.CPUSet{}}
	nodes, brokers := javaProcesses("org.apache.cassandra.service.CassandraDaemon"), javaProcesses("kafka.Kafka")
	p.nodes, p.brokers = len(nodes), len(brokers)
	for _, set := range []struct {
		pids  []int
		cores []int
	}{{nodes, plan.cluster}, {brokers, plan.broker}, {[]int{orderdPid}, plan.orderd}, {[]int{os.Getpid()}, plan.client}} {
		for _, pid := range set.pids {
			var old unix.CPUSet
			if err := unix.SchedGetaffinity(pid, &old); err != nil {
				p.restore()
				return nil, fmt.Errorf("read the affinity of pid %d: %w", pid, err)
			}
			p.before[pid] = old
			if err := setAffinity(pid, cpuSet(set.cores)); err != nil {
				p.restore()
				return nil, err
			}
		}
	}
	orderdCPUs = cpuList(plan.orderd)
	return p, nil
}

// describe says what was pinned where, for the report.
func (p *pinning) describe() string {
	return fmt.Sprintf("pinned on %d cores (taskset): %d Cassandra JVMs on %s, %d Kafka broker(s) on %s, orderd on %s, the benchmark client on %s",
		p.cores, p.nodes, cpuList(p.plan.cluster), p.brokers, cpuList(p.plan.broker), cpuList(p.plan.orderd), cpuList(p.plan.client)) + p.brokerShare()
}

// brokerShare says, when the broker has no core of its own, whose it shares.
func (p *pinning) brokerShare() string {
	if slices.Equal(p.plan.broker, p.plan.orderd) {
		return fmt.Sprintf(" (with %d cores the broker shares orderd's and the client's core, never the cluster's: the broker's CPU does not come out of the database's)", p.cores)
	}
	return ""
}

// restore gives every pinned process the affinity it had before.
func (p *pinning) restore() {
	for pid, set := range p.before {
		if err := setAffinity(pid, set); err != nil {
			fmt.Fprintf(os.Stderr, "orderbench: restore the affinity of pid %d: %v\n", pid, err)
		}
	}
	orderdCPUs = ""
}

func cpuSet(cores []int) unix.CPUSet {
	var s unix.CPUSet
	for _, c := range cores {
		s.Set(c)
	}
	return s
}

// setAffinity sets the affinity of every thread of pid, as `taskset -a -p`
// does: a JVM's threads each have their own, and threads it starts later
// inherit their creator's.
func setAffinity(pid int, set unix.CPUSet) error {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return fmt.Errorf("list the threads of pid %d: %w", pid, err)
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		// A thread that ended meanwhile needs no affinity.
		if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("set the affinity of thread %d of pid %d: %w", tid, pid, err)
		}
	}
	return nil
}

// javaProcesses lists the pids whose command line holds mainClass.
func javaProcesses(mainClass string) []int {
	var out []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		cmdline, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(mainClass)) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(d)); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// allowedCPUs is the Cpus_allowed_list line of /proc/PID/status ("0-1").
func allowedCPUs(pid int) string {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
