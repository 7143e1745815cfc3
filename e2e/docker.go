package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/atlasmart/orderd/internal/tools/localcluster"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tcexec "github.com/testcontainers/testcontainers-go/exec"
	"github.com/testcontainers/testcontainers-go/wait"
)

const (
	// dockerDefaultImage is the Cassandra image; CASSANDRA_IMAGE overrides it
	// (deploy/docker/images/build.sh builds orderd/cassandra:5.0.9 where no
	// registry is reachable). Either image takes the same variables.
	dockerDefaultImage = "cassandra:5.0.9" // localcluster.CassandraVersion
	// dockerNodes is the cluster size.
	dockerNodes = 3
	// dockerFirstAddress is node 1's loopback address, 127.0.0.11; node i
	// has 127.0.0.(10+i). Apart from the local launcher's 127.0.0.1-3, so
	// both clusters can run on one machine.
	dockerFirstAddress = 11
	// dockerLabel marks the containers this harness starts, so a run can
	// remove what a killed run left behind (their addresses are fixed).
	dockerLabel = "org.atlasmart.orderd.e2e"
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
// started with testcontainers-go.
//
// Addressing: the containers share the host's network and each node binds
// its own loopback address (dockerAddress), as the local launcher's nodes
// do: the driver reaches every node at the address the node gossips, with
// no port mapping and no address translation, and no bridge network is
// needed (where Docker runs without one). JMX is local to each node, so
// each gets its own port (dockerJMXPort).
type dockerCluster struct {
	image string
	log   io.Writer
	tcLog dockerTCLogger

	mu    sync.Mutex
	nodes []*testcontainers.DockerContainer // index i-1 is node i; nil once closed
}

// dockerAddress is node i's address (all its ports bind there).
func dockerAddress(i int) string { return fmt.Sprintf("127.0.0.%d", dockerFirstAddress+i-1) }

// dockerJMXPort is node i's JMX port, by the local launcher's rule.
func dockerJMXPort(i int) int { return localcluster.JMXPort(dockerFirstAddress + i - 1) }

// openDocker starts a three-node Cassandra cluster with testcontainers-go.
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
	}
	begin := time.Now()
	if err := dockerRemoveLeftovers(ctx, log, "cassandra"); err != nil {
		return nil, err
	}

	// One node at a time: Cassandra refuses concurrent bootstraps, and each
	// node waits for the seed (node 1) to be up.
	for i := 1; i <= dockerNodes; i++ {
		fmt.Fprintf(log, "e2e: starting Cassandra node %d of %d (%s on %s, host network)\n", i, dockerNodes, image, dockerAddress(i))
		took := time.Now()
		ctr, err := c.runNode(ctx, i)
		c.nodes[i-1] = ctr // possibly non-nil on error: it is then terminated below
		if err == nil {
			err = dockerWaitCQL(ctx, i)
		}
		if err != nil {
			return nil, c.abort(ctx, fmt.Errorf("start Cassandra node %d (image %s): %w%s", i, image, err, dockerLogTail(ctr)))
		}
		fmt.Fprintf(log, "e2e: Cassandra node %d is up, CQL on %s:9042 (%s)\n", i, dockerAddress(i), time.Since(took).Round(time.Second))
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

// runNode creates and starts node i and waits until it logs that it serves CQL.
func (c *dockerCluster) runNode(ctx context.Context, i int) (*testcontainers.DockerContainer, error) {
	addr, jmx := dockerAddress(i), strconv.Itoa(dockerJMXPort(i))
	return testcontainers.Run(ctx, c.image,
		testcontainers.WithLogger(c.tcLog),
		testcontainers.WithLabels(map[string]string{dockerLabel: "cassandra"}),
		dockerHostNetwork(),
		testcontainers.WithEnv(map[string]string{
			"CASSANDRA_CLUSTER_NAME":    "orderd-e2e",
			"CASSANDRA_DC":              "dc1",
			"CASSANDRA_RACK":            fmt.Sprintf("rack%d", i),
			"CASSANDRA_ENDPOINT_SNITCH": "GossipingPropertyFileSnitch",
			"CASSANDRA_NUM_TOKENS":      "16",
			"CASSANDRA_LISTEN_ADDRESS":  addr,
			"CASSANDRA_RPC_ADDRESS":     addr,
			"CASSANDRA_SEEDS":           dockerAddress(1),
			"MAX_HEAP_SIZE":             "768M",
			"HEAP_NEWSIZE":              "128M",
			// JMX_PORT for orderd/cassandra; the official image's
			// cassandra-env.sh fixes JMX_PORT, and a later -D wins.
			"JMX_PORT":       jmx,
			"JVM_EXTRA_OPTS": "-Dcassandra.jmx.local.port=" + jmx,
		}),
		testcontainers.WithEntrypoint("sh", "-c", dockerPaxosV2Entrypoint),
		// Start runs this strategy again on a restart, where the log line
		// is already there from the previous run: StartNode replaces it
		// with one waiting for the next occurrence.
		testcontainers.WithWaitStrategyAndDeadline(dockerStartTimeout, dockerCQLLogged(1)),
	)
}

// dockerHostNetwork puts a container on the host's network and on no other.
// (Where Docker has no default bridge, as with dockerd --bridge=none,
// testcontainers-go would attach every container to a network of its own.)
func dockerHostNetwork() testcontainers.CustomizeRequestOption {
	return testcontainers.CustomizeRequestOption(func(req *testcontainers.GenericContainerRequest) error {
		for _, opt := range []testcontainers.CustomizeRequestOption{
			testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) { hc.NetworkMode = "host" }),
			testcontainers.WithEndpointSettingsModifier(func(m map[string]*network.EndpointSettings) { clear(m) }),
		} {
			if err := opt(req); err != nil {
				return err
			}
		}
		return nil
	})
}

