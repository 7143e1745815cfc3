package e2e

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/atlasmart/orderd/deploy/local"
)

// Broker is the Kafka broker the e2e run publishes to: the local one
// (deploy/local), started for the run if it is not running, and stopped
// after it if it was started here.
type Broker struct {
	b           *local.Broker
	startedHere bool
}

// OpenBroker starts (or reuses) the local Kafka broker.
func OpenBroker(ctx context.Context, log io.Writer) (*Broker, error) {
	b, err := local.NewBroker(local.KafkaConfig{StateDir: filepath.Join(repoRoot(), ".kafka"), Log: log})
	if err != nil {
		return nil, err
	}
	startedHere := b.Pid() == 0
	if _, err := b.Up(ctx); err != nil {
		return nil, fmt.Errorf("start the local Kafka broker (make kafka-up): %w", err)
	}
	return &Broker{b: b, startedHere: startedHere}, nil
}

// Addr is the broker's host:port.
func (k *Broker) Addr() string { return k.b.Addr() }

// Kill stops the broker at once (SIGKILL), as a crash would.
func (k *Broker) Kill(ctx context.Context) error { return k.b.Kill(ctx) }

// Start starts the broker again and waits until it answers.
func (k *Broker) Start(ctx context.Context) error {
	_, err := k.b.Up(ctx)
	return err
}

// Close stops the broker if this run started it.
func (k *Broker) Close(ctx context.Context) error {
	if !k.startedHere {
		return nil
	}
	return k.b.Down(ctx)
}
