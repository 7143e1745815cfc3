package outbox

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/platform/kafkaconn"
)

// A publication whose broker goes away while the record is in flight (the
// produce request sent, no answer: franz-go's kfake cluster drops the
// connection of every Produce) must still end by its context's deadline
// (ORDERD_PUBLISH_TIMEOUT), and the publisher still close by its own: the
// workflow, the reconciler and shutdown (Service.Wait, then Close) all count
// on it. The idempotent producer itself will not fail such a record.
func TestPublishEndsByItsDeadlineWhenTheBrokerDiesMidRequest(t *testing.T) {
	const topic = "orders-test"
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	sent := make(chan struct{}, 1)
	cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		select {
		case sent <- struct{}{}:
		default:
		}
		return nil, errors.New("the broker died before it answered"), true
	})
	k, err := NewKafka(KafkaConfig{Brokers: cluster.ListenAddrs(), Topic: topic,
		Conn: kafkaconn.Settings{Plaintext: true}}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}

	cmd := order.Command{CustomerID: "c", Total: "1.00", Currency: "EUR",
		Lines: []order.Line{{SKU: "s", Quantity: 1, UnitPrice: "1.00"}}}
	ev := order.CreatedEvent(order.New("default", uuid.New(), cmd, time.Now().UTC().Truncate(time.Millisecond)))

	const timeout = time.Second
	within := func(what string, fn func(context.Context)) {
		t.Helper()
		done := make(chan struct{})
		go func() {
			defer close(done)
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			fn(ctx)
		}()
		select {
		case <-done:
		case <-time.After(10 * timeout):
			t.Fatalf("%s with a %s deadline has not returned after %s, a record in flight", what, timeout, 10*timeout)
		}
	}
	within("Publish", func(ctx context.Context) {
		if err := k.Publish(ctx, ev); err == nil {
			t.Error("Publish = nil with the broker gone, want an error")
		}
	})
	select {
	case <-sent:
	default:
		t.Fatal("the record never reached the broker")
	}
	within("Close", k.Close)
}
