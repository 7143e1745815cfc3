package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// newTestCluster returns a cluster whose state and cache live in temp folders.
func newTestCluster(t *testing.T, nodes int) *Cluster {
	t.Helper()
	c, err := New(Config{Nodes: nodes, StateDir: t.TempDir(), CacheDir: t.TempDir(), Log: io.Discard})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

func TestInitialToken(t *testing.T) {
	for _, n := range []int{1, 3, 9} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			toks := make([]int64, n)
			for i := range toks {
				s := initialToken(i+1, n)
				tok, err := strconv.ParseInt(s, 10, 64)
				if err != nil {
					t.Fatalf("initialToken(%d, %d) = %q: %v", i+1, n, s, err)
				}
				toks[i] = tok
			}
			if toks[0] != math.MinInt64 {
				t.Errorf("initialToken(1, %d) = %d, want %d", n, toks[0], int64(math.MinInt64))
			}
			if n == 1 {
				return
			}
			want := math.Ldexp(1, 64) / float64(n)
			within := func(what string, gap uint64) {
				if d := math.Abs(float64(gap) - want); d > want/100 {
					t.Errorf("%s: gap %d is not within 1%% of 2^64/%d = %.0f", what, gap, n, want)
				}
			}
			for i := 1; i < n; i++ {
				if toks[i] <= toks[i-1] {
					t.Errorf("token of node %d (%d) is not above node %d's (%d)", i+1, toks[i], i, toks[i-1])
					continue
				}
				// Wrapping uint64 arithmetic: the gap can exceed MaxInt64 for n = 2.
				within(fmt.Sprintf("nodes %d..%d", i, i+1), uint64(toks[i])-uint64(toks[i-1]))
			}
			// The ring wraps: the last node's range back to the first is balanced too.
			within(fmt.Sprintf("node %d back to node 1", n), uint64(toks[0])-uint64(toks[n-1]))
		})
	}
}

func TestJMXPort(t *testing.T) {
	for _, tt := range []struct{ node, port int }{{1, 7100}, {2, 7200}, {3, 7300}} {
		if got := JMXPort(tt.node); got != tt.port {
			t.Errorf("JMXPort(%d) = %d, want %d", tt.node, got, tt.port)
		}
	}
}

func TestNewNodes(t *testing.T) {
	tests := []struct {
		nodes, want int
		wantErr     bool
	}{
		{nodes: 0, want: 3},
		{nodes: 1, want: 1},
		{nodes: 9, want: 9},
		{nodes: 10, wantErr: true},
		{nodes: -1, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.nodes), func(t *testing.T) {
			c, err := New(Config{Nodes: tt.nodes, StateDir: t.TempDir(), CacheDir: t.TempDir(), Log: io.Discard})
			if tt.wantErr {
				if err == nil {
					t.Fatalf("New(Nodes: %d) = nil error, want one", tt.nodes)
				}
				if !strings.Contains(err.Error(), "1 to 9") {
					t.Errorf("error %q does not name the allowed range", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("New(Nodes: %d): %v", tt.nodes, err)
			}
			if c.Nodes() != tt.want {
				t.Errorf("Nodes() = %d, want %d", c.Nodes(), tt.want)
			}
		})
	}
}

func TestContactPoints(t *testing.T) {
	c := newTestCluster(t, 3)
	want := []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}
	if got := c.ContactPoints(); !slices.Equal(got, want) {
		t.Errorf("ContactPoints() = %v, want %v", got, want)
	}
}

