package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/atlasmart/orderd/internal/loadgen"
	"github.com/atlasmart/orderd/internal/outbox"
)

// outboxPhase measures what delivering events costs (issue 11): new orders
// through the benchmark's orderd, which publishes every order's event to
// Kafka (the default), against a second orderd on the same keyspace with
// delivery off, taking turns at each concurrency level; and the delivery
// latency, from the client's answer (the order is COMPLETE) to a consumer
// of the topic receiving the event. The consumer runs during the phase;
// its receipt times are taken as records arrive.
func (b *bench) outboxPhase(ctx context.Context, levels []int, n int, orderdBin string, env []string, brokers, topic string) ([]Result, error) {
	off, err := startOrderd(orderdBin, append(slices.Clone(env), "ORDERD_DELIVERY=false"))
	if err != nil {
		return nil, fmt.Errorf("start an orderd with delivery off: %w", err)
	}
	defer off.stop()

	rx, err := newReceiver(brokers, topic)
	if err != nil {
		return nil, err
	}
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { rx.run(rctx) })
	defer func() { stop(); wg.Wait(); rx.client.Close() }()

	var answered sync.Map // request id → when its answer arrived
	withOutbox := func(ctx context.Context, i int) error {
		req := newRequest(i)
		if _, err := b.od.client.CreateOrder(ctx, req); err != nil {
			return err
		}
		answered.Store(req.RequestId, time.Now())
		return nil
	}
	withoutOutbox := func(ctx context.Context, i int) error {
		_, err := off.client.CreateOrder(ctx, newRequest(i))
		return err
	}
	drivers := []driver{{name: "orderd", do: withOutbox}, {name: "no-outbox", do: withoutOutbox}}
	if err := b.warmUp(ctx, drivers); err != nil {
		return nil, err
	}
	var out []Result
	for _, c := range levels {
		rs, err := b.inTurns(ctx, "outbox", c, n, drivers)
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	lat, missing := rx.latencies(&answered, 2*time.Minute)
	if len(lat) == 0 {
		return nil, fmt.Errorf("no event of the phase's orders arrived on %s", topic)
	}
	r := Result{Label: b.label, Phase: "outbox", Driver: "delivery", Requests: len(lat), Errors: missing,
		P50ms: ms(loadgen.Percentile(lat, 50)), P95ms: ms(loadgen.Percentile(lat, 95)), P99ms: ms(loadgen.Percentile(lat, 99))}
	fmt.Fprintf(os.Stderr, "orderbench: outbox   delivery latency of %d events: p50 %.2f ms, p99 %.2f ms (%d missing)\n",
		len(lat), r.P50ms, r.P99ms, missing)
	return append(out, r), nil
}

// receiver consumes the events topic and notes when each event id first
// arrived.
type receiver struct {
	client  *kgo.Client
	mu      sync.Mutex
	arrived map[string]time.Time
}

func newReceiver(brokers, topic string) (*receiver, error) {
	c, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()), kgo.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		return nil, fmt.Errorf("kafka consumer: %w", err)
	}
	return &receiver{client: c, arrived: map[string]time.Time{}}, nil
}

func (r *receiver) run(ctx context.Context) {
	for ctx.Err() == nil {
		fetches := r.client.PollFetches(ctx)
		now := time.Now()
		r.mu.Lock()
		fetches.EachRecord(func(rec *kgo.Record) {
			id := outbox.Header(rec, outbox.HeaderEventID)
			if _, seen := r.arrived[id]; !seen {
				r.arrived[id] = now
			}
		})
		r.mu.Unlock()
	}
}

// latencies waits up to within for the event of every answered request and
// returns, sorted, the time from each answer to its event's arrival, and
// how many never arrived.
func (r *receiver) latencies(answered *sync.Map, within time.Duration) ([]time.Duration, int) {
	deadline := time.Now().Add(within)
	for {
		var lat []time.Duration
		missing := 0
		r.mu.Lock()
		answered.Range(func(k, v any) bool {
			if at, ok := r.arrived[k.(string)]; ok {
				lat = append(lat, max(0, at.Sub(v.(time.Time))))
			} else {
				missing++
			}
			return true
		})
		r.mu.Unlock()
		if missing == 0 || time.Now().After(deadline) {
			slices.Sort(lat)
			return lat, missing
		}
		time.Sleep(200 * time.Millisecond)
	}
}
