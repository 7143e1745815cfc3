package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tcexec "github.com/testcontainers/testcontainers-go/exec"
	"github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"
)

const (
	// dockerDefaultImage is the Cassandra image; CASSANDRA_IMAGE overrides it.
	dockerDefaultImage = "cassandra:5.0"
	// dockerNodes is the cluster size.
	dockerNodes = 3
	// dockerCQLPort is the native protocol port inside each container.
	dockerCQLPort = "9042/tcp"
	// dockerCQLReadyLog is what Cassandra logs once it has joined the ring and
	// opens the native protocol port. It precedes the bind by a moment, so
	// the waits below also check that the port accepts connections.
	dockerCQLReadyLog = "Starting listening for CQL clients"
	// dockerStartTimeout bounds one node's start (bootstrap included) or restart.
	dockerStartTimeout = 4 * time.Minute
	// dockerStopTimeout is StopNode's grace period before Docker sends SIGKILL.
	dockerStopTimeout = 60 * time.Second
	// dockerCleanupTimeout bounds the teardown after a failed start.
	dockerCleanupTimeout = 2 * time.Minute
	// dockerLogTailLines is how much of a failed node's log an error carries.
	dockerLogTailLines = 40
)

// dockerCassandraYAML is the configuration file the image's entrypoint edits.
const dockerCassandraYAML = "/etc/cassandra/cassandra.yaml"

// dockerPaxosV2Entrypoint replaces the image's entrypoint: it sets paxos_variant to
// v2 in cassandra.yaml, then execs the image's own entrypoint exactly as the
// default ENTRYPOINT+CMD would (docker-entrypoint.sh cassandra -f), so the
// CASSANDRA_* variables are still applied and Cassandra ends up as PID 1 and
// receives the stop signal.
//
// It drops any existing paxos_variant line first so that a restarted
// container (whose writable layer keeps the edited file) does not get a
// duplicate key. The file is rewritten in place with cat rather than sed -i:
// this script runs as root and sed -i would replace the file with a
// root-owned one that the entrypoint, which edits it again after dropping to
// the cassandra user, could no longer write.
const dockerPaxosV2Entrypoint = `set -e
conf=` + dockerCassandraYAML + `
tmp="$(mktemp)"
grep -v '^paxos_variant:' "$conf" > "$tmp" || true
printf '\npaxos_variant: v2\n' >> "$tmp"
cat "$tmp" > "$conf"
rm -f "$tmp"
exec docker-entrypoint.sh cassandra -f`

// dockerCluster is a three-node Cassandra cluster in Docker containers,
// started with testcontainers-go on a dedicated network.
//
// Addressing: each node publishes 9042 on a random host port, and
// ContactPoints returns those mapped addresses ("127.0.0.1:32768"). That is
// enough to open the first connection from the host, but the driver then
// discovers the peers from system.peers / system.local under their
// container-network IPs (172.x.y.z:9042):
//   - on Linux, where the host routes to the Docker bridge network, those
//     container IPs work as they are;
//   - where it does not (Docker Desktop on macOS/Windows, a remote engine),
//     the orderd/gocql client must be given an address translator
//     (gocql ClusterConfig.AddressTranslator) mapping each container
//     IP:9042 to its mapped host:port, or it only reaches the contact
//     points. This cluster does not provide one: that limitation is known.
//
// Mapped ports are assigned again whenever a container starts, so StartNode
// re-reads them and ContactPoints reflects the latest ones.
type dockerCluster struct {
	image string
	log   io.Writer
	tcLog dockerTCLogger

	mu    sync.Mutex
	net   *testcontainers.DockerNetwork
	nodes []*testcontainers.DockerContainer // index i-1 is node i; nil once closed
	addrs []string                          // mapped CQL host:port of each node
}

