package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kotel"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/platform/kafkaconn"
	"github.com/atlasmart/orderd/internal/platform/tracing"
)

// DefaultLinger is the publisher's linger unless configured otherwise.
const DefaultLinger = 2 * time.Millisecond

// KafkaConfig configures the Kafka publisher. Zero fields take defaults.
type KafkaConfig struct {
	// Brokers are the seed brokers (host:port); required.
	Brokers []string
	// Topic is where events go; default DefaultTopic.
	Topic string
	// Partitions and ReplicationFactor are used only when the topic does
	// not exist yet and EnsureTopic creates it; defaults 12 and the
	// broker's default (-1).
	Partitions        int32
	ReplicationFactor int16
	// MaxBufferedRecords bounds the records waiting to be sent (memory, and
	// how much a broker outage can pile up); a publisher past it waits
	// until its context ends. Default 10,000.
	MaxBufferedRecords int
	// Linger is how long a partition's first buffered record waits for
	// more to share its produce request; default DefaultLinger, negative:
	// none. Publication happens after the client's answer, so this trades
	// delivery latency, not the caller's, for fewer broker requests.
	Linger time.Duration
	// DeliveryTimeout bounds how long a record may wait for the broker
	// before it fails (and its entry waits for the reconciler); default 30 s.
	DeliveryTimeout time.Duration
	// Observer is told how each publication ended; nil observes nothing.
	Observer Observer
	// Tracer records a "publish" span of each record, a child of the span
	// in Publish's context; nil records none. Either way the context's
	// trace travels in the record's traceparent header (traceHooks).
	Tracer trace.TracerProvider
	// Conn is how the client reaches the brokers: SASL_SSL with its
	// login, or plaintext when asked.
	Conn kafkaconn.Settings
	// Hooks watch the client (its Prometheus metrics); optional.
	Hooks []kgo.Hook
}

func (c KafkaConfig) withDefaults() KafkaConfig {
	if c.Topic == "" {
		c.Topic = DefaultTopic
	}
	if c.Partitions == 0 {
		c.Partitions = 12
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = -1
	}
	if c.MaxBufferedRecords == 0 {
		c.MaxBufferedRecords = 10_000
	}
	if c.Linger == 0 {
		c.Linger = DefaultLinger
	}
	if c.DeliveryTimeout == 0 {
		c.DeliveryTimeout = 30 * time.Second
	}
	if c.Observer == nil {
		c.Observer = nopObserver{}
	}
	return c
}

// Kafka publishes events with franz-go's idempotent producer: acks from
// every in-sync replica, at most five produce requests in flight per
// broker (the idempotent limit, which keeps one partition's records in
// order), retries without duplicates within one producer session.
type Kafka struct {
	cfg    KafkaConfig
	client *kgo.Client
	log    *slog.Logger
	conns  *connWatch
}

// NewKafka returns a publisher. It does not contact the brokers: a broker
// that is down when orderd starts only delays deliveries.
func NewKafka(cfg KafkaConfig, log *slog.Logger) (*Kafka, error) {
	cfg = cfg.withDefaults()
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("kafka publisher: no brokers configured")
	}
	conns := &connWatch{}
	opts, err := clientOpts(cfg, conns)
	if err != nil {
		return nil, fmt.Errorf("kafka publisher: %w", err)
	}
	client, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka publisher: %w", err)
	}
	return &Kafka{cfg: cfg, client: client, log: log, conns: conns}, nil
}

