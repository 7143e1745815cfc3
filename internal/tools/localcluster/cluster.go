package localcluster

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
)

//go:embed templates/*.tmpl
var templates embed.FS

// Config says where the cluster lives and how big it is. The zero value of
// each field means its default.
type Config struct {
	// Nodes is the number of nodes, 1 to 9; default 3. Node i listens on
	// 127.0.0.(FirstAddress+i-1).
	Nodes int
	// FirstAddress is the last octet of node 1's address, 1 to 254; default
	// 1. A second cluster beside the main one starts past its nodes (e.g. 4).
	FirstAddress int
	// DCs is the number of data centres the nodes are laid out in, 1 to
	// Nodes; default 1. The nodes are split into consecutive groups, dc1
	// first (4 nodes in 2 DCs: nodes 1-2 in dc1, 3-4 in dc2; an uneven split
	// gives the earlier DCs one node more), each node on a rack of its own
	// within its DC, and each DC's tokens balanced on their own.
	DCs int
	// Security, if set, makes clients log in and use TLS.
	Security *Security
	// Version is the cassandra-all release to run, such as "5.0.8";
	// default CassandraVersion.
	Version string
	// CacheDir holds fetched jars, shared by every checkout; default
	// $XDG_CACHE_HOME/orderd or ~/.cache/orderd.
	CacheDir string
	// StateDir holds each node's configuration, data, logs and pid file;
	// default .cluster in the current folder.
	StateDir string
	// HeapMB is each node's Java heap; default 1024.
	HeapMB int
	// PaxosVariant is the LWT protocol, v1 or v2; default v2. It applies
	// from the next start of each node.
	PaxosVariant string
	// GC is each node's garbage collector, "g1" or "zgc"; default g1. ZGC
	// stops the JVM for well under a millisecond at a time and does its work
	// beside the application, at the cost of CPU and heap headroom; G1 stops
	// it for a young collection at a time, as long as G1PauseMS allows. It
	// applies from the next start of each node. Either way every node logs
	// its collections to logs/gc.log (the pauses a benchmark reads).
	GC string
	// G1PauseMS is G1's pause-time goal (MaxGCPauseMillis); default 300,
	// Cassandra's own jvm17-server.options setting. Ignored with ZGC.
	G1PauseMS int
	// Memtable is how each node keeps its memtables: "trie" (tries whose
	// cells live off the Java heap, Cassandra 5.0's cassandra-latest.yaml)
	// or "skiplist" (skip lists on the heap, its cassandra.yaml); default
	// trie: on two shared cores it halved the benchmark rounds a node
	// stopped in for over 100 ms and cut the cluster's CPU per order
	// (docs/benchmarks-gc.md). It applies from the next start of each node.
	Memtable string
	// StartTimeout bounds the wait for one start of the whole cluster or one
	// node; default 4 minutes.
	StartTimeout time.Duration
	// Log receives progress lines; default os.Stderr.
	Log io.Writer
}

// Security is what a client of a secured cluster needs.
type Security struct {
	// PasswordAuth turns on PasswordAuthenticator (the superuser is
	// cassandra/cassandra until changed; CassandraRoleManager holds roles).
	PasswordAuth bool
	// ClientTLSKeystore, if set, is a PEM file holding the nodes' private
	// key and certificate chain: clients must then use TLS
	// (PEMBasedSslContextFactory; the certificate must name every node's
	// address).
	ClientTLSKeystore string
}

// CassandraVersion is the one Cassandra release orderd is developed and
// tested against: the local cluster's default, compose.yaml's image, the
// image deploy/docker/images/build.sh builds and the K8ssandra example's
// serverVersion. A test of this package reads each place and fails if one
// differs. Moving to another release is a change of all of them at once,
// after the e2e suite passed on it (CASSANDRA_VERSION runs the local
// cluster on another release meanwhile).
const CassandraVersion = "5.0.9"

// defaultDirs fills in a cache folder (the user's cache, orderd/) and a
// state folder (defaultState) left empty, and makes the state folder
// absolute: the processes started from it run in other folders.
func defaultDirs(cacheDir, stateDir *string, defaultState string) error {
	if *cacheDir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return fmt.Errorf("find a cache folder (set CacheDir): %w", err)
		}
		*cacheDir = filepath.Join(base, "orderd")
	}
	if *stateDir == "" {
		*stateDir = defaultState
	}
	abs, err := filepath.Abs(*stateDir)
	if err != nil {
		return fmt.Errorf("state folder %s: %w", *stateDir, err)
	}
	*stateDir = abs
	return nil
}