// openDocker starts a three-node cassandra:5.0 cluster with testcontainers-go.
func openDocker(ctx context.Context, log io.Writer) (Cluster, error) {
	image := os.Getenv("CASSANDRA_IMAGE")
	if image == "" {
		image = dockerDefaultImage
	}
	c := &dockerCluster{
		image: image,
		log:   log,
		tcLog: dockerTCLogger{w: log},
		nodes: make([]*testcontainers.DockerContainer, dockerNodes),
		addrs: make([]string, dockerNodes),
	}
	begin := time.Now()

	nw, err := network.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("create the Docker network for the Cassandra cluster: %w", err)
	}
	c.net = nw

	// One node at a time: Cassandra refuses concurrent bootstraps, and each
	// node waits for the seed (node 1) to be up.
	for i := 1; i <= dockerNodes; i++ {
		fmt.Fprintf(log, "e2e: starting Cassandra node %d of %d (%s, alias %s on network %s)\n", i, dockerNodes, image, dockerAlias(i), nw.Name)
		took := time.Now()
		ctr, err := c.runNode(ctx, i)
		c.nodes[i-1] = ctr // possibly non-nil on error: it is then terminated below
		var addr string
		if err == nil {
			addr, err = dockerCQLAddress(ctx, ctr)
		}
		if err != nil {
			return nil, c.abort(ctx, fmt.Errorf("start Cassandra node %d (%s, image %s): %w%s", i, dockerAlias(i), image, err, dockerLogTail(ctr)))
		}
		c.addrs[i-1] = addr
		fmt.Fprintf(log, "e2e: Cassandra node %d is up, CQL on %s (%s)\n", i, addr, time.Since(took).Round(time.Second))
	}

	upCtx, cancel := context.WithTimeout(ctx, dockerStartTimeout)
	defer cancel()
	if err := c.waitUpNormal(upCtx); err != nil {
		return nil, c.abort(ctx, err)
	}
	fmt.Fprintf(log, "e2e: %s, started in %s\n", c.Describe(), time.Since(begin).Round(time.Second))
	return c, nil
}

// abort tears down whatever openDocker started and returns cause, joined
// with any teardown error.
func (c *dockerCluster) abort(ctx context.Context, cause error) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dockerCleanupTimeout)
	defer cancel()
	if err := c.Close(cctx); err != nil {
		return errors.Join(cause, fmt.Errorf("clean up after the failed start: %w", err))
	}
	return cause
}

// runNode creates and starts node i and waits until it serves CQL.
func (c *dockerCluster) runNode(ctx context.Context, i int) (*testcontainers.DockerContainer, error) {
	return testcontainers.Run(ctx, c.image,
		testcontainers.WithLogger(c.tcLog),
		network.WithNetwork([]string{dockerAlias(i)}, c.net),
		testcontainers.WithEnv(map[string]string{
			"CASSANDRA_CLUSTER_NAME":    "orderd-e2e",
			"CASSANDRA_DC":              "dc1",
			"CASSANDRA_RACK":            fmt.Sprintf("rack%d", i),
			"CASSANDRA_ENDPOINT_SNITCH": "GossipingPropertyFileSnitch",
			"CASSANDRA_NUM_TOKENS":      "16",
			"CASSANDRA_SEEDS":           dockerAlias(1),
			"MAX_HEAP_SIZE":             "768M",
			"HEAP_NEWSIZE":              "128M",
		}),
		testcontainers.WithExposedPorts(dockerCQLPort),
		testcontainers.WithEntrypoint("sh", "-c", dockerPaxosV2Entrypoint),
		// Start runs this strategy again on a restart, where the log line
		// is already there from the previous run: StartNode replaces it
		// with one waiting for the next occurrence.
		testcontainers.WithWaitStrategyAndDeadline(dockerStartTimeout, dockerCQLReady(1)...),
	)
}

// dockerCQLReady waits for the n-th "Starting listening for CQL clients" and then
// for the mapped CQL port to accept connections. Each strategy gets the full
// timeout explicitly: one without its own timeout would default to 60 s
// whatever deadline the enclosing wait.ForAll has.
func dockerCQLReady(n int) []wait.Strategy {
	return []wait.Strategy{
		wait.ForLog(dockerCQLReadyLog).WithOccurrence(n).
			WithStartupTimeout(dockerStartTimeout).WithPollInterval(time.Second),
		wait.ForListeningPort(dockerCQLPort).
			WithStartupTimeout(dockerStartTimeout).WithPollInterval(500 * time.Millisecond),
	}
}

func dockerAlias(i int) string { return fmt.Sprintf("cassandra-%d", i) }

// dockerCQLAddress is the host:port where the host reaches ctr's CQL port.
func dockerCQLAddress(ctx context.Context, ctr *testcontainers.DockerContainer) (string, error) {
	host, err := ctr.Host(ctx)
	if err != nil {
		return "", fmt.Errorf("docker host: %w", err)
	}
	port, err := ctr.MappedPort(ctx, dockerCQLPort)
	if err != nil {
		return "", fmt.Errorf("mapped port of %s: %w", dockerCQLPort, err)
	}
	return net.JoinHostPort(host, port.Port()), nil
}

