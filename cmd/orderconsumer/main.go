// Command orderconsumer is the reference consumer of orderd's order events
// (proto/atlasmart/orders/v1/events.proto): the program to copy when you
// need each event's effect exactly once on your side, although Kafka
// delivers it at least once.
//
// It reads the topic in a consumer group and, per record:
//
//  1. decodes the OrderEvent; a record that is not one it knows is logged,
//     counted and skipped (apply.go says why);
//  2. records the event id in its inbox table with an LWT (INSERT ... IF NOT
//     EXISTS): the first delivery writes it, every later one is a duplicate;
//  3. writes the order into its orders table unless that holds the same or a
//     newer version (an LWT on the version), even for a duplicate, so an
//     effect interrupted between 2 and 3 is completed by the redelivery;
//
// and commits a poll's offsets only after every record of it is applied. A
// store failure is retried, never skipped; a crash at any point means the
// uncommitted records come again and the steps above make that harmless.
//
// It creates its keyspace and tables on start (store.CreateSchema) and runs
// until SIGINT or SIGTERM, after which it finishes the poll in hand (up to
// -shutdown-grace), commits, and leaves the group. Every flag has an
// ORDERCONSUMER_* environment fallback (-h lists them).
//
// The store (tables, statements, errors) is the package store, with its
// contract and in-memory fake in store/storetest; the Kafka loop is
// consume.go; the per-record decisions are apply.go.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kotel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"golang.org/x/sync/errgroup"

	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/platform/tracing"
	"github.com/atlasmart/orderd/internal/tools/orderconsumer/store"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.LookupEnv, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "orderconsumer:", err)
		os.Exit(1)
	}
}

// run is the whole program: it returns when ctx ends (after a graceful
// stop) or on the first error that stops the consumer.
func run(ctx context.Context, args []string, lookupEnv func(string) (string, bool), stderr io.Writer) error {
	cfg, err := parseConfig(args, lookupEnv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil // -h: the usage is printed
	}
	if err != nil {
		return err
	}
	log, err := cfg.logger(stderr)
	if err != nil {
		return err
	}
	tp, err := newTracerProvider(ctx, cfg.tracing)
	if err != nil {
		return err
	}
	defer shutdownTracing(tp, log)
	session, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer session.Close()
	tracer := kotel.NewTracer(kotel.TracerProvider(tp), kotel.TracerPropagator(tracing.Propagator()), kotel.ConsumerGroup(cfg.group))
	rebalance := make(rebalanceWaiting, 1)
	client, err := newKafkaClient(cfg, log, rebalance, kotel.NewKotel(kotel.WithTracer(tracer)).Hooks()...)
	if err != nil {
		return err
	}
	defer client.Close()

	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	a := &applier{store: store.NewCassandra(session), metrics: m, log: log, now: time.Now}
	c := &consumer{client: client, apply: a.apply, tracer: tracer, metrics: m, log: log, rebalance: rebalance, maxPoll: 500,
		tryTimeout: 15 * time.Second, backoff: backoff{first: 100 * time.Millisecond, max: 5 * time.Second},
		grace: cfg.shutdownGrace}

	log.Info("consuming", "topic", cfg.topic, "group", cfg.group, "brokers", cfg.brokers,
		"security_protocol", cfg.kafka.Protocol(), "keyspace", cfg.keyspace)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return c.Run(gctx) })
	if cfg.metricsAddr != "" {
		g.Go(func() error { return serveMetrics(gctx, cfg.metricsAddr, reg, log) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}

// newTracerProvider is the consumer's tracer provider for mode; with
// tracing off, a no-op one: records still carry their producer's trace
// into the consumer's log lines, no span is recorded.
func newTracerProvider(ctx context.Context, mode string) (trace.TracerProvider, error) {
	tp, err := tracing.NewProvider(ctx, mode, "orderconsumer")
	if err != nil || tp == nil {
		return noop.NewTracerProvider(), err
	}
	return tp, nil
}

// shutdownTracing exports the spans not yet exported (bounded).
func shutdownTracing(tp trace.TracerProvider, log *slog.Logger) {
	sdk, ok := tp.(*sdktrace.TracerProvider)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := sdk.Shutdown(ctx); err != nil {
		log.Warn("could not flush traces", "err", err)
	}
}

// openStore creates the keyspace and tables if needed and returns a session
// bound to the keyspace.
func openStore(ctx context.Context, cfg config) (*gocql.Session, error) {
	admin, err := connect(cfg, "")
	if err != nil {
		return nil, err
	}
	err = store.CreateSchema(ctx, admin, cfg.keyspace, cfg.localDC, cfg.replicationFactor)
	admin.Close()
	if err != nil {
		return nil, err
	}
	return connect(cfg, cfg.keyspace)
}

// connect opens a session with orderd's driver settings (internal/platform/cassandra):
// LOCAL_QUORUM and LOCAL_SERIAL, so nothing falls back to ONE or to SERIAL
// across data centres (every statement the store runs sets its own
// consistency too), and the same login and TLS settings.
func connect(cfg config, keyspace string) (*gocql.Session, error) {
	cc := cassandra.Config{Hosts: list(cfg.cassandra), LocalDC: cfg.localDC, Keyspace: keyspace}
	if err := cfg.cassandraAccess.Apply(&cc); err != nil {
		return nil, err
	}
	s, err := cassandra.NewSession(cc)
	if err != nil {
		return nil, fmt.Errorf("connect to Cassandra at %s: %w", cfg.cassandra, err)
	}
	return s, nil
}

// newKafkaClient returns the group consumer the consume loop needs:
// rebalance hears when a rebalance waits for the poll in hand; hooks are
// the tracing plugin's (each record's context continues the trace in its
// headers).
func newKafkaClient(cfg config, log *slog.Logger, rebalance rebalanceWaiting, hooks ...kgo.Hook) (*kgo.Client, error) {
	opts, err := kafkaClientOpts(cfg, log, rebalance, hooks)
	if err != nil {
		return nil, fmt.Errorf("kafka client for %s: %w", cfg.brokers, err)
	}
	client, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka client for %s: %w", cfg.brokers, err)
	}
	return client, nil
}

// kafkaClientOpts is every option of the consumer's client: no autocommit
// (offsets move only past applied records), rebalances held off while a
// poll is applied and committed, and told to rebalance when one waits, the
// hooks, and the connection's security.
func kafkaClientOpts(cfg config, log *slog.Logger, rebalance rebalanceWaiting, hooks []kgo.Hook) ([]kgo.Opt, error) {
	conn, err := cfg.kafka.ClientOpts()
	if err != nil {
		return nil, err
	}
	// Where a partition without a committed offset starts. (In franz-go
	// 1.22 that is ConsumeStartOffset; ConsumeResetOffset now only says
	// where to resume after the broker lost data, and its default, a
	// minute back, is safe here: re-applied records are duplicates.)
	start := kgo.NewOffset().AtEnd()
	if cfg.fromStart {
		start = kgo.NewOffset().AtStart()
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(list(cfg.brokers)...),
		kgo.WithHooks(hooks...),
		kgo.ConsumerGroup(cfg.group),
		kgo.SessionTimeout(cfg.sessionTimeout),
		kgo.ConsumeTopics(cfg.topic),
		kgo.ConsumeStartOffset(start),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsCallbackBlocked(rebalance.signal),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, p map[string][]int32) {
			log.Info("partitions assigned", "partitions", p)
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, p map[string][]int32) {
			log.Info("partitions revoked", "partitions", p)
		}),
	}
	return append(opts, conn...), nil
}