func (c *Config) setDefaults() error {
	if c.Version == "" {
		c.Version = CassandraVersion
	}
	if c.Nodes == 0 {
		c.Nodes = 3
	}
	if c.FirstAddress == 0 {
		c.FirstAddress = 1
	}
	if c.Nodes < 1 || c.Nodes > 9 {
		return fmt.Errorf("nodes must be 1 to 9, got %d", c.Nodes)
	}
	if c.FirstAddress < 1 || c.FirstAddress+c.Nodes-1 > maxAddress {
		return fmt.Errorf("nodes must be on 127.0.0.1-%d, got %d from 127.0.0.%d", maxAddress, c.Nodes, c.FirstAddress)
	}
	if c.DCs == 0 {
		c.DCs = 1
	}
	if c.DCs < 1 || c.DCs > c.Nodes {
		return fmt.Errorf("data centres must be 1 to the number of nodes (%d), got %d", c.Nodes, c.DCs)
	}
	if err := defaultDirs(&c.CacheDir, &c.StateDir, ".cluster"); err != nil {
		return err
	}
	if c.HeapMB == 0 {
		c.HeapMB = 1024
	}
	for _, choice := range []struct {
		what    string
		setting *string
		allowed []string // the first is the default
	}{
		{"paxos variant", &c.PaxosVariant, []string{"v2", "v1"}},
		{"garbage collector", &c.GC, []string{"g1", "zgc"}},
		{"memtable", &c.Memtable, []string{"trie", "skiplist"}},
	} {
		if *choice.setting == "" {
			*choice.setting = choice.allowed[0]
		}
		if !slices.Contains(choice.allowed, *choice.setting) {
			return fmt.Errorf("%s %q: use %s", choice.what, *choice.setting, strings.Join(choice.allowed, " or "))
		}
	}
	if c.G1PauseMS == 0 {
		c.G1PauseMS = 300
	}
	if c.G1PauseMS < 1 {
		return fmt.Errorf("G1 pause goal %d ms: want a positive number of milliseconds", c.G1PauseMS)
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 4 * time.Minute
	}
	if c.Log == nil {
		c.Log = os.Stderr
	}
	return nil
}

// maxAddress is the highest last octet a node may listen on (its JMX port,
// JMXPort, is then 32400).
const maxAddress = 254

// Cluster controls the nodes that live under one state folder.
type Cluster struct {
	cfg Config

	jars runtimeDir // set by the first start
}

// New validates cfg and returns a handle; it starts nothing.
func New(cfg Config) (*Cluster, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.CacheDir, 0o755); err != nil {
		return nil, fmt.Errorf("create cache folder: %w", err)
	}
	return &Cluster{cfg: cfg}, nil
}

// Nodes is the number of nodes in the cluster.
func (c *Cluster) Nodes() int { return c.cfg.Nodes }

// StateDir is the folder holding every node's data and logs.
func (c *Cluster) StateDir() string { return c.cfg.StateDir }

// Address is node i's listen address (1-based).
func (c *Cluster) Address(i int) string { return fmt.Sprintf("127.0.0.%d", c.cfg.FirstAddress+i-1) }

// DataCenters is the number of data centres the nodes are laid out in.
func (c *Cluster) DataCenters() int { return c.cfg.DCs }

// DataCenter is the name of node i's data centre: dc1, dc2, ...
func (c *Cluster) DataCenter(i int) string { return fmt.Sprintf("dc%d", c.placement(i).dc) }

// ContactPointsIn lists the addresses of the nodes of data centre dc.
func (c *Cluster) ContactPointsIn(dc string) []string {
	var out []string
	for i := 1; i <= c.cfg.Nodes; i++ {
		if c.DataCenter(i) == dc {
			out = append(out, c.Address(i))
		}
	}
	return out
}

// placement is where node i sits: its data centre (1-based), its position
// among that DC's nodes (1-based; also its rack) and how many nodes the DC has.
type placement struct{ dc, pos, size int }

