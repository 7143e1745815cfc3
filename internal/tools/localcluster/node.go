package localcluster

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	nativePort  = 9042
	storagePort = 7000
)

// Balanced single tokens for up to nine nodes keep start deterministic and
// fast: no token allocation, no bootstrap streaming.
func initialToken(i, n int) string {
	// Spread n tokens evenly over the Murmur3 range [-2^63, 2^63).
	const span = float64(1 << 63)
	tok := -span + 2*span*float64(i-1)/float64(n)
	return strconv.FormatInt(int64(tok), 10)
}

// JMXPort is the JMX port of the node on 127.0.0.i. Local JMX always binds
// 127.0.0.1, so every node on one host needs its own port (as ccm does:
// 7100, 7200, ...); the e2e docker backend's containers follow the same rule.
func JMXPort(i int) int { return 7000 + 100*i }

type node struct {
	c     *Cluster
	index int
	dir   string
}

func (c *Cluster) node(i int) *node {
	return &node{c: c, index: i, dir: filepath.Join(c.cfg.StateDir, fmt.Sprintf("node%d", i))}
}

func tlsKeystore(s *Security) string {
	if s == nil {
		return ""
	}
	return s.ClientTLSKeystore
}

func (n *node) address() string { return n.c.Address(n.index) }
func (n *node) pidFile() string { return filepath.Join(n.dir, "cassandra.pid") }

// stdoutLog receives the JVM's stdout and stderr. Cassandra logs only to
// system.log (templates/logback.xml.tmpl), so this holds what the JVM prints
// outside logging: bad options, a startup exception, a crash.
func (n *node) stdoutLog() string {
	return filepath.Join(n.dir, "logs", "stdout.log")
}

// gcLogPath is the node's garbage-collection log (templates/jvm17.options.tmpl).
func (n *node) gcLogPath() string { return filepath.Join(n.dir, "logs", "gc.log") }

// pid returns the node's live process id, or 0 (see pidFile).
func (n *node) pid() int { return pidFile(n.pidFile()).pid() }

// paused reports whether the node's process is alive but stopped by a
// signal (SIGSTOP from pause): state T in /proc.
func (n *node) paused() bool {
	pid := n.pid()
	if pid == 0 {
		return false
	}
	state, _, ok := procStat(pid)
	return ok && state == "T"
}

// pause stops the node's JVM with SIGSTOP and waits until the kernel reports
// it stopped. Every thread halts; its sockets stay open, so peers and clients
// see a node that accepts bytes and never answers. Pausing a paused node
// does nothing.
func (n *node) pause(ctx context.Context) error {
	return n.signalAndWait(ctx, syscall.SIGSTOP, true)
}

// resume continues a paused node with SIGCONT and waits until it runs again.
// Resuming a node that is not paused does nothing.
func (n *node) resume(ctx context.Context) error {
	return n.signalAndWait(ctx, syscall.SIGCONT, false)
}