// clientOpts is every option of the publisher's client: the producer's
// settings, the connection's security and the hooks.
func clientOpts(cfg KafkaConfig, conns *connWatch) ([]kgo.Opt, error) {
	conn, err := cfg.Conn.ClientOpts()
	if err != nil {
		return nil, err
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.DefaultProduceTopic(cfg.Topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.MaxBufferedRecords(cfg.MaxBufferedRecords),
		kgo.RecordDeliveryTimeout(cfg.DeliveryTimeout),
		kgo.ProducerLinger(max(cfg.Linger, 0)),
		kgo.WithHooks(append([]kgo.Hook{conns}, cfg.Hooks...)...),
		traceHooks(cfg.Tracer),
	}
	return append(opts, conn...), nil
}

// traceHooks puts the trace context of the call that publishes a record
// into the record's headers (W3C traceparent, franz-go's OpenTelemetry
// plugin), so a consumer continues the trace of the request that caused
// the event; with tp it also records the record's "publish" span. A
// context without a span adds no header.
func traceHooks(tp trace.TracerProvider) kgo.Opt {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	t := kotel.NewTracer(kotel.TracerProvider(tp), kotel.TracerPropagator(tracing.Propagator()))
	return kgo.WithHooks(kotel.NewKotel(kotel.WithTracer(t)).Hooks()...)
}

// Publish implements Publisher: it returns once the broker acknowledged
// ev's record, or with the reason it did not, by ctx's end at the latest.
// The record carries the trace context of ctx (traceHooks).
//
// The idempotent producer does not fail a record it has sent and had no
// answer for (a broker that died mid-request): it waits, whatever the
// record's context, for the outcome, so as not to break the partition's
// sequence. Publish does not wait with it: at ctx's end it answers that the
// record was not acknowledged, the record's entry stays, and the
// reconciler publishes the event again (the same id: a consumer
// deduplicates). The record itself stays with the client until it is
// settled or the client closes.
func (k *Kafka) Publish(ctx context.Context, ev order.Event) error {
	rec, err := Record(ev)
	if err != nil {
		return err
	}
	start := time.Now()
	acked := make(chan error, 1)
	k.client.Produce(ctx, rec, func(_ *kgo.Record, err error) { acked <- err })
	select {
	case err = <-acked:
	case <-ctx.Done():
		err = fmt.Errorf("not acknowledged in time: %w", context.Cause(ctx))
	}
	result := ResultAcked
	if err != nil {
		result = ResultFailed
		err = fmt.Errorf("publish the %s event of order %s to %s: %w%s", ev.Type, ev.Order.ID, k.cfg.Topic, err, k.conns.reason())
	}
	k.cfg.Observer.Published(result, time.Since(start))
	return err
}

// EnsureTopic creates the topic if it does not exist; an existing topic is
// left as it is.
func (k *Kafka) EnsureTopic(ctx context.Context) error {
	admin := kadm.NewClient(k.client)
	resp, err := admin.CreateTopic(ctx, k.cfg.Partitions, k.cfg.ReplicationFactor, nil, k.cfg.Topic)
	if err == nil {
		err = resp.Err
	}
	switch {
	case errors.Is(err, kerr.TopicAlreadyExists):
		return nil
	case err != nil:
		return fmt.Errorf("create topic %s: %w", k.cfg.Topic, err)
	}
	k.log.Info("created the events topic", "topic", k.cfg.Topic, "partitions", k.cfg.Partitions)
	return nil
}

// Close waits up to ctx for buffered records to be acknowledged, then
// closes the client (what is still unacknowledged fails, and its entries
// wait for the reconciler).
func (k *Kafka) Close(ctx context.Context) {
	if err := k.client.Flush(ctx); err != nil {
		k.log.Warn("events still unacknowledged at shutdown; the reconciler will publish them", "error", err)
	}
	k.client.Close()
}

// connWatch keeps the last failed connection's error until a connection
// succeeds. A publication that runs out of time says only "context
// deadline exceeded"; this says why (a refused login:
// SASL_AUTHENTICATION_FAILED, a certificate not trusted, no broker).
type connWatch struct{ last atomic.Pointer[error] }

var _ kgo.HookBrokerConnect = (*connWatch)(nil)

// OnBrokerConnect implements kgo.HookBrokerConnect; it is called after the
// dial, TLS handshake and SASL login of every connection.
func (w *connWatch) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err == nil {
		w.last.Store(nil)
		return
	}
	w.last.Store(&err)
}

// reason is ", last connection error: ..." while connections fail, else "".
func (w *connWatch) reason() string {
	if err := w.last.Load(); err != nil {
		return fmt.Sprintf(" (the last connection to a broker failed: %v)", *err)
	}
	return ""
}