func (c *Cluster) placement(i int) placement {
	n, d := c.cfg.Nodes, c.cfg.DCs
	dc := (i-1)*d/n + 1
	first, size := 0, 0 // first: the first node of dc
	for j := 1; j <= n; j++ {
		if (j-1)*d/n+1 == dc {
			if first == 0 {
				first = j
			}
			size++
		}
	}
	return placement{dc: dc, pos: i - first + 1, size: size}
}

// token is node i's initial token: balanced over its DC's nodes, and
// offset by the DC's number so that no two DCs share a token (ccm does the
// same). With one DC it is initialToken(i, Nodes).
func (c *Cluster) token(i int) string {
	p := c.placement(i)
	tok, _ := strconv.ParseInt(initialToken(p.pos, p.size), 10, 64)
	return strconv.FormatInt(tok+int64(100*(p.dc-1)), 10)
}

// jmxPort is node i's JMX port: by its address, so that two clusters side
// by side never share one.
func (c *Cluster) jmxPort(i int) int { return JMXPort(c.cfg.FirstAddress + i - 1) }

// ContactPoints lists every node's address.
func (c *Cluster) ContactPoints() []string {
	out := make([]string, c.cfg.Nodes)
	for i := range out {
		out[i] = c.Address(i + 1)
	}
	return out
}

// LogPath is node i's Cassandra log.
func (c *Cluster) LogPath(i int) string { return filepath.Join(c.node(i).dir, "logs", "system.log") }

// Fetch makes sure the Cassandra runtime is in the cache.
func (c *Cluster) Fetch(ctx context.Context) error {
	_, err := c.runtime(ctx)
	return err
}

func (c *Cluster) runtime(ctx context.Context) (string, error) {
	return c.jars.get(ctx, c.cfg.CacheDir, cassandraRuntime, c.cfg.Version, c.logf)
}

