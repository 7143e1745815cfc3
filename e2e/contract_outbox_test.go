package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/atlasmart/orderd/internal/adapters/outbox"
	"github.com/atlasmart/orderd/internal/adapters/outbox/outboxtest"
	"github.com/atlasmart/orderd/internal/tools/localcluster"
)

// The Kafka publisher meets the Publisher contract that the workflow's
// in-memory fake is held to (outboxtest.Suite), against the real broker:
// each case publishes to its own topic, and "broker down" kills it.
func TestKafkaPublisherMeetsThePublisherContract(t *testing.T) {
	if !broker.CanControl() {
		failInCIElseSkip(t, "this run cannot stop its Kafka broker (the contract's down case): "+broker.Describe())
	}
	outboxtest.Suite(t, func(t *testing.T) outboxtest.Subject {
		topic := fmt.Sprintf("e2e.contract.%d", time.Now().UnixNano())
		admin := kadm.NewClient(newKafkaClient(t, broker.Addr()))
		if _, err := admin.CreateTopic(context.Background(), 3, 1, nil, topic); err != nil {
			t.Fatalf("create topic %s: %v", topic, err)
		}
		pub, err := outbox.NewKafka(outbox.KafkaConfig{Brokers: []string{broker.Addr()}, Topic: topic, Conn: broker.Conn(localcluster.OrderdUser)},
			slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pub.Close(context.Background()) })
		return outboxtest.Subject{
			Publisher: pub,
			Published: func(ctx context.Context, n int) []*kgo.Record {
				return consumeAll(ctx, t, broker.Addr(), topic, n)
			},
			SetDown: func(t *testing.T, down bool) {
				ctx := context.Background()
				if !down {
					if err := broker.Start(ctx); err != nil {
						t.Fatalf("start the broker again: %v", err)
					}
					return
				}
				if err := broker.Kill(ctx); err != nil {
					t.Fatalf("kill the broker: %v", err)
				}
				t.Cleanup(func() { _ = broker.Start(context.Background()) }) // whatever the case's end
			},
		}
	})
}
