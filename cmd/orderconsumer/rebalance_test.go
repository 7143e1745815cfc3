package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kotel"
	"go.opentelemetry.io/otel/trace/noop"
)

// TestRebalanceCutsThePollInHand: a member is stuck applying one record of
// its poll (a store that does not answer) when a second member joins. The
// waiting rebalance stops the poll: the records applied are committed, the
// rest are fetched again, and the rebalance goes ahead. Without that, the
// group puts the stuck member out after the rebalance timeout, its commit
// is lost, and the poll's applied records are applied a second time by the
// partitions' next owner (what a slow store turns into a livelock).
func TestRebalanceCutsThePollInHand(t *testing.T) {
	const (
		topic      = "orders"
		partitions = 2
		perPart    = 10
	)
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close) // after the clients' Close
	addr := cluster.ListenAddrs()[0]
	produce(t, addr, topic, partitions, perPart)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stuck := make(chan struct{})
	var (
		mu        sync.Mutex
		completed = map[string]int{} // partition/offset → applications that finished
		once      sync.Once
	)
	apply := func(ctx context.Context, r *kgo.Record) (outcome, error) {
		if r.Partition == 0 && r.Offset == 3 {
			first := false
			once.Do(func() { first = true })
			if first { // the first attempt hangs until it is given up
				close(stuck)
				<-ctx.Done()
				return "", ctx.Err()
			}
		}
		mu.Lock()
		defer mu.Unlock()
		completed[fmt.Sprintf("%d/%d", r.Partition, r.Offset)]++
		return applied, nil
	}
	// A client joins its group when it is made: the second member is made
	// only once the first is stuck.
	a := newGroupMember(t, addr, topic, apply)
	var runs sync.WaitGroup
	run := func(c *consumer) {
		runs.Add(1)
		go func() {
			defer runs.Done()
			_ = c.Run(ctx)
		}()
	}
	run(a)
	select {
	case <-stuck:
	case <-ctx.Done():
		t.Fatal("the first member never reached the record its store does not answer")
	}
	b := newGroupMember(t, addr, topic, apply)
	run(b)

	admin := kadm.NewClient(a.client)
	for {
		offsets, err := admin.FetchOffsets(ctx, "g")
		done := err == nil
		for p := range int32(partitions) {
			o, ok := offsets.Lookup(topic, p)
			done = done && ok && o.At == perPart
		}
		if done {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the group never committed every record: %v %v", offsets, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	runs.Wait()

	mu.Lock()
	defer mu.Unlock()
	for p := range partitions {
		for o := range perPart {
			if n := completed[fmt.Sprintf("%d/%d", p, o)]; n != 1 {
				t.Errorf("record %d/%d applied %d times, want once: the stuck member's applied records were not committed", p, o, n)
			}
		}
	}
	if n := testutil.ToFloat64(a.metrics.commitErrors); n != 0 {
		t.Errorf("the stuck member's commit errors = %v, want 0 (it was put out of the group)", n)
	}
	if n := testutil.ToFloat64(a.metrics.pollsCut); n < 1 {
		t.Errorf("the stuck member's polls cut = %v, want at least 1", n)
	}
}

// newGroupMember is a consumer of group g with the consumer's own client
// options and a 3 s rebalance timeout (60 s by default).
func newGroupMember(t *testing.T, addr, topic string, apply func(context.Context, *kgo.Record) (outcome, error)) *consumer {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := config{brokers: addr, topic: topic, group: "g", fromStart: true, sessionTimeout: 10 * time.Second}
	cfg.kafka.Plaintext = true
	rebalance := make(rebalanceWaiting, 1)
	opts, err := kafkaClientOpts(cfg, log, rebalance, nil)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kgo.NewClient(append(opts, kgo.RebalanceTimeout(3*time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return &consumer{client: client, apply: apply, tracer: kotel.NewTracer(kotel.TracerProvider(noop.NewTracerProvider())),
		metrics: newMetrics(prometheus.NewRegistry()), log: log, rebalance: rebalance, maxPoll: 500,
		tryTimeout: time.Minute, backoff: backoff{first: 10 * time.Millisecond, max: 100 * time.Millisecond}, grace: time.Second}
}

// produce writes perPart records to each partition of topic.
func produce(t *testing.T, addr, topic string, partitions, perPart int) {
	t.Helper()
	p, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var records []*kgo.Record
	for part := range partitions {
		for i := range perPart {
			records = append(records, &kgo.Record{Partition: int32(part), Value: fmt.Appendf(nil, "%d/%d", part, i)})
		}
	}
	if err := p.ProduceSync(context.Background(), records...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}