// Up starts every node that is not running and waits until all are
// Up/Normal with their native port answering. It returns how long that took.
func (c *Cluster) Up(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	if err := checkJava(); err != nil {
		return 0, err
	}
	if _, err := c.runtime(ctx); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.StartTimeout)
	defer cancel()
	// Every node is a seed, so nodes may start together.
	g, gctx := errgroup.WithContext(ctx)
	for i := 1; i <= c.cfg.Nodes; i++ {
		g.Go(func() error { return c.startNode(gctx, i) })
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	if err := c.waitAllNormal(ctx); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// Down stops every running node gracefully (SIGKILL after a grace period).
func (c *Cluster) Down(ctx context.Context) error {
	var g errgroup.Group
	for i := 1; i <= c.cfg.Nodes; i++ {
		g.Go(func() error { return c.StopNode(ctx, i) })
	}
	return g.Wait()
}

// Wipe stops every node and deletes the state folder (data, logs, configs).
func (c *Cluster) Wipe(ctx context.Context) error {
	if err := c.Down(ctx); err != nil {
		return err
	}
	if err := os.RemoveAll(c.cfg.StateDir); err != nil {
		return fmt.Errorf("delete %s: %w", c.cfg.StateDir, err)
	}
	return nil
}

// Pid is node i's process id, or 0 when it is not running.
func (c *Cluster) Pid(i int) int { return c.node(i).pid() }

// Running reports whether node i's process is alive.
func (c *Cluster) Running(i int) bool { return c.node(i).pid() > 0 }

// Reachable reports whether every node's native port accepts connections.
func (c *Cluster) Reachable(ctx context.Context) bool {
	for i := 1; i <= c.cfg.Nodes; i++ {
		if !portAnswers(ctx, c.Address(i), nativePort) {
			return false
		}
	}
	return true
}

// StartNode starts node i (if it is not running) and waits until the whole
// cluster sees it Up/Normal.
func (c *Cluster) StartNode(ctx context.Context, i int) error {
	if err := c.checkIndex(i); err != nil {
		return err
	}
	if _, err := c.runtime(ctx); err != nil {
		return err
	}
	startCtx, cancel := context.WithTimeout(ctx, c.cfg.StartTimeout)
	defer cancel()
	if err := c.startNode(startCtx, i); err != nil {
		return err
	}
	if err := c.waitAllNormal(startCtx); err != nil {
		return err
	}
	return c.WaitSchemaAgreement(ctx) // bounded on its own, repairs included
}

// StopNode stops node i gracefully: SIGTERM runs Cassandra's shutdown hook,
// which flushes and leaves gossip; SIGKILL follows after 90 s.
func (c *Cluster) StopNode(ctx context.Context, i int) error {
	if err := c.checkIndex(i); err != nil {
		return err
	}
	return c.node(i).stop(ctx, 90*time.Second)
}

// KillNode sends node i SIGKILL, as a crash or power loss would.
func (c *Cluster) KillNode(ctx context.Context, i int) error {
	if err := c.checkIndex(i); err != nil {
		return err
	}
	return c.node(i).stop(ctx, 0)
}

// PauseNode freezes node i with SIGSTOP, as a long GC pause or a stalled VM
// would: the process and its sockets stay, so connections to it stay open
// and requests to it hang until ResumeNode. Pausing a paused node does
// nothing; a node that is not running is an error.
func (c *Cluster) PauseNode(ctx context.Context, i int) error {
	if err := c.checkIndex(i); err != nil {
		return err
	}
	if err := c.node(i).pause(ctx); err != nil {
		return err
	}
	c.logf("node %d paused (SIGSTOP)", i)
	return nil
}

// ResumeNode continues node i with SIGCONT and waits until every running
// node sees every running node Up/Normal again. Resuming a node that is not
// paused only waits.
func (c *Cluster) ResumeNode(ctx context.Context, i int) error {
	if err := c.checkIndex(i); err != nil {
		return err
	}
	if err := c.node(i).resume(ctx); err != nil {
		return err
	}
	c.logf("node %d resumed (SIGCONT)", i)
	ctx, cancel := context.WithTimeout(ctx, c.cfg.StartTimeout)
	defer cancel()
	return c.waitAllNormal(ctx)
}

// Paused reports whether node i is running but frozen by PauseNode.
func (c *Cluster) Paused(i int) bool { return c.node(i).paused() }

// answering reports whether node i is running and not paused: only such a
// node can answer nodetool (JMX to a paused node hangs).
func (c *Cluster) answering(i int) bool { return c.Running(i) && !c.Paused(i) }

// Status runs nodetool status against the first running node that is not
// paused, and names the paused nodes below it: nodetool cannot tell a paused
// node from a dead one (both DN once convicted).
func (c *Cluster) Status(ctx context.Context) (string, error) {
	var paused []int
	for i := 1; i <= c.cfg.Nodes; i++ {
		if c.Paused(i) {
			paused = append(paused, i)
		}
	}
	for i := 1; i <= c.cfg.Nodes; i++ {
		if c.answering(i) {
			out, err := c.nodetool(ctx, i, "status")
			return out + c.pausedNote(paused), err
		}
	}
	if len(paused) > 0 {
		return c.pausedNote(paused), errors.New("every running node is paused: resume one with `cassandra-local resume-node N`")
	}
	return "", errors.New("no node is running: start the cluster with `make cluster-up`")
}

// pausedNote is the line Status adds for each paused node.
func (c *Cluster) pausedNote(paused []int) string {
	var b strings.Builder
	for _, i := range paused {
		fmt.Fprintf(&b, "PAUSED  %s  node %d is frozen by SIGSTOP (resume it with `cassandra-local resume-node %d`)\n", c.Address(i), i, i)
	}
	return b.String()
}

func (c *Cluster) nodetool(ctx context.Context, i int, args ...string) (string, error) {
	lib, err := c.runtime(ctx)
	if err != nil {
		return "", err
	}
	argv := append([]string{"-Xmx128m", "-XX:TieredStopAtLevel=1"}, jdkModuleFlags...)
	argv = append(argv,
		"-cp", filepath.Join(lib, "*"),
		"-Dlogback.configurationFile=file://"+filepath.Join(c.node(i).dir, "conf", "logback-tools.xml"),
		"org.apache.cassandra.tools.NodeTool", "-h", "127.0.0.1", "-p", fmt.Sprint(c.jmxPort(i)))
	argv = append(argv, args...)
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "java", argv...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("nodetool %s on node %d: %w: %s", strings.Join(args, " "), i, err, tail(out.String(), 5))
	}
	return out.String(), nil
}

