package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sync"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/atlasmart/orderd/internal/adapters/outbox"
	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/platform/kafkaconn"
	"github.com/atlasmart/orderd/internal/tools/clientcreds"
	"github.com/atlasmart/orderd/internal/tools/loadgen"
	"github.com/atlasmart/orderd/internal/tools/localcluster"
)

// outboxSetup is what the outbox phase needs besides the bench.
type outboxSetup struct {
	levels           []int
	requests         int
	orderd, consumer string              // binaries
	env              []string            // orderd's environment (the run's keyspace)
	creds            clientcreds.Options // how to call orderd
	brokers, topic   string              // the phase's own topic
	keyspace, hosts  string              // the consumer's keyspace, the cluster
	kafka            func(user string) kafkaconn.Settings
}

// outboxPhase measures what delivering events costs: new orders
// through an orderd that publishes every order's event to Kafka (the
// default) against one with delivery off — two fresh processes on the
// run's keyspace, taking turns at each concurrency level — and the
// delivery latency from the client's answer (the order is COMPLETE) to a
// consumer of the phase's topic receiving the event, and to the reference
// consumer (cmd/orderconsumer) having applied it. Both consumers run
// during the phase.
func (b *bench) outboxPhase(ctx context.Context, s outboxSetup) ([]Result, error) {
	on, err := startMeteredOrderd(s.orderd, append(slices.Clone(s.env), "ORDERD_KAFKA_TOPIC="+s.topic), s.creds)
	if err != nil {
		return nil, fmt.Errorf("start an orderd publishing to %s: %w", s.topic, err)
	}
	defer on.stop()
	off, err := startMeteredOrderd(s.orderd, append(slices.Clone(s.env), "ORDERD_DELIVERY=false"), s.creds)
	if err != nil {
		return nil, fmt.Errorf("start an orderd with delivery off: %w", err)
	}
	defer off.stop()

	rx, err := newReceiver(s.brokers, s.topic, s.kafka(localcluster.ConsumerUser))
	if err != nil {
		return nil, err
	}
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { rx.run(rctx) })
	defer func() { stop(); wg.Wait(); rx.client.Close() }()
	applier, err := startConsumer(ctx, s)
	if err != nil {
		return nil, err
	}
	defer applier.stop() // a second stop is a no-op

	// Latency first, below saturation and with both consumers idle: under
	// the throughput rounds the cluster is the queue, and the reference
	// consumer's two LWTs per event wait behind orderd's.
	var answered sync.Map // event id → when its order's answer arrived
	timed := driver{name: "outbox-on", orderd: on.orderdProc, do: func(ctx context.Context, i int) error {
		req := newRequest(i)
		if _, err := on.client.CreateOrder(ctx, req); err != nil {
			return err
		}
		answered.Store(createdEventID(req.RequestId), time.Now())
		return nil
	}}
	if _, _, err := b.measureRaw(ctx, "latency", timed, latencyConcurrency, max(s.requests/4, 100)); err != nil {
		return nil, err
	}
	received, missing := rx.latencies(&answered, 2*time.Minute)
	if len(received) == 0 {
		return nil, fmt.Errorf("no event of the phase's orders arrived on %s", s.topic)
	}
	applied, unapplied, err := appliedLatencies(ctx, b.cql, s.keyspace, &answered, 3*time.Minute)
	if err != nil {
		return nil, err
	}
	out := []Result{latencyResult(b.label, "received", received, missing), latencyResult(b.label, "applied", applied, unapplied)}
	// The consumer is not part of the outbox's cost: its LWTs would load the
	// cluster during the rounds below.
	applier.stop()

	withOutbox := func(ctx context.Context, i int) error {
		_, err := on.client.CreateOrder(ctx, newRequest(i))
		return err
	}
	withoutOutbox := func(ctx context.Context, i int) error {
		_, err := off.client.CreateOrder(ctx, newRequest(i))
		return err
	}
	// Each round keeps what its process's statements, events and CPU and
	// the cluster's and the broker's CPU gained: delivery's cost per order.
	drivers := []driver{{name: "outbox-on", do: withOutbox, orderd: on.orderdProc, counters: orderdCounters(on)},
		{name: "outbox-off", do: withoutOutbox, orderd: off.orderdProc, counters: orderdCounters(off)}}
	if err := b.warmUp(ctx, drivers); err != nil {
		return nil, err
	}
	for _, c := range s.levels {
		rs, err := b.inTurns(ctx, "outbox", c, s.requests, drivers)
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	return out, nil
}