func (c *dockerCluster) Describe() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "Docker cluster (testcontainers-go), %d × %s", dockerNodes, c.image)
	if c.net != nil {
		fmt.Fprintf(&b, " on network %s", c.net.Name)
	}
	b.WriteString(":")
	for i, addr := range c.addrs {
		sep := ","
		if i == 0 {
			sep = ""
		}
		fmt.Fprintf(&b, "%s node %d %s at %s", sep, i+1, dockerAlias(i+1), addr)
	}
	return b.String()
}

// ContactPoints are the nodes' mapped CQL addresses (see dockerCluster).
func (c *dockerCluster) ContactPoints() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.addrs...)
}

func (c *dockerCluster) Nodes() int            { return dockerNodes }
func (c *dockerCluster) CanControlNodes() bool { return true }

// node returns node i's container.
func (c *dockerCluster) node(i int) (*testcontainers.DockerContainer, error) {
	if i < 1 || i > dockerNodes {
		return nil, fmt.Errorf("node %d does not exist: nodes are 1 to %d", i, dockerNodes)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nodes[i-1] == nil {
		return nil, fmt.Errorf("Cassandra node %d: the Docker cluster is closed", i)
	}
	return c.nodes[i-1], nil
}

// StopNode stops node i gracefully: docker stop sends SIGTERM, which runs
// Cassandra's shutdown hook, and SIGKILL after 60 s.
func (c *dockerCluster) StopNode(ctx context.Context, i int) error {
	ctr, err := c.node(i)
	if err != nil {
		return err
	}
	timeout := dockerStopTimeout
	if err := ctr.Stop(ctx, &timeout); err != nil {
		return fmt.Errorf("stop Cassandra node %d: %w", i, err)
	}
	return nil
}

// KillNode kills node i abruptly with Docker's kill API (SIGKILL, as
// `docker kill` does), through a Docker client from
// testcontainers.NewDockerClientWithOpts: testcontainers-go's Container has
// no kill method, and Stop with a zero timeout would send SIGTERM first.
func (c *dockerCluster) KillNode(ctx context.Context, i int) error {
	ctr, err := c.node(i)
	if err != nil {
		return err
	}
	return dockerKill(ctx, ctr, fmt.Sprintf("Cassandra node %d", i))
}

// dockerKill kills a container abruptly with Docker's kill API (SIGKILL,
// as `docker kill` does) and waits until the engine reports it exited.
func dockerKill(ctx context.Context, ctr *testcontainers.DockerContainer, what string) error {
	if st, err := ctr.State(ctx); err == nil && st != nil && !st.Running {
		return nil // already down: killing a stopped container is a Docker error
	}
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return fmt.Errorf("kill %s: docker client: %w", what, err)
	}
	defer cli.Close()
	if _, err := cli.ContainerKill(ctx, ctr.GetContainerID(), client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		return fmt.Errorf("kill %s: %w", what, err)
	}
	// The engine reports the container exited asynchronously; wait for it so
	// that a start right after this really restarts it.
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		st, err := ctr.State(wctx)
		if err == nil && st != nil && !st.Running {
			return nil
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("kill %s: still running after SIGKILL: %w", what, wctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// PauseNode freezes node i with `docker pause` (the cgroup freezer, the
// container equivalent of SIGSTOP): its sockets stay open and requests to
// it hang until ResumeNode.
func (c *dockerCluster) PauseNode(ctx context.Context, i int) error {
	ctr, err := c.node(i)
	if err != nil {
		return err
	}
	if st, err := ctr.State(ctx); err == nil && st != nil && st.Paused {
		return nil
	}
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return fmt.Errorf("pause Cassandra node %d: docker client: %w", i, err)
	}
	defer cli.Close()
	if _, err := cli.ContainerPause(ctx, ctr.GetContainerID(), client.ContainerPauseOptions{}); err != nil {
		return fmt.Errorf("pause Cassandra node %d: %w", i, err)
	}
	return nil
}

// ResumeNode unpauses node i (`docker unpause`) and waits until every
// running node sees every running node Up/Normal, bounded by 4 minutes.
func (c *dockerCluster) ResumeNode(ctx context.Context, i int) error {
	ctr, err := c.node(i)
	if err != nil {
		return err
	}
	if st, err := ctr.State(ctx); err != nil || st == nil || st.Paused {
		cli, err := testcontainers.NewDockerClientWithOpts(ctx)
		if err != nil {
			return fmt.Errorf("resume Cassandra node %d: docker client: %w", i, err)
		}
		defer cli.Close()
		if _, err := cli.ContainerUnpause(ctx, ctr.GetContainerID(), client.ContainerUnpauseOptions{}); err != nil {
			return fmt.Errorf("resume Cassandra node %d: %w", i, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, dockerStartTimeout)
	defer cancel()
	return c.waitUpNormal(ctx)
}

// StartNode starts node i (if it is not running), waits until it serves CQL
// again (the port accepts connections and it logged "Starting listening for
// CQL clients" after this start), re-reads its mapped port, and waits until
// every running node sees every running node Up/Normal. All bounded by
// 4 minutes.
func (c *dockerCluster) StartNode(ctx context.Context, i int) error {
	ctr, err := c.node(i)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, dockerStartTimeout)
	defer cancel()

	st, err := ctr.State(ctx)
	if err != nil {
		return fmt.Errorf("start Cassandra node %d: state: %w", i, err)
	}
	want := 1 // already running: any occurrence will do
	if st == nil || !st.Running {
		// Docker keeps a container's logs across restarts, so the line is
		// already there from the previous run: wait for one more.
		before, err := dockerCountLog(ctx, ctr, dockerCQLReadyLog)
		if err != nil {
			return fmt.Errorf("start Cassandra node %d: read its log: %w", i, err)
		}
		want = before + 1
		// Start runs the container's WaitingFor (its readiness hook): make
		// it wait for this start's line rather than pass at once on the
		// previous run's, and only then probe the port. The wait below is
		// then immediate; it matters when the node was already running.
		ctr.WaitingFor = wait.ForAll(dockerCQLReady(want)...).WithDeadline(dockerStartTimeout)
		if err := ctr.Start(ctx); err != nil {
			return fmt.Errorf("start Cassandra node %d: %w%s", i, err, dockerLogTail(ctr))
		}
	}
	if err := wait.ForAll(dockerCQLReady(want)...).WithDeadline(dockerStartTimeout).WaitUntilReady(ctx, ctr); err != nil {
		return fmt.Errorf("start Cassandra node %d: not serving CQL: %w%s", i, err, dockerLogTail(ctr))
	}
	addr, err := dockerCQLAddress(ctx, ctr) // a new host port after a restart
	if err != nil {
		return fmt.Errorf("start Cassandra node %d: %w", i, err)
	}
	c.mu.Lock()
	c.addrs[i-1] = addr
	c.mu.Unlock()
	if err := c.waitUpNormal(ctx); err != nil {
		return fmt.Errorf("start Cassandra node %d: %w", i, err)
	}
	fmt.Fprintf(c.log, "e2e: Cassandra node %d is back, CQL on %s\n", i, addr)
	return nil
}

// dockerRunningNode is a running container and its IP on the cluster network.
type dockerRunningNode struct {
	i   int
	ctr *testcontainers.DockerContainer
	ip  string
}

// running lists the running nodes.
func (c *dockerCluster) running(ctx context.Context) ([]dockerRunningNode, error) {
	c.mu.Lock()
	nodes := append([]*testcontainers.DockerContainer(nil), c.nodes...)
	netName := ""
	if c.net != nil {
		netName = c.net.Name
	}
	c.mu.Unlock()
	var out []dockerRunningNode
	for idx, ctr := range nodes {
		if ctr == nil {
			continue
		}
		insp, err := ctr.Inspect(ctx)
		if err != nil {
			return nil, fmt.Errorf("inspect Cassandra node %d: %w", idx+1, err)
		}
		if insp.State == nil || !insp.State.Running {
			continue
		}
		n := dockerRunningNode{i: idx + 1, ctr: ctr}
		if insp.NetworkSettings != nil {
			if ep := insp.NetworkSettings.Networks[netName]; ep != nil && ep.IPAddress.IsValid() {
				n.ip = ep.IPAddress.String()
			}
		}
		if n.ip == "" {
			return nil, fmt.Errorf("Cassandra node %d has no IP address on network %s", n.i, netName)
		}
		out = append(out, n)
	}
	return out, nil
}

// waitUpNormal polls `nodetool status` in every running node until each
// lists every running node Up/Normal, like the local launcher does.
func (c *dockerCluster) waitUpNormal(ctx context.Context) error {
	for {
		nodes, err := c.running(ctx)
		if err != nil {
			return err
		}
		ok, last := true, ""
		for _, n := range nodes {
			out, err := dockerNodetoolStatus(ctx, n.ctr)
			last = fmt.Sprintf("node %d: %s", n.i, out)
			if err != nil {
				last = fmt.Sprintf("node %d: %v", n.i, err)
			}
			if err != nil || !dockerAllUpNormal(out, nodes) {
				ok = false
				break
			}
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("Cassandra nodes not all Up/Normal before the deadline: %w; last nodetool status from %s", ctx.Err(), last)
		case <-time.After(2 * time.Second):
		}
	}
}

// dockerNodetoolStatus runs `nodetool status` inside ctr.
func dockerNodetoolStatus(ctx context.Context, ctr *testcontainers.DockerContainer) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	code, r, err := ctr.Exec(ctx, []string{"nodetool", "status"}, tcexec.Multiplexed())
	if err != nil {
		return "", fmt.Errorf("nodetool status: %w", err)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return string(b), fmt.Errorf("nodetool status: read output: %w", err)
	}
	if code != 0 {
		return string(b), fmt.Errorf("nodetool status: exit code %d: %s", code, dockerLastLines(string(b), 5))
	}
	return string(b), nil
}

// dockerAllUpNormal reports whether nodetool status output lists every node's IP
// as UN. Cassandra prints the address without the port unless asked
// (--print-port), but accept both.
func dockerAllUpNormal(status string, nodes []dockerRunningNode) bool {
	un := map[string]bool{}
	for _, line := range strings.Split(status, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "UN" {
			addr := f[1]
			if host, _, err := net.SplitHostPort(addr); err == nil {
				addr = host
			}
			un[strings.Trim(addr, "/[]")] = true
		}
	}
	for _, n := range nodes {
		if !un[n.ip] {
			return false
		}
	}
	return true
}

// Close terminates (stops and removes, with their volumes) the three
// containers, then removes the network.
func (c *dockerCluster) Close(ctx context.Context) error {
	c.mu.Lock()
	nodes, nw := c.nodes, c.net
	c.nodes, c.net = make([]*testcontainers.DockerContainer, dockerNodes), nil
	c.mu.Unlock()
	var errs []error
	for idx, ctr := range nodes {
		if ctr == nil {
			continue
		}
		// No grace: the cluster's data is thrown away anyway.
		if err := ctr.Terminate(ctx, testcontainers.StopTimeout(0)); err != nil {
			errs = append(errs, fmt.Errorf("terminate Cassandra node %d: %w", idx+1, err))
		}
	}
	if nw != nil {
		if err := nw.Remove(ctx); err != nil {
			errs = append(errs, fmt.Errorf("remove Docker network %s: %w", nw.Name, err))
		}
	}
	return errors.Join(errs...)
}

// dockerCountLog counts the occurrences of s in ctr's log.
func dockerCountLog(ctx context.Context, ctr *testcontainers.DockerContainer, s string) (int, error) {
	rc, err := ctr.Logs(ctx)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return 0, err
	}
	return strings.Count(string(b), s), nil
}

// dockerLogTail is the end of ctr's log, formatted to follow an error message,
// or "" if there is no container or its log cannot be read.
func dockerLogTail(ctr *testcontainers.DockerContainer) string {
	if ctr == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	rc, err := ctr.Logs(ctx)
	if err != nil {
		return ""
	}
	defer rc.Close()
	b, _ := io.ReadAll(rc) // keep what was read even if the stream broke
	t := dockerLastLines(string(b), dockerLogTailLines)
	if t == "" {
		return ""
	}
	return fmt.Sprintf("\nlast %d lines of its log:\n%s", dockerLogTailLines, t)
}

// dockerLastLines is the last n lines of s.
func dockerLastLines(s string, n int) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// dockerTCLogger sends testcontainers-go's messages to the run's log. Messages
// that carry a whole container log (testcontainers-go prints one when a
// start fails) are cut to their end: the error carries the tail too.
type dockerTCLogger struct{ w io.Writer }

func (l dockerTCLogger) Printf(format string, args ...any) {
	const limit = 4096
	msg := strings.TrimRight(fmt.Sprintf(format, args...), "\n")
	if len(msg) > limit {
		first, _, _ := strings.Cut(msg, "\n")
		msg = fmt.Sprintf("%s\n[... %d bytes cut ...]\n%s", first, len(msg)-limit, msg[len(msg)-limit:])
	}
	fmt.Fprintf(l.w, "e2e: testcontainers: %s\n", msg)
}