// waitAllNormal polls nodetool status on each running node until it lists
// every running node Up/Normal. Nodes that are stopped or paused on purpose
// (a fault test) are not waited for.
func (c *Cluster) waitAllNormal(ctx context.Context) error {
	for {
		var running []int
		for i := 1; i <= c.cfg.Nodes; i++ {
			if c.answering(i) {
				running = append(running, i)
			}
		}
		ok, last := len(running) > 0, ""
		for _, i := range running {
			out, err := c.nodetool(ctx, i, "status")
			last = out
			for _, j := range running {
				ok = ok && err == nil && strings.Contains(out, "\nUN  "+c.Address(j)+" ")
			}
			if !ok {
				break
			}
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("running nodes %v not all Up/Normal before the deadline: %w; last nodetool status:\n%s", running, ctx.Err(), last)
		case <-time.After(time.Second):
		}
	}
}

// Nodetool runs nodetool with args against node i.
func (c *Cluster) Nodetool(ctx context.Context, i int, args ...string) (string, error) {
	if err := c.checkIndex(i); err != nil {
		return "", err
	}
	return c.nodetool(ctx, i, args...)
}

// schemaVersionLine is one "<version>: [addresses]" line of describecluster.
var schemaVersionLine = regexp.MustCompile(`(?m)^\s+([0-9a-f-]{36}): \[([^\]]*)\]`)

// WaitSchemaAgreement waits until every running node reports the same
// schema version. Just after a node restarts, a DDL statement racing its
// catch-up can leave it on a version of its own that it never leaves (seen
// here; nodetool resetlocalschema does not help, a restart does). After 30 s
// of disagreement the nodes outside the largest group are restarted, as an
// operator would.
//
// It waits up to 3 minutes for agreement, not counting repair restarts:
// each of those has a start's time of its own (StartTimeout), and the wait
// starts again after it (a repair that ran out of the caller's budget left
// the cluster half restarted).
func (c *Cluster) WaitSchemaAgreement(ctx context.Context) error {
	const wait = 3 * time.Minute
	deadline := time.Now().Add(wait)
	reset := time.Now().Add(30 * time.Second)
	var out string
	for {
		first := 0
		for i := 1; i <= c.cfg.Nodes && first == 0; i++ {
			if c.answering(i) {
				first = i
			}
		}
		if first == 0 {
			return errors.New("no node is running (or every running node is paused)")
		}
		var err error
		out, err = c.nodetool(ctx, first, "describecluster")
		if err == nil {
			versions := schemaVersionLine.FindAllStringSubmatch(out, -1)
			if len(versions) == 1 {
				return nil
			}
			if len(versions) > 1 && time.Now().After(reset) {
				if err := c.repairSchema(ctx, versions); err != nil {
					return err
				}
				reset, deadline = time.Now().Add(45*time.Second), time.Now().Add(wait)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nodes never agreed on the schema in %s; last describecluster:\n%s", wait, out)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("nodes never agreed on the schema: %w; last describecluster:\n%s", ctx.Err(), out)
		case <-time.After(time.Second):
		}
	}
}

// repairSchema restarts every running node outside the largest group of
// versions (describecluster's lines), each within StartTimeout.
func (c *Cluster) repairSchema(ctx context.Context, versions [][]string) error {
	best := 0
	for k, v := range versions {
		if strings.Count(v[2], ",") > strings.Count(versions[best][2], ",") {
			best = k
		}
	}
	for k, v := range versions {
		if k == best {
			continue
		}
		for _, addr := range strings.Split(v[2], ",") {
			addr = strings.TrimSpace(addr)
			for i := 1; i <= c.cfg.Nodes; i++ {
				if addr != c.Address(i) || !c.answering(i) {
					continue
				}
				c.logf("node %d disagrees on the schema (%s); restarting it", i, v[1])
				rctx, cancel := context.WithTimeout(ctx, c.cfg.StartTimeout)
				err := c.restart(rctx, i)
				cancel()
				if err != nil {
					return fmt.Errorf("restart node %d to repair its schema: %w", i, err)
				}
			}
		}
	}
	return nil
}

func (c *Cluster) restart(ctx context.Context, i int) error {
	if err := c.node(i).stop(ctx, 90*time.Second); err != nil {
		return err
	}
	if err := c.startNode(ctx, i); err != nil {
		return err
	}
	return c.waitAllNormal(ctx)
}

func (c *Cluster) checkIndex(i int) error {
	if i < 1 || i > c.cfg.Nodes {
		return fmt.Errorf("node %d does not exist: nodes are 1 to %d", i, c.cfg.Nodes)
	}
	return nil
}

func (c *Cluster) logf(format string, args ...any) {
	fmt.Fprintf(c.cfg.Log, "cassandra-local: "+format+"\n", args...)
}