// createdEventID is the id of the ORDER_CREATED event of the bench
// tenant's request requestID: what the topic's records and the reference
// consumer's inbox carry (derived from the tenant, operation and request).
func createdEventID(requestID string) string {
	return order.EventID(benchTenant, order.OperationCreate, uuid.MustParse(requestID)).String()
}

// benchTenant is the tenant of the run's API key (devsetup.Write).
const benchTenant = "default"

// latencyConcurrency is the load at which delivery latency is measured:
// two streams, well below what the local cluster can take.
const latencyConcurrency = 2

// latencyResult is a delivery latency distribution as a Result (its
// Errors: events that never arrived).
func latencyResult(label, driverName string, lat []time.Duration, missing int) Result {
	r := Result{Label: label, Phase: "outbox", Driver: driverName, Requests: len(lat), Errors: missing,
		P50ms: ms(loadgen.Percentile(lat, 50)), P95ms: ms(loadgen.Percentile(lat, 95)), P99ms: ms(loadgen.Percentile(lat, 99))}
	fmt.Fprintf(os.Stderr, "orderbench: outbox   answer to %s: %d events, p50 %.2f ms, p99 %.2f ms (%d missing)\n",
		driverName, len(lat), r.P50ms, r.P99ms, missing)
	return r
}

// receiver consumes the events topic and notes when each event id first
// arrived.
type receiver struct {
	client  *kgo.Client
	mu      sync.Mutex
	arrived map[string]time.Time
}

func newReceiver(brokers, topic string, conn kafkaconn.Settings) (*receiver, error) {
	opts, err := conn.ClientOpts()
	if err != nil {
		return nil, fmt.Errorf("kafka consumer: %w", err)
	}
	// From the start: the topic is the phase's own, so nothing older is
	// read, and no event published before the consumer's first offset
	// lookup answers is missed.
	c, err := kgo.NewClient(append(opts, kgo.SeedBrokers(brokers), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(50*time.Millisecond))...)
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

// consumerProc is the reference consumer, run for the outbox phase.
type consumerProc struct{ cmd *exec.Cmd }

// startConsumer runs cmd/orderconsumer on the phase's topic into its own
// keyspace and waits until it consumes.
func startConsumer(ctx context.Context, s outboxSetup) (*consumerProc, error) {
	cmd := exec.Command(s.consumer, "-brokers", s.brokers, "-topic", s.topic, "-group", s.keyspace, "-keyspace", s.keyspace,
		"-cassandra", s.hosts, "-log-format", "text", "-session-timeout", "10s")
	cmd.Env = append(os.Environ(), kafkaEnv("ORDERCONSUMER_", s.kafka(localcluster.ConsumerUser))...)
	out := &lineWatch{want: "msg=consuming", seen: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the reference consumer %s (make build builds it): %w", s.consumer, err)
	}
	p := &consumerProc{cmd: cmd}
	select {
	case <-out.seen:
		return p, nil
	case <-time.After(2 * time.Minute):
		p.stop()
		return nil, fmt.Errorf("the reference consumer did not start consuming within 2 minutes")
	case <-ctx.Done():
		p.stop()
		return nil, ctx.Err()
	}
}

func (p *consumerProc) stop() {
	if p.cmd.ProcessState != nil {
		return // stopped already
	}
	terminate(p.cmd)
}

// lineWatch discards a process's output, closing seen once want appears.
type lineWatch struct {
	want string
	seen chan struct{}
	once sync.Once
}

func (w *lineWatch) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(w.want)) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

// appliedLatencies waits up to within for the reference consumer to have
// applied the event of every answered request, and returns, sorted, the
// time from each answer to its inbox row's applied_at, and how many were
// never applied.
func appliedLatencies(ctx context.Context, s *gocql.Session, keyspace string, answered *sync.Map, within time.Duration) ([]time.Duration, int, error) {
	pending := map[string]time.Time{}
	answered.Range(func(k, v any) bool { pending[k.(string)] = v.(time.Time); return true })
	var lat []time.Duration
	q := `SELECT applied_at FROM ` + keyspace + `.inbox WHERE event_id = ?`
	for deadline := time.Now().Add(within); len(pending) > 0 && time.Now().Before(deadline); {
		for id, at := range pending {
			var applied time.Time
			err := s.Query(q, id).Consistency(gocql.LocalQuorum).ScanContext(ctx, &applied)
			switch {
			case errors.Is(err, gocql.ErrNotFound):
				continue
			case err != nil:
				return nil, 0, fmt.Errorf("read %s.inbox: %w", keyspace, err)
			}
			lat = append(lat, max(0, applied.Sub(at)))
			delete(pending, id)
		}
		if len(pending) > 0 {
			time.Sleep(time.Second)
		}
	}
	slices.Sort(lat)
	return lat, len(pending), nil
}
