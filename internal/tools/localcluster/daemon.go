package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// pidFile tracks a JVM this package started detached (a Cassandra node, the
// Kafka broker). The file holds the pid and the process's start time
// (field 22 of /proc/PID/stat), so a file whose process is gone, is a
// zombie, or whose pid now belongs to another process (after a reboot, say)
// is stale and counts as not running.
type pidFile string

// pid returns the live process id, or 0.
func (f pidFile) pid() int {
	raw, err := os.ReadFile(string(f))
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(raw))
	if len(fields) != 2 {
		return 0
	}
	pid, err := strconv.Atoi(fields[0])
	if err != nil || pid <= 0 {
		return 0
	}
	state, started, ok := procStat(pid)
	if !ok || state == "Z" || started != fields[1] {
		return 0
	}
	return pid
}

// procStat reads a process's state letter and start time from /proc.
func procStat(pid int) (state, started string, ok bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", "", false
	}
	// Fields after the parenthesised command name: state is field 3, start
	// time field 22.
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return "", "", false
	}
	rest := strings.Fields(string(stat[i+1:]))
	if len(rest) < 20 {
		return "", "", false
	}
	return rest[0], rest[19], true
}

// startDetached starts java with args in dir, on its own session with no
// terminal and its stdout and stderr appended to stdoutLog, and records it
// in f: the process outlives the launcher and never holds the caller's
// pipes (a test runner that waits for end-of-output never hangs on it).
func startDetached(f pidFile, dir, stdoutLog, what string, args []string) (int, error) {
	logFile, err := os.OpenFile(stdoutLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, fmt.Errorf("open %s stdout log: %w", what, err)
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "\n=== started by internal/tools/localcluster at %s ===\n", time.Now().Format(time.RFC3339))
	cmd := exec.Command("java", args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start %s: %w", what, err)
	}
	_, started, _ := procStat(cmd.Process.Pid)
	if err := os.WriteFile(string(f), []byte(fmt.Sprintf("%d %s\n", cmd.Process.Pid, started)), 0o644); err != nil {
		_ = cmd.Process.Kill()
		return 0, fmt.Errorf("write %s pid file: %w", what, err)
	}
	// Reap the process when it exits so a killed one does not linger as a
	// zombie of this process; the goroutine ends with the process.
	go func() { _ = cmd.Wait() }()
	return cmd.Process.Pid, nil
}

// stop ends the process of f: SIGTERM and up to grace for it to exit, then
// SIGKILL; grace 0 kills at once. logf reports a forced kill.
func (f pidFile) stop(ctx context.Context, what string, grace time.Duration, logf func(string, ...any)) (syscall.Signal, error) {
	pid := f.pid()
	if pid == 0 {
		_ = os.Remove(string(f))
		return 0, nil
	}
	sig := syscall.SIGTERM
	if grace == 0 {
		sig = syscall.SIGKILL
	}
	if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return 0, fmt.Errorf("signal %s (pid %d): %w", what, pid, err)
	}
	if sig == syscall.SIGTERM {
		// A paused process would keep SIGTERM pending until it runs again:
		// continue it so that its shutdown hook runs now.
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
	deadline := time.Now().Add(grace + 10*time.Second)
	killed := sig == syscall.SIGKILL
	for f.pid() > 0 {
		if !killed && time.Now().After(deadline.Add(-10*time.Second)) {
			logf("%s did not stop within %s; sending SIGKILL", what, grace)
			_ = syscall.Kill(pid, syscall.SIGKILL)
			killed = true
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%s (pid %d) still running after SIGKILL", what, pid)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	_ = os.Remove(string(f))
	return sig, nil
}

// logTail is the last lines of the file at path, or why it cannot be read.
func logTail(path string, lines int) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return tail(string(raw), lines)
}

// javaOutput runs java with args to completion and returns what it printed.
func javaOutput(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "java", args...).CombinedOutput()
	return string(out), err
}
