package main

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// clockTick is USER_HZ, the unit of /proc/PID/stat CPU times (100 on Linux).
const clockTick = 100

// procCPU is a process's user+system CPU time so far.
func procCPU(pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(raw, ')')
	f := strings.Fields(string(raw[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / clockTick
}

func selfCPU() time.Duration { return procCPU(os.Getpid()) }

// clusterCPU sums the CPU time of every Cassandra node process on this machine.
func clusterCPU() time.Duration {
	var total time.Duration
	for _, pid := range javaProcesses("org.apache.cassandra.service.CassandraDaemon") {
		total += procCPU(pid)
	}
	return total
}

// clusterJVM is the heap and collector options of the first Cassandra JVM
// found, and how its memtables are kept, read from the cassandra.yaml it
// runs with ("-Xmx1024M -XX:+UseG1GC -XX:MaxGCPauseMillis=300
// memtable_allocation_type: heap_buffers"), or "".
func clusterJVM() string {
	for _, pid := range javaProcesses("org.apache.cassandra.service.CassandraDaemon") {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		var opts []string
		for _, a := range strings.Split(string(raw), "\x00") {
			if strings.HasPrefix(a, "-Xmx") || strings.HasPrefix(a, "-XX:MaxGCPauseMillis=") ||
				(strings.HasPrefix(a, "-XX:+Use") && strings.HasSuffix(a, "GC")) {
				opts = append(opts, a)
			}
			if conf, ok := strings.CutPrefix(a, "-Dcassandra.config=file://"); ok {
				opts = append(opts, memtableSettings(conf)...)
			}
		}
		return strings.Join(opts, " ")
	}
	return ""
}

// memtableSettings are the lines of a node's cassandra.yaml that say how
// it keeps its memtables: the allocation type and, if set, the default
// memtable configuration ("inherits: trie").
func memtableSettings(conf string) []string {
	raw, err := os.ReadFile(conf)
	if err != nil {
		return nil
	}
	var out []string
	inMemtable := false
	for _, line := range strings.Split(string(raw), "\n") {
		switch t := strings.TrimSpace(line); {
		case strings.HasPrefix(line, "memtable_allocation_type:"):
			out = append(out, t)
		case line == "memtable:":
			inMemtable = true
		case inMemtable && line != "" && !strings.HasPrefix(line, " "):
			inMemtable = false
		case inMemtable && strings.HasPrefix(t, "inherits:"):
			out = append(out, "memtable "+t)
		}
	}
	return out
}

// statusKB reads a "Name: N kB" line of /proc/PID/status.
func statusKB(pid int, name string) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			n, _ := strconv.ParseFloat(strings.Fields(v)[0], 64)
			return n
		}
	}
	return 0
}

func rssMB(pid int) float64     { return statusKB(pid, "VmRSS") / 1024 }
func peakRSSMB(pid int) float64 { return statusKB(pid, "VmHWM") / 1024 }

func machine() string {
	model := "unknown CPU"
	if raw, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(raw), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	memGB := statusMemGB()
	return fmt.Sprintf("%d cores (%s), %.0f GiB, %s/%s, %s", runtime.NumCPU(), model, memGB, runtime.GOOS, runtime.GOARCH, runtime.Version())
}

func statusMemGB() float64 {
	raw, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			n, _ := strconv.ParseFloat(strings.Fields(v)[0], 64)
			return n / 1024 / 1024
		}
	}
	return 0
}
