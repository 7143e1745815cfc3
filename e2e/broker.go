package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/atlasmart/orderd/internal/platform/kafkaconn"
	"github.com/atlasmart/orderd/internal/tools/devsetup"
	"github.com/atlasmart/orderd/internal/tools/localcluster"
)

// Broker is the real Kafka broker an e2e run publishes to, chosen once per
// run (OpenBroker) like the cluster:
//  1. KAFKA_BROKERS set: those brokers, as they are (no control).
//  2. otherwise, if the cluster runs in Docker: an apache/kafka container
//     started with testcontainers-go (docker_kafka.go).
//  3. otherwise the local launcher (internal/tools/localcluster): one JVM on
//     127.0.0.1:19092, reused if already up, started (and stopped at the
//     end) if not.
type Broker interface {
	Describe() string
	// Addr is the host:port orderd and the tests connect to.
	Addr() string
	// CanControl reports whether Kill and Start work.
	CanControl() bool
	// Kill stops the broker at once (SIGKILL), as a crash would.
	Kill(ctx context.Context) error
	// Start starts the broker again and waits until it answers.
	Start(ctx context.Context) error
	// Close stops whatever OpenBroker started.
	Close(ctx context.Context) error
	// Conn is how user (localcluster.OrderdUser or ConsumerUser) connects:
	// SASL_SSL with its login on the local launcher's broker, plaintext on
	// the others.
	Conn(user string) kafkaconn.Settings
	// PlaintextAddr is a listener that needs no login, "" if there is
	// none: the e2e suite's previous release predates SASL_SSL.
	PlaintextAddr() string
}

// plaintextListener is the local broker's extra PLAINTEXT listener, when
// the run starts it.
const plaintextListener = "127.0.0.1:19094"

// OpenBroker chooses and, if needed, starts the broker for this run.
func OpenBroker(ctx context.Context, c Cluster, log io.Writer) (Broker, error) {
	if addrs := os.Getenv("KAFKA_BROKERS"); addrs != "" {
		return externalBroker{addr: strings.Split(addrs, ",")[0]}, nil
	}
	if _, ok := c.(*dockerCluster); ok {
		return openDockerBroker(ctx, log)
	}
	state := filepath.Join(repoRoot(), ".kafka")
	devDir, err := brokerDevDir(state, log)
	if err != nil {
		return nil, err
	}
	b, err := localcluster.NewBroker(localcluster.KafkaConfig{StateDir: state, DevDir: devDir, PlaintextAddr: plaintextListener, Log: log})
	if err != nil {
		return nil, err
	}
	startedHere := b.Pid() == 0
	if _, err := b.Up(ctx); err != nil {
		return nil, fmt.Errorf("start the local Kafka broker (make kafka-up): %w", err)
	}
	return &localBroker{b: b, startedHere: startedHere}, nil
}

// brokerDevDir is the development setup whose certificate the local
// broker serves: the repository's (.dev, as `make run` makes it) if there
// is one, else one the harness makes in the broker's state folder, so a
// clean clone needs no step first.
func brokerDevDir(state string, log io.Writer) (string, error) {
	if dev := filepath.Join(repoRoot(), ".dev"); (devsetup.Files{Dir: dev}).Exists() {
		return dev, nil
	}
	dir := filepath.Join(state, "dev")
	if (devsetup.Files{Dir: dir}).Exists() {
		return dir, nil
	}
	fmt.Fprintf(log, "e2e: no .dev setup: making one for the broker's TLS certificate in %s\n", dir)
	_, _, err := devsetup.Write(dir, tenant, 365*24*time.Hour)
	return dir, err
}

// localBroker is internal/tools/localcluster's broker.
type localBroker struct {
	b           *localcluster.Broker
	startedHere bool
}

func (k *localBroker) Describe() string {
	return fmt.Sprintf("local launcher broker on %s (state in %s)", k.b.Addr(), k.b.StateDir())
}
func (k *localBroker) Addr() string                   { return k.b.Addr() }
func (k *localBroker) CanControl() bool               { return true }
func (k *localBroker) Kill(ctx context.Context) error { return k.b.Kill(ctx) }

func (k *localBroker) Start(ctx context.Context) error {
	_, err := k.b.Up(ctx)
	return err
}

func (k *localBroker) Conn(user string) kafkaconn.Settings { return k.b.Conn(user) }

// PlaintextAddr: a broker this run reuses may have been started without
// the extra listener (make kafka-up does not ask for it).
func (k *localBroker) PlaintextAddr() string {
	if k.b.Plaintext() {
		return k.b.Addr()
	}
	c, err := net.DialTimeout("tcp", plaintextListener, time.Second)
	if err != nil {
		return ""
	}
	c.Close()
	return plaintextListener
}

// Close stops the broker if this run started it.
func (k *localBroker) Close(ctx context.Context) error {
	if !k.startedHere {
		return nil
	}
	return k.b.Down(ctx)
}

// externalBroker is a broker this run neither starts nor controls.
type externalBroker struct{ addr string }

func (k externalBroker) Describe() string { return "external brokers at KAFKA_BROKERS=" + k.addr }
func (k externalBroker) Addr() string     { return k.addr }
func (k externalBroker) CanControl() bool { return false }
func (k externalBroker) Kill(context.Context) error {
	return fmt.Errorf("the brokers at KAFKA_BROKERS are not controlled by the tests")
}
func (k externalBroker) Start(ctx context.Context) error { return k.Kill(ctx) }
func (k externalBroker) Close(context.Context) error     { return nil }
func (k externalBroker) Conn(string) kafkaconn.Settings  { return kafkaconn.Settings{Plaintext: true} }
func (k externalBroker) PlaintextAddr() string           { return k.addr }
