package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/testcontainers/testcontainers-go"

	"github.com/atlasmart/orderd/internal/platform/kafkaconn"
)

const (
	// dockerKafkaImage is the broker image; KAFKA_IMAGE overrides it
	// (deploy/docker/images/build.sh builds orderd/kafka where no registry
	// is reachable). Either image takes the same variables.
	dockerKafkaImage = "apache/kafka:4.1.0"
	// dockerKafkaAddress is the loopback address the broker binds on the
	// host network, beside the Cassandra containers' and apart from the
	// local launcher's broker (127.0.0.1).
	dockerKafkaAddress = "127.0.0.14"
	// dockerKafkaStartTimeout bounds the broker's start.
	dockerKafkaStartTimeout = 2 * time.Minute
)

// dockerBroker is a single Kafka container in KRaft mode on the host network.
type dockerBroker struct {
	ctr   *testcontainers.DockerContainer
	image string
}

func openDockerBroker(ctx context.Context, log io.Writer) (*dockerBroker, error) {
	image := os.Getenv("KAFKA_IMAGE")
	if image == "" {
		image = dockerKafkaImage
	}
	if err := dockerRemoveLeftovers(ctx, log, "kafka"); err != nil {
		return nil, err
	}
	client, controller := dockerKafkaAddress+":19092", dockerKafkaAddress+":19093"
	fmt.Fprintf(log, "e2e: starting a Kafka broker (%s) on %s, host network\n", image, client)
	ctr, err := testcontainers.Run(ctx, image,
		testcontainers.WithLogger(dockerTCLogger{w: log}),
		testcontainers.WithLabels(map[string]string{dockerLabel: "kafka"}),
		dockerHostNetwork(),
		testcontainers.WithEnv(map[string]string{
			"KAFKA_NODE_ID":                                  "1",
			"KAFKA_PROCESS_ROLES":                            "broker,controller",
			"KAFKA_LISTENERS":                                "HOST://" + client + ",CONTROLLER://" + controller,
			"KAFKA_ADVERTISED_LISTENERS":                     "HOST://" + client,
			"KAFKA_LISTENER_SECURITY_PROTOCOL_MAP":           "HOST:PLAINTEXT,CONTROLLER:PLAINTEXT",
			"KAFKA_INTER_BROKER_LISTENER_NAME":               "HOST",
			"KAFKA_CONTROLLER_LISTENER_NAMES":                "CONTROLLER",
			"KAFKA_CONTROLLER_QUORUM_VOTERS":                 "1@" + controller,
			"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR":         "1",
			"KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
			"KAFKA_TRANSACTION_STATE_LOG_MIN_ISR":            "1",
			"KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS":         "0",
		}),
		testcontainers.WithWaitStrategyAndDeadline(dockerKafkaStartTimeout, dockerPort(client)),
	)
	if err != nil {
		return nil, fmt.Errorf("start the Kafka container (%s): %w%s", image, err, dockerLogTail(ctr))
	}
	return &dockerBroker{ctr: ctr, image: image}, nil
}

func (k *dockerBroker) Describe() string {
	return fmt.Sprintf("Kafka container %s on %s:19092 (host network)", k.image, dockerKafkaAddress)
}
func (k *dockerBroker) Addr() string     { return dockerKafkaAddress + ":19092" }
func (k *dockerBroker) CanControl() bool { return true }

// Conn: the container serves PLAINTEXT, like the compose file's broker
// (deploy/docker/README.md); the secured path runs on the local launcher.
func (k *dockerBroker) Conn(string) kafkaconn.Settings { return kafkaconn.Settings{Plaintext: true} }
func (k *dockerBroker) PlaintextAddr() string          { return k.Addr() }

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