func (n *node) signalAndWait(ctx context.Context, sig syscall.Signal, wantPaused bool) error {
	pid := n.pid()
	if pid == 0 {
		return fmt.Errorf("node %d (%s) is not running", n.index, n.address())
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("signal node %d (pid %d) with %s: %w", n.index, pid, sig, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for n.paused() != wantPaused {
		if n.pid() == 0 {
			return fmt.Errorf("node %d (pid %d) exited after %s", n.index, pid, sig)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %d (pid %d): paused=%v not reached after %s: %w", n.index, pid, wantPaused, sig, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// checkAlive fails with the tail of the node's logs when a node that was
// started has died.
func (n *node) checkAlive() error {
	if n.pid() > 0 {
		return nil
	}
	return fmt.Errorf("node %d (%s) is not running; last lines of %s:\n%s\n--- %s:\n%s",
		n.index, n.address(), n.c.LogPath(n.index), logTail(n.c.LogPath(n.index), 25), n.stdoutLog(), logTail(n.stdoutLog(), 15))
}

// startNode starts node i unless it is running, then waits for its native
// port. It does not wait for the ring to settle.
func (c *Cluster) startNode(ctx context.Context, i int) error {
	n := c.node(i)
	if n.pid() > 0 {
		return n.waitNative(ctx)
	}
	// A node stopped a moment ago may still be releasing its ports.
	err := n.checkPortsFree()
	for deadline := time.Now().Add(15 * time.Second); err != nil && time.Now().Before(deadline); err = n.checkPortsFree() {
		time.Sleep(500 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	if err := n.writeConfig(); err != nil {
		return err
	}
	args, err := n.jvmArgs()
	if err != nil {
		return err
	}
	pid, err := startDetached(pidFile(n.pidFile()), n.dir, n.stdoutLog(), fmt.Sprintf("node %d", i), args)
	if err != nil {
		return err
	}
	c.logf("node %d starting on %s (pid %d, log %s)", i, n.address(), pid, c.LogPath(i))
	return n.waitNative(ctx)
}

func (n *node) waitNative(ctx context.Context) error {
	for {
		if portAnswers(ctx, n.address(), nativePort) {
			return nil
		}
		if err := n.checkAlive(); err != nil {
			return fmt.Errorf("node %d died during start: %w", n.index, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %d: native port %s:%d not answering before the deadline (%w); see %s",
				n.index, n.address(), nativePort, ctx.Err(), n.c.LogPath(n.index))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (n *node) stop(ctx context.Context, grace time.Duration) error {
	sig, err := pidFile(n.pidFile()).stop(ctx, fmt.Sprintf("node %d", n.index), grace, n.c.logf)
	if err == nil && sig != 0 {
		n.c.logf("node %d stopped (%s)", n.index, sig)
	}
	return err
}

// checkPortsFree names the port and the fix when something else holds one of
// the node's ports.
func (n *node) checkPortsFree() error {
	for _, addr := range []string{
		net.JoinHostPort(n.address(), strconv.Itoa(nativePort)),
		net.JoinHostPort(n.address(), strconv.Itoa(storagePort)),
		net.JoinHostPort("127.0.0.1", strconv.Itoa(n.c.jmxPort(n.index))),
	} {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("node %d cannot start: %s is already in use by another process (find it with `ss -ltnp` and stop it, or point CASSANDRA_CONTACT_POINTS at that cluster instead): %w", n.index, addr, err)
		}
		l.Close()
	}
	return nil
}

func (n *node) writeConfig() error {
	for _, sub := range []string{"conf", "logs", "tmp", "data", "commitlog", "saved_caches", "hints", "cdc_raw"} {
		if err := os.MkdirAll(filepath.Join(n.dir, sub), 0o755); err != nil {
			return fmt.Errorf("create node %d folder: %w", n.index, err)
		}
	}
	seeds := make([]string, n.c.cfg.Nodes)
	for i := range seeds {
		seeds[i] = net.JoinHostPort(n.c.Address(i+1), strconv.Itoa(storagePort))
	}
	jamm, err := findJar(n.c.jars.path(), "jamm-")
	if err != nil {
		return err
	}
	conf := filepath.Join(n.dir, "conf")
	data := map[string]any{
		"Index":        n.index,
		"Address":      n.address(),
		"Dir":          n.dir,
		"ConfDir":      conf,
		"Console":      false,
		"Seeds":        strings.Join(seeds, ","),
		"InitialToken": n.c.token(n.index),
		"DC":           n.c.placement(n.index).dc,
		"Rack":         n.c.placement(n.index).pos,
		"HeapMB":       n.c.cfg.HeapMB,
		"PaxosVariant": n.c.cfg.PaxosVariant,
		"GC":           n.c.cfg.GC,
		"G1PauseMS":    n.c.cfg.G1PauseMS,
		"Memtable":     n.c.cfg.Memtable,
		"GCLog":        n.gcLogPath(),
		"JMXPort":      n.c.jmxPort(n.index),
		"PasswordAuth": n.c.cfg.Security != nil && n.c.cfg.Security.PasswordAuth,
		"TLSKeystore":  tlsKeystore(n.c.cfg.Security),
		"LibDir":       n.c.jars.path(),
		"JammJar":      jamm,
		"ModuleFlags":  jdkModuleFlags,
	}
	return renderNodeConf(conf, data)
}

// renderNodeConf writes a node's configuration into conf from the
// templates: cassandra.yaml, logback.xml, cassandra-rackdc.properties,
// jvm17.options, and nodetool's logback-tools.xml.
func renderNodeConf(conf string, data map[string]any) error {
	for tmpl, dest := range map[string]string{
		"cassandra.yaml.tmpl":              "cassandra.yaml",
		"logback.xml.tmpl":                 "logback.xml",
		"cassandra-rackdc.properties.tmpl": "cassandra-rackdc.properties",
		"jvm17.options.tmpl":               "jvm17.options",
	} {
		if err := renderFile(tmpl, filepath.Join(conf, dest), data); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(conf, "logback-tools.xml"), []byte(logbackTools), 0o644)
}

// logbackTools is nodetool's logging: to the console only, at WARN.
const logbackTools = `<configuration><appender name="E" class="ch.qos.logback.core.ConsoleAppender"><target>System.err</target>` +
	`<encoder><pattern>%msg%n</pattern></encoder></appender><root level="WARN"><appender-ref ref="E"/></root></configuration>`

// jvmArgs reads the node's option file: one option a line, '#' comments.
func (n *node) jvmArgs() ([]string, error) {
	f, err := os.Open(filepath.Join(n.dir, "conf", "jvm17.options"))
	if err != nil {
		return nil, fmt.Errorf("read node %d JVM options: %w", n.index, err)
	}
	defer f.Close()
	var args []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line != "" && !strings.HasPrefix(line, "#") {
			args = append(args, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	// The conf folder comes first on the class path: the snitch reads
	// cassandra-rackdc.properties from there.
	classpath := filepath.Join(n.dir, "conf") + ":" + filepath.Join(n.c.jars.path(), "*")
	return append(args, "-cp", classpath, "org.apache.cassandra.service.CassandraDaemon"), nil
}

func portAnswers(ctx context.Context, host string, port int) bool {
	d := net.Dialer{Timeout: time.Second}
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return false
	}
	conn.Close()
	return true
}
