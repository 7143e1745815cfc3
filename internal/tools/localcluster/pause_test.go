package localcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// fakeNode starts a `sleep` in node i's place and writes its pid file the
// way startNode does (pid and start time), so that node control can be
// tested without a JVM. It returns a channel closed when the process exits.
func fakeNode(t *testing.T, c *Cluster, i int) (*exec.Cmd, <-chan struct{}) {
	t.Helper()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skipf("no /proc: %v", err)
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skipf("no sleep binary: %v", err)
	}
	cmd := exec.Command(sleep, "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	n := c.node(i)
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	_, started, ok := procStat(cmd.Process.Pid)
	if !ok {
		t.Fatalf("read /proc/%d/stat", cmd.Process.Pid)
	}
	if err := os.WriteFile(n.pidFile(), []byte(fmt.Sprintf("%d %s\n", cmd.Process.Pid, started)), 0o644); err != nil {
		t.Fatal(err)
	}
	if !c.Running(i) {
		t.Fatalf("Running(%d) = false for the fake node's own pid file", i)
	}
	return cmd, done
}

func procState(t *testing.T, pid int) string {
	t.Helper()
	state, _, ok := procStat(pid)
	if !ok {
		t.Fatalf("read /proc/%d/stat", pid)
	}
	return state
}

func TestPauseAndResumeNode(t *testing.T) {
	c := newTestCluster(t, 3)
	cmd, done := fakeNode(t, c, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	if c.Paused(2) {
		t.Fatal("Paused(2) = true before PauseNode")
	}
	if err := c.PauseNode(ctx, 2); err != nil {
		t.Fatalf("PauseNode: %v", err)
	}
	if got := procState(t, cmd.Process.Pid); got != "T" {
		t.Errorf("process state after PauseNode = %q, want T (stopped)", got)
	}
	if !c.Paused(2) || !c.Running(2) {
		t.Errorf("after PauseNode: Paused = %v, Running = %v; want both true", c.Paused(2), c.Running(2))
	}
	if c.answering(2) {
		t.Error("a paused node counts as answering: nodetool would hang on it")
	}
	if err := c.PauseNode(ctx, 2); err != nil {
		t.Errorf("PauseNode of a paused node: %v, want nil", err)
	}
	out, err := c.Status(ctx)
	if err == nil || !strings.Contains(err.Error(), "resume-node") {
		t.Errorf("Status with the only running node paused: error %v, want one naming resume-node", err)
	}
	if !strings.Contains(out, "PAUSED  127.0.0.2") {
		t.Errorf("Status does not show node 2 paused:\n%s", out)
	}

	// Cluster.ResumeNode also waits for Up/Normal through nodetool, which
	// needs a real node; the signal part is node.resume.
	n := c.node(2)
	if err := n.resume(ctx); err != nil {
		t.Fatalf("resume: %v", err)
	}
	if got := procState(t, cmd.Process.Pid); got == "T" {
		t.Errorf("process state after resume = %q, still stopped", got)
	}
	if c.Paused(2) {
		t.Error("Paused(2) = true after resume")
	}
	if err := n.resume(ctx); err != nil {
		t.Errorf("resume of a node that is not paused: %v, want nil", err)
	}
	select {
	case <-done:
		t.Errorf("the node's process exited: %v", cmd.ProcessState)
	default:
	}
}

func TestPauseNodeNotRunning(t *testing.T) {
	c := newTestCluster(t, 3)
	ctx := context.Background()
	for name, op := range map[string]func() error{
		"PauseNode":  func() error { return c.PauseNode(ctx, 1) },
		"ResumeNode": func() error { return c.ResumeNode(ctx, 1) },
	} {
		if err := op(); err == nil || !strings.Contains(err.Error(), "not running") {
			t.Errorf("%s of a node that is not running: %v, want an error saying so", name, err)
		}
	}
	if err := c.PauseNode(ctx, 4); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("PauseNode(4) of a three-node cluster: %v, want an error", err)
	}
}

// TestStopPausedNode: SIGTERM stays pending on a stopped process, so a
// graceful stop of a paused node must continue it, not wait out the 90 s
// grace period and SIGKILL it.
func TestStopPausedNode(t *testing.T) {
	c := newTestCluster(t, 3)
	_, done := fakeNode(t, c, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.PauseNode(ctx, 1); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := c.StopNode(ctx, 1); err != nil {
		t.Fatalf("StopNode of a paused node: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("StopNode of a paused node took %s: SIGTERM waited for the grace period", d)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Error("the paused node's process is still alive after StopNode")
	}
	if c.Running(1) {
		t.Error("Running(1) = true after StopNode")
	}
}
