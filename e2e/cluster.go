// Package e2e holds orderd's end-to-end tests: they build the real orderd
// binary, start it against a real three-node Cassandra cluster, and talk to
// it over gRPC the way clients and grpcurl do.
//
// The cluster is chosen once per run (OpenCluster):
//  1. CASSANDRA_CONTACT_POINTS set: that cluster, as it is (no node control).
//  2. otherwise a Docker engine answers: three cassandra:5.0 containers
//     started with testcontainers-go.
//  3. otherwise the local launcher (internal/tools/localcluster): three JVMs on 127.0.0.1-3,
//     reused if already up, started (and stopped at the end) if not.
//
// The Kafka broker every orderd of the run publishes to is chosen the same
// way (OpenBroker, broker.go): KAFKA_BROKERS, else a container beside a
// Docker cluster, else the local launcher's.
//
// With CI=true an unavailable cluster or broker fails the run; nothing
// skips silently.
package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/atlasmart/orderd/internal/tools/localcluster"
)

// Cluster is the real Cassandra cluster an e2e run uses.
type Cluster interface {
	// Describe names the cluster and its nodes for the test log.
	Describe() string
	// ContactPoints are the addresses orderd and the tests connect to.
	ContactPoints() []string
	// Nodes is the number of nodes.
	Nodes() int
	// CanControlNodes reports whether StopNode/KillNode/StartNode and
	// PauseNode/ResumeNode work.
	CanControlNodes() bool
	// StopNode stops node i (1-based) gracefully.
	StopNode(ctx context.Context, i int) error
	// KillNode kills node i abruptly (SIGKILL or equivalent).
	KillNode(ctx context.Context, i int) error
	// StartNode starts node i and waits until the cluster sees it Up/Normal.
	StartNode(ctx context.Context, i int) error
	// PauseNode freezes node i (SIGSTOP or equivalent): its sockets stay
	// open and requests to it hang until ResumeNode.
	PauseNode(ctx context.Context, i int) error
	// ResumeNode continues a paused node i and waits until the cluster sees
	// it Up/Normal again. Resuming a node that is not paused only waits.
	ResumeNode(ctx context.Context, i int) error
	// Close stops whatever OpenCluster started.
	Close(ctx context.Context) error
}

// OpenCluster chooses and, if needed, starts the cluster for this run:
// CASSANDRA_CONTACT_POINTS names a cluster someone else runs; otherwise
// ORDERD_E2E_CLUSTER picks the backend, local (the default: the local
// launcher's three JVMs) or docker (three containers started with
// testcontainers-go, docker.go).
func OpenCluster(ctx context.Context, log io.Writer) (Cluster, error) {
	if cps := os.Getenv("CASSANDRA_CONTACT_POINTS"); cps != "" {
		return &externalCluster{hosts: strings.Split(cps, ",")}, nil
	}
	switch backend := os.Getenv("ORDERD_E2E_CLUSTER"); backend {
	case "", "local":
		return openLocal(ctx, log)
	case "docker":
		if !dockerAnswers(ctx) {
			return nil, errors.New("ORDERD_E2E_CLUSTER=docker, but no Docker engine answers on DOCKER_HOST or /var/run/docker.sock")
		}
		return openDocker(ctx, log)
	default:
		return nil, fmt.Errorf("ORDERD_E2E_CLUSTER=%q: use local (the default) or docker", backend)
	}
}

// externalCluster is a cluster someone else runs.
type externalCluster struct{ hosts []string }

func (c *externalCluster) Describe() string {
	return fmt.Sprintf("external cluster at %v (CASSANDRA_CONTACT_POINTS)", c.hosts)
}
func (c *externalCluster) ContactPoints() []string { return c.hosts }
func (c *externalCluster) Nodes() int              { return len(c.hosts) }
func (c *externalCluster) CanControlNodes() bool   { return false }
func (c *externalCluster) StopNode(context.Context, int) error {
	return fmt.Errorf("node control is not available on an external cluster")
}
func (c *externalCluster) KillNode(ctx context.Context, i int) error   { return c.StopNode(ctx, i) }
func (c *externalCluster) StartNode(ctx context.Context, i int) error  { return c.StopNode(ctx, i) }
func (c *externalCluster) PauseNode(ctx context.Context, i int) error  { return c.StopNode(ctx, i) }
func (c *externalCluster) ResumeNode(ctx context.Context, i int) error { return c.StopNode(ctx, i) }
func (c *externalCluster) Close(context.Context) error                 { return nil }

// localCluster is the internal/tools/localcluster launcher's cluster.
type localCluster struct {
	*localcluster.Cluster
	started bool // this run started it, so this run stops it
}

var _ Cluster = (*localCluster)(nil)

func openLocal(ctx context.Context, log io.Writer) (Cluster, error) {
	c, err := localcluster.New(localcluster.Config{StateDir: filepath.Join(repoRoot(), ".cluster"), Log: log})
	if err != nil {
		return nil, err
	}
	lc := &localCluster{Cluster: c}
	// A cluster with any node process alive belongs to whoever started it
	// (make cluster-up, another run whose fault test has a node down): this
	// run may start the missing nodes but must not stop the cluster at its end.
	owned := true
	for i := 1; i <= c.Nodes(); i++ {
		if c.Running(i) {
			owned = false
		}
	}
	if c.Reachable(ctx) {
		fmt.Fprintf(log, "e2e: reusing the local cluster already running on %v\n", c.ContactPoints())
		if err := c.WaitSchemaAgreement(ctx); err != nil {
			return nil, err
		}
		return lc, nil
	}
	took, err := c.Up(ctx)
	if err != nil {
		return nil, fmt.Errorf("start the local three-node cluster: %w", err)
	}
	lc.started = owned
	fmt.Fprintf(log, "e2e: started the local cluster on %v in %s (stopped at the end: %v)\n", c.ContactPoints(), took.Round(time.Second), owned)
	return lc, nil
}

func (c *localCluster) Describe() string {
	return fmt.Sprintf("local launcher cluster, %d Cassandra nodes on %v (state in %s)", c.Nodes(), c.ContactPoints(), c.StateDir())
}
func (c *localCluster) CanControlNodes() bool { return true }
func (c *localCluster) Close(ctx context.Context) error {
	if !c.started {
		return nil
	}
	return c.Down(ctx)
}

// dockerAnswers reports whether a Docker engine answers on DOCKER_HOST or
// the default socket.
func dockerAnswers(ctx context.Context) bool {
	sock := "/var/run/docker.sock"
	if h := os.Getenv("DOCKER_HOST"); strings.HasPrefix(h, "unix://") {
		sock = strings.TrimPrefix(h, "unix://")
	} else if h != "" {
		return true // a remote engine: let testcontainers-go try it
	}
	client := http.Client{
		Timeout: 2 * time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker/_ping", nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// repoRoot is the module root (this file lives in <root>/e2e).
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}