func TestTail(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		want string
	}{
		{"a\nb\nc\n", 2, "b\nc"},
		{"a\nb\nc", 2, "b\nc"},
		{"a\nb\nc\n", 3, "a\nb\nc"},
		{"a\nb\nc\n", 10, "a\nb\nc"},
		{"a\nb\nc\n\n\n", 1, "c"},
		{"", 5, ""},
	}
	for _, tt := range tests {
		if got := tail(tt.s, tt.n); got != tt.want {
			t.Errorf("tail(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}

// yamlLine is what the generated cassandra.yaml may hold on one line: a key
// (with or without a value) or a list item, indented with spaces.
var yamlLine = regexp.MustCompile(`^( {2})*(- )?[A-Za-z_][A-Za-z0-9_]*:( .+)?$|^( {2})*- .+$`)

func TestWriteConfig(t *testing.T) {
	c := newTestCluster(t, 0) // default: 3 nodes
	lib := t.TempDir()
	jamm := filepath.Join(lib, "jamm-0.4.0.jar")
	if err := os.WriteFile(jamm, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	c.jars.dir = lib
	n := c.node(2)
	if err := n.writeConfig(); err != nil {
		t.Fatalf("writeConfig: %v", err)
	}
	conf := filepath.Join(c.StateDir(), "node2", "conf")
	read := func(name string) string {
		t.Helper()
		raw, err := os.ReadFile(filepath.Join(conf, name))
		if err != nil {
			t.Fatalf("read %s: %v", name, err)
		}
		s := string(raw)
		for _, bad := range []string{"<no value>", "{{", "}}"} {
			if strings.Contains(s, bad) {
				t.Errorf("%s holds %q: a template key is missing", name, bad)
			}
		}
		return s
	}
	lines := func(s string) []string { return strings.Split(s, "\n") }

	t.Run("folders", func(t *testing.T) {
		for _, sub := range []string{"conf", "logs", "tmp", "data", "commitlog", "saved_caches", "hints", "cdc_raw"} {
			if fi, err := os.Stat(filepath.Join(n.dir, sub)); err != nil || !fi.IsDir() {
				t.Errorf("folder %s missing: %v", sub, err)
			}
		}
	})

	t.Run("cassandra.yaml", func(t *testing.T) {
		y := read("cassandra.yaml")
		if strings.Contains(y, "\t") {
			t.Error("cassandra.yaml holds a tab, which YAML does not allow for indentation")
		}
		for i, line := range lines(y) {
			trimmed := strings.TrimSpace(line)
			if trimmed == "" || strings.HasPrefix(trimmed, "#") {
				continue
			}
			if !yamlLine.MatchString(line) {
				t.Errorf("cassandra.yaml line %d is not a simple YAML key or list item: %q", i+1, line)
			}
		}
		seeds := `- seeds: "127.0.0.1:7000,127.0.0.2:7000,127.0.0.3:7000"`
		for _, want := range []string{
			"listen_address: 127.0.0.2",
			"rpc_address: 127.0.0.2",
			"paxos_variant: v2",
			"paxos_state_purging: repaired",
			"num_tokens: 1",
			fmt.Sprintf("initial_token: %q", initialToken(2, 3)),
			seeds,
			"  - " + filepath.Join(n.dir, "data"),
			"commitlog_directory: " + filepath.Join(n.dir, "commitlog"),
		} {
			found := slices.ContainsFunc(lines(y), func(l string) bool { return strings.TrimSpace(l) == strings.TrimSpace(want) })
			if !found {
				t.Errorf("cassandra.yaml lacks the line %q", want)
			}
		}
	})

	t.Run("cassandra-rackdc.properties", func(t *testing.T) {
		p := lines(read("cassandra-rackdc.properties"))
		for _, want := range []string{"dc=dc1", "rack=rack2"} {
			if !slices.Contains(p, want) {
				t.Errorf("cassandra-rackdc.properties lacks the line %q", want)
			}
		}
	})

	t.Run("logback", func(t *testing.T) {
		if x := read("logback.xml"); !strings.Contains(x, filepath.Join(n.dir, "logs", "system.log")) {
			t.Errorf("logback.xml does not write %s", filepath.Join(n.dir, "logs", "system.log"))
		}
		read("logback-tools.xml")
	})

	t.Run("jvm17.options", func(t *testing.T) {
		opts := lines(read("jvm17.options"))
		want := []string{
			"-Dcassandra.jmx.local.port=7200",
			"-javaagent:" + jamm,
			"-Xmx1024M",
			// pid() recognises the node's process by this exact option.
			"-Dcassandra.storagedir=" + n.dir,
		}
		want = append(want, jdkModuleFlags...)
		for _, w := range want {
			if !slices.Contains(opts, w) {
				t.Errorf("jvm17.options lacks the line %q", w)
			}
		}
	})

	t.Run("jvmArgs", func(t *testing.T) {
		args, err := n.jvmArgs()
		if err != nil {
			t.Fatalf("jvmArgs: %v", err)
		}
		if len(args) < 3 {
			t.Fatalf("jvmArgs = %q: too short", args)
		}
		end := args[len(args)-3:]
		if end[0] != "-cp" {
			t.Errorf("third-last argument = %q, want -cp", end[0])
		}
		if !strings.HasPrefix(end[1], conf+":") {
			t.Errorf("class path %q does not start with the node's conf folder %s", end[1], conf)
		}
		if !slices.Contains(strings.Split(end[1], ":"), filepath.Join(lib, "*")) {
			t.Errorf("class path %q lacks %s", end[1], filepath.Join(lib, "*"))
		}
		if end[2] != "org.apache.cassandra.service.CassandraDaemon" {
			t.Errorf("last argument = %q, want the Cassandra daemon class", end[2])
		}
		for i, a := range args[:len(args)-3] {
			switch {
			case a == "" || strings.TrimSpace(a) != a:
				t.Errorf("argument %d is blank or padded: %q", i, a)
			case strings.HasPrefix(a, "#"):
				t.Errorf("argument %d is a comment: %q", i, a)
			case !strings.HasPrefix(a, "-"):
				t.Errorf("argument %d is not an option: %q", i, a)
			}
		}
		for _, f := range jdkModuleFlags {
			if !slices.Contains(args, f) {
				t.Errorf("jvmArgs lack %q", f)
			}
		}
	})
}

func TestWriteConfigWithoutJamm(t *testing.T) {
	c := newTestCluster(t, 3)
	c.jars.dir = t.TempDir()
	err := c.node(1).writeConfig()
	if err == nil || !strings.Contains(err.Error(), "jamm-") {
		t.Errorf("writeConfig without a jamm jar = %v, want an error naming jamm-", err)
	}
}

// deadPid returns a pid with no process behind it.
func deadPid(t *testing.T) int {
	t.Helper()
	pidMax := 1 << 22
	if raw, err := os.ReadFile("/proc/sys/kernel/pid_max"); err == nil {
		if v, err := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil {
			pidMax = v
		}
	}
	for pid := pidMax - 1; pid > pidMax-10000 && pid > 1; pid-- {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); errors.Is(err, os.ErrNotExist) {
			return pid
		}
	}
	t.Skip("found no unused pid")
	return 0
}

func TestStalePidFile(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skipf("no /proc: %v", err)
	}

	// A live process that is not a Cassandra of this state folder, which the
	// test can watch for signals.
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skipf("no sleep binary: %v", err)
	}
	child := exec.Command(sleep, "300")
	if err := child.Start(); err != nil {
		t.Fatalf("start %s: %v", sleep, err)
	}
	childDone := make(chan struct{})
	go func() { _ = child.Wait(); close(childDone) }()
	t.Cleanup(func() {
		_ = child.Process.Kill()
		<-childDone
	})

	cases := []struct {
		name    string
		content string
	}{
		{"garbage", "not a pid\n"},
		{"negative", "-5\n"},
		{"process gone", strconv.Itoa(deadPid(t)) + "\n"},
		{"the test itself", strconv.Itoa(os.Getpid()) + "\n"},
		{"some other program", strconv.Itoa(child.Process.Pid)},
		// The pid reused by another process after a reboot: the recorded
		// start time does not match (pid 2 is kthreadd, a kernel thread).
		{"pid reused, start time differs", "2 1\n"},
		{"the test itself, wrong start time", strconv.Itoa(os.Getpid()) + " 1\n"},
	}
	ops := []struct {
		name string
		do   func(context.Context, *Cluster) error
	}{
		{"KillNode", func(ctx context.Context, c *Cluster) error { return c.KillNode(ctx, 1) }},
		{"StopNode", func(ctx context.Context, c *Cluster) error { return c.StopNode(ctx, 1) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestCluster(t, 3)
			n := c.node(1)
			if err := os.MkdirAll(n.dir, 0o755); err != nil {
				t.Fatal(err)
			}
			write := func() {
				t.Helper()
				if err := os.WriteFile(n.pidFile(), []byte(tc.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			write()
			if c.Running(1) {
				// Stop here: calling KillNode would signal that process.
				t.Fatalf("Running(1) = true for pid file %q", tc.content)
			}
			if got := n.pid(); got != 0 {
				t.Fatalf("pid() = %d for pid file %q, want 0", got, tc.content)
			}
			for _, op := range ops {
				write()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				start := time.Now()
				err := op.do(ctx, c)
				cancel()
				if err != nil {
					t.Errorf("%s on a stale pid file: %v", op.name, err)
				}
				if d := time.Since(start); d > 2*time.Second {
					t.Errorf("%s took %s: it waited for a process it should have ignored", op.name, d)
				}
				if _, err := os.Stat(n.pidFile()); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s left the stale pid file behind (stat: %v)", op.name, err)
				}
			}
		})
	}

	// Neither the test process (it is still running this line) nor the
	// watched child may have received a signal.
	select {
	case <-childDone:
		t.Errorf("the unrelated child process exited: %v", child.ProcessState)
	case <-time.After(200 * time.Millisecond):
	}
}

func TestCheckPortsFree(t *testing.T) {
	const addr = "127.0.0.9:9042"
	l, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			t.Skipf("%s is already used by another process, so the test cannot hold it: %v", addr, err)
		}
		t.Skipf("cannot bind %s on this machine: %v", addr, err)
	}
	defer l.Close()

	c := newTestCluster(t, 9)
	err = c.node(9).checkPortsFree()
	if err == nil {
		t.Fatalf("checkPortsFree with %s held = nil, want an error", addr)
	}
	for _, want := range []string{addr, "already in use", "node 9"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("error %q does not wrap EADDRINUSE", err)
	}
}