// dockerCQLLogged waits for the n-th "Starting listening for CQL clients".
// It gets the full timeout explicitly: a strategy without its own would
// default to 60 s whatever deadline encloses it.
func dockerCQLLogged(n int) wait.Strategy {
	return wait.ForLog(dockerCQLReadyLog).WithOccurrence(n).
		WithStartupTimeout(dockerStartTimeout).WithPollInterval(time.Second)
}

// dockerWaitCQL waits until node i's CQL port accepts connections.
func dockerWaitCQL(ctx context.Context, i int) error {
	ctx, cancel := context.WithTimeout(ctx, dockerStartTimeout)
	defer cancel()
	return dockerPort(net.JoinHostPort(dockerAddress(i), "9042")).WaitUntilReady(ctx, nil)
}

// dockerPort is a wait.Strategy: the address, on the host network, accepts
// connections. (No port is published, so wait.ForListeningPort has nothing
// to look at.) It waits as long as its context lets it.
type dockerPort string

func (a dockerPort) WaitUntilReady(ctx context.Context, _ wait.StrategyTarget) error {
	for {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", string(a))
		if err == nil {
			return conn.Close()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("port %s: %w", a, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// dockerRemoveLeftovers removes the containers of kind (dockerLabel's value)
// that an earlier, killed run left: they hold the addresses this run needs.
func dockerRemoveLeftovers(ctx context.Context, log io.Writer, kind string) error {
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return fmt.Errorf("docker client: %w", err)
	}
	defer cli.Close()
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", dockerLabel+"="+kind)})
	if err != nil {
		return fmt.Errorf("list leftover %s containers: %w", kind, err)
	}
	for _, ctr := range list.Items {
		fmt.Fprintf(log, "e2e: removing %s container %.12s left by an earlier run\n", kind, ctr.ID)
		if _, err := cli.ContainerRemove(ctx, ctr.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
			return fmt.Errorf("remove leftover %s container %.12s: %w", kind, ctr.ID, err)
		}
	}
	return nil
}

func (c *dockerCluster) Describe() string {
	return fmt.Sprintf("Docker cluster (testcontainers-go, host network), %d × %s on %v", dockerNodes, c.image, c.ContactPoints())
}

// ContactPoints are the nodes' addresses.
func (c *dockerCluster) ContactPoints() []string {
	out := make([]string, dockerNodes)
	for i := range out {
		out[i] = dockerAddress(i + 1)
	}
	return out
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
	// runc gives up freezing a container whose processes do not all stop
	// within its short timeout ("unable to freeze"), which a JVM busy with
	// I/O can cause on a loaded machine; the container is left running,
	// so the pause is simply asked for again.
	var perr error
	for range pauseTries {
		if _, perr = cli.ContainerPause(ctx, ctr.GetContainerID(), client.ContainerPauseOptions{}); perr == nil ||
			!strings.Contains(perr.Error(), "unable to freeze") {
			break
		}
		time.Sleep(time.Second)
	}
	if perr != nil {
		return fmt.Errorf("pause Cassandra node %d: %w", i, perr)
	}
	return nil
}

// pauseTries bounds the pauses PauseNode asks for when runc could not
// freeze the container.
const pauseTries = 3

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
// again (it logged "Starting listening for CQL clients" after this start and
// the port accepts connections), and waits until every running node sees
// every running node Up/Normal. All bounded by 4 minutes.
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
	if st == nil || !st.Running {
		// Docker keeps a container's logs across restarts, so the line is
		// already there from the previous run: wait for one more. Start
		// runs the container's WaitingFor (its readiness hook).
		before, err := dockerCountLog(ctx, ctr, dockerCQLReadyLog)
		if err != nil {
			return fmt.Errorf("start Cassandra node %d: read its log: %w", i, err)
		}
		ctr.WaitingFor = dockerCQLLogged(before + 1)
		if err := ctr.Start(ctx); err != nil {
			return fmt.Errorf("start Cassandra node %d: %w%s", i, err, dockerLogTail(ctr))
		}
	}
	if err := dockerWaitCQL(ctx, i); err != nil {
		return fmt.Errorf("start Cassandra node %d: not serving CQL: %w%s", i, err, dockerLogTail(ctr))
	}
	if err := c.waitUpNormal(ctx); err != nil {
		return fmt.Errorf("start Cassandra node %d: %w", i, err)
	}
	fmt.Fprintf(c.log, "e2e: Cassandra node %d is back, CQL on %s:9042\n", i, dockerAddress(i))
	return nil
}

// dockerRunningNode is a running node: its number and container.
type dockerRunningNode struct {
	i   int
	ctr *testcontainers.DockerContainer
}

// running lists the running nodes (a paused one counts as running).
func (c *dockerCluster) running(ctx context.Context) ([]dockerRunningNode, error) {
	c.mu.Lock()
	nodes := append([]*testcontainers.DockerContainer(nil), c.nodes...)
	c.mu.Unlock()
	var out []dockerRunningNode
	for idx, ctr := range nodes {
		if ctr == nil {
			continue
		}
		st, err := ctr.State(ctx)
		if err != nil {
			return nil, fmt.Errorf("state of Cassandra node %d: %w", idx+1, err)
		}
		if st != nil && st.Running {
			out = append(out, dockerRunningNode{i: idx + 1, ctr: ctr})
		}
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
			out, err := dockerNodetoolStatus(ctx, n)
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

// dockerNodetoolStatus runs `nodetool status` inside node n, on its JMX port.
func dockerNodetoolStatus(ctx context.Context, n dockerRunningNode) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	code, r, err := n.ctr.Exec(ctx, []string{"nodetool", "-p", strconv.Itoa(dockerJMXPort(n.i)), "status"}, tcexec.Multiplexed())
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

// dockerAllUpNormal reports whether nodetool status output lists every node's
// address as UN. Cassandra prints the address without the port unless asked
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
		if !un[dockerAddress(n.i)] {
			return false
		}
	}
	return true
}

// Close terminates (stops and removes, with their volumes) the three
// containers.
func (c *dockerCluster) Close(ctx context.Context) error {
	c.mu.Lock()
	nodes := c.nodes
	c.nodes = make([]*testcontainers.DockerContainer, dockerNodes)
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
