package e2e

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

const (
	// dockerKafkaImage is the broker image; KAFKA_IMAGE overrides it.
	dockerKafkaImage = "apache/kafka:4.1.0"
	// dockerKafkaHostPort is where the host reaches the broker: a fixed
	// port, because the broker must advertise the address clients use.
	dockerKafkaHostPort = "19092"
)

// dockerBroker is a single apache/kafka container in KRaft mode.
type dockerBroker struct {
	ctr   *testcontainers.DockerContainer
	image string
}

func openDockerBroker(ctx context.Context, log io.Writer) (*dockerBroker, error) {
	image := os.Getenv("KAFKA_IMAGE")
	if image == "" {
		image = dockerKafkaImage
	}
	fmt.Fprintf(log, "e2e: starting a Kafka broker (%s) on 127.0.0.1:%s\n", image, dockerKafkaHostPort)
	port := network.MustParsePort(dockerKafkaHostPort + "/tcp")
	ctr, err := testcontainers.Run(ctx, image,
		testcontainers.WithLogger(dockerTCLogger{w: log}),
		testcontainers.WithEnv(map[string]string{
			"KAFKA_NODE_ID":                                  "1",
			"KAFKA_PROCESS_ROLES":                            "broker,controller",
			"KAFKA_LISTENERS":                                "HOST://:" + dockerKafkaHostPort + ",CONTROLLER://:9093",
			"KAFKA_ADVERTISED_LISTENERS":                     "HOST://127.0.0.1:" + dockerKafkaHostPort,
			"KAFKA_LISTENER_SECURITY_PROTOCOL_MAP":           "HOST:PLAINTEXT,CONTROLLER:PLAINTEXT",
			"KAFKA_INTER_BROKER_LISTENER_NAME":               "HOST",
			"KAFKA_CONTROLLER_LISTENER_NAMES":                "CONTROLLER",
			"KAFKA_CONTROLLER_QUORUM_VOTERS":                 "1@localhost:9093",
			"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR":         "1",
			"KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
			"KAFKA_TRANSACTION_STATE_LOG_MIN_ISR":            "1",
			"KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS":         "0",
		}),
		testcontainers.WithExposedPorts(dockerKafkaHostPort+"/tcp"),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.PortBindings = network.PortMap{port: {{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: dockerKafkaHostPort}}}
		}),
		testcontainers.WithWaitStrategyAndDeadline(2*time.Minute,
			wait.ForListeningPort(dockerKafkaHostPort+"/tcp").WithStartupTimeout(2*time.Minute)),
	)
	if err != nil {
		return nil, fmt.Errorf("start the Kafka container (%s): %w%s", image, err, dockerLogTail(ctr))
	}
	return &dockerBroker{ctr: ctr, image: image}, nil
}

func (k *dockerBroker) Describe() string {
	return fmt.Sprintf("Kafka container %s on 127.0.0.1:%s", k.image, dockerKafkaHostPort)
}
func (k *dockerBroker) Addr() string     { return "127.0.0.1:" + dockerKafkaHostPort }
func (k *dockerBroker) CanControl() bool { return true }

func (k *dockerBroker) Kill(ctx context.Context) error {
	return dockerKill(ctx, k.ctr, "the Kafka broker")
}

func (k *dockerBroker) Start(ctx context.Context) error {
	if err := k.ctr.Start(ctx); err != nil {
		return fmt.Errorf("start the Kafka broker again: %w", err)
	}
	return nil
}

func (k *dockerBroker) Close(ctx context.Context) error {
	return testcontainers.TerminateContainer(k.ctr, testcontainers.StopContext(ctx))
}
