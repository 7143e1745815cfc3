package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The local Kafka broker (internal/tools/localcluster) is a real Apache Kafka
// 4.x in KRaft mode: records a producer had acknowledged with acks=all are
// consumed back in order per key, with their headers, and survive the
// broker being killed and started again.
func TestLocalKafkaBrokerKeepsAcknowledgedRecordsAcrossAKill(t *testing.T) {
	if _, ok := broker.(*localBroker); !ok {
		failInCIElseSkip(t, "this run's Kafka broker is not the local launcher's: "+broker.Describe())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// The run's broker: TestMain started it (or found it running).
	b := broker
	topic := fmt.Sprintf("orderd.e2e.%d", time.Now().UnixNano())
	admin := kadm.NewClient(newKafkaClient(t, b.Addr()))
	if _, err := admin.CreateTopic(ctx, 3, 1, nil, topic); err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}

	producer := newKafkaClient(t, b.Addr(), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic))
	const orders, eventsPerOrder = 20, 5
	var records []*kgo.Record
	for i := range eventsPerOrder {
		for o := range orders {
			records = append(records, &kgo.Record{Key: fmt.Appendf(nil, "order-%d", o), Value: fmt.Appendf(nil, "%d", i),
				Headers: []kgo.RecordHeader{{Key: "event-id", Value: fmt.Appendf(nil, "order-%d/%d", o, i)}}})
		}
	}
	if err := producer.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatalf("produce %d records with acks=all: %v", len(records), err)
	}
	wantAll := func(when string) {
		t.Helper()
		got := consumeAll(ctx, t, b.Addr(), topic, len(records))
		next := map[string]int{}
		for _, r := range got {
			key := string(r.Key)
			if want := fmt.Sprint(next[key]); string(r.Value) != want {
				t.Fatalf("%s: key %s: value %s, want %s (one key's records in order)", when, key, r.Value, want)
			}
			if len(r.Headers) != 1 || string(r.Headers[0].Value) != fmt.Sprintf("%s/%d", key, next[key]) {
				t.Fatalf("%s: key %s: headers %v", when, key, r.Headers)
			}
			next[key]++
		}
		for o := range orders {
			if n := next[fmt.Sprintf("order-%d", o)]; n != eventsPerOrder {
				t.Errorf("%s: order-%d: %d records, want %d", when, o, n, eventsPerOrder)
			}
		}
	}
	wantAll("after producing")

	if err := b.Kill(ctx); err != nil {
		t.Fatalf("kill the broker: %v", err)
	}
	if err := b.Start(ctx); err != nil {
		t.Fatalf("start the broker again: %v", err)
	}
	wantAll("after a SIGKILL and a restart")
}

func newKafkaClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	c, err := kgo.NewClient(append(append([]kgo.Opt{kgo.SeedBrokers(addr)}, kafkaConnOpts(t)...), opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// consumeAll reads topic from its start until it has n records.
func consumeAll(ctx context.Context, t *testing.T, addr, topic string, n int) []*kgo.Record {
	t.Helper()
	c := newKafkaClient(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var got []*kgo.Record
	for len(got) < n {
		fetches := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records of %s before the deadline", len(got), n, topic)
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			t.Logf("fetch %s/%d: %v (retried)", topic, partition, err)
		})
		got = append(got, fetches.Records()...)
	}
	return got
}
