// Command orderd serves the retry-safe order API.
//
//	orderd serve                serve gRPC, with the reconciler (default)
//	orderd reconcile            run only the reconciler (which also delivers events)
//	orderd deliver              the same: the reconciler is the delivery worker
//	orderd migrate              create or update the keyspace's schema, then exit
//	orderd copy-listing [-concurrency N]
//	                            copy orders_by_customer into
//	                            orders_by_customer_time (the upgrade to schema
//	                            version 5; idempotent: run it again at will)
//	orderd requeue [-tenant T] REQUEST_ID
//	                            give a FAILED request another round of attempts
//	orderd keys add|revoke|list manage an API key file (docs/security.md)
//	orderd dev-setup            write a development CA, certificates and key
//	orderd verify [-acks FILE] [-delivered] [-consumer-keyspace KS]
//	                            check the keyspace's invariants (and the
//	                            events' delivery and a consumer's applies);
//	                            non-zero exit on any violation
//
// Every setting is a flag with an ORDERD_* environment variable of the same
// name as its default source; `orderd COMMAND -h` lists them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	"github.com/atlasmart/orderd/cql"
	"github.com/atlasmart/orderd/internal/adapters/grpcapi"
	"github.com/atlasmart/orderd/internal/adapters/limit"
	"github.com/atlasmart/orderd/internal/adapters/metrics"
	"github.com/atlasmart/orderd/internal/adapters/outbox"
	"github.com/atlasmart/orderd/internal/app/workflow"
	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/platform/buildinfo"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/platform/clockskew"
	"github.com/atlasmart/orderd/internal/platform/failpoint"
	"github.com/atlasmart/orderd/internal/stores/leases"
	"github.com/atlasmart/orderd/internal/stores/versions"
	"github.com/atlasmart/orderd/internal/tools/invariant"
	"github.com/atlasmart/orderd/ledger"
	"github.com/atlasmart/orderd/projection"
	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
	"github.com/atlasmart/orderd/reconciler"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "orderd:", err)
		os.Exit(1)
	}
}

// run runs the command args name (serve when they name none); usage and
// help go to stdout.
func run(args []string, stdout io.Writer) error {
	if isHelp(args) { // orderd -h: the commands, not serve's flags
		return help(nil, stdout)
	}
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd { // commands that need no cluster settings
	case "keys":
		return keysCommand(args, stdout)
	case "dev-setup":
		return devSetup(args, stdout)
	case "help":
		if isHelp(args) {
			return help(nil, stdout)
		}
		return help(args, stdout)
	case "version":
		if isHelp(args) {
			return help([]string{cmd}, stdout)
		}
		return printVersion(stdout)
	}
	c, ok := lookupCommand(cmd)
	if !ok {
		return unknownCommand(cmd)
	}
	cfg := &config{}
	fs := cfg.flags(cmd)
	if help, err := parseSettings(fs, c, args, stdout); help || err != nil {
		return err
	}
	if cmd == "healthcheck" { // a probe: no logger, no cluster settings to check
		return healthcheck(context.Background(), cfg, stdout)
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "metrics-addr" {
			cfg.metricsAddrExplicit = true
		}
	})
	if err := cfg.validate(cmd); err != nil {
		return err
	}
	log, err := cfg.logger()
	if err != nil {
		return err
	}
	setMemoryLimit(log, memlimit.FromCgroup)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch cmd {
	case "serve":
		return serve(ctx, cfg, log)
	case "reconcile", "deliver":
		return reconcile(ctx, cfg, log)
	case "migrate":
		return migrate(ctx, cfg, log)
	case "copy-listing":
		return copyListing(ctx, cfg, log)
	case "requeue":
		return requeue(ctx, cfg, fs.Args(), log)
	case "verify":
		return verify(ctx, cfg, log)
	case "republish":
		return republish(ctx, cfg, log)
	default:
		return unknownCommand(cmd)
	}
}

// app is the wired core shared by serve, reconcile and requeue.
type app struct {
	session     *gocql.Session
	stmts       cassandra.Session // what the stores run statements through
	ledger      *ledger.Ledger
	projections *projection.Store
	workflow    *workflow.Service
	requests    *workflow.Requests // the requests' use cases: GetRequest, ListRequests, requeue (gRPC and CLI)
	publisher   *outbox.Kafka      // nil when delivery is off
	metrics     *metrics.Metrics   // nil when not exported
	admission   *limit.Tenants     // per-tenant rate limits, writes' and reads'
	clock       *clockskew.Monitor
	now         func() time.Time // this process's clock (ORDERD_CLOCK_LEAD shifts it in test builds)
	coord       *leases.Leases
}

// fleetReadTTL is how long a read of which operations the live reconcilers
// finish is reused before a change is let through on it.
const fleetReadTTL = 5 * time.Second

// close waits for the workflow's background deliveries and writes, then
// closes the producer and the session they use.
func (a *app) close() {
	a.workflow.Wait()
	if a.publisher != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		a.publisher.Close(ctx)
		cancel()
	}
	a.session.Close()
}

// claimCommit reports whether claims commit at ANY: only when asked for, and
// only once every node has said it purges Paxos state as `repaired` needs
// (cassandra.CheckAnyCommit); otherwise orderd does not start.
func claimCommit(ctx context.Context, cfg *config, session *gocql.Session, log *slog.Logger) (bool, error) {
	claimAny, err := cfg.claimCommitAny()
	if err != nil || !claimAny {
		return false, err
	}
	nodes := cassandra.ReadPaxosSettings(ctx, session)
	if err := cassandra.CheckAnyCommit(nodes); err != nil {
		return false, fmt.Errorf("%w; or set ORDERD_CLAIM_COMMIT=local_quorum", err)
	}
	log.Info("claims commit at ANY: every node purges Paxos state only once repaired", "nodes", len(nodes))
	return true, nil
}

// newApp wires the core; obs (nil for none) observes the session, the
// workflow and the ledger's unknown outcomes.
func newApp(ctx context.Context, cfg *config, log *slog.Logger, obs *observability) (*app, error) {
	failpoints, err := failpoint.Parse(cfg.failpoints)
	if err != nil {
		return nil, err
	}
	if failpoints != nil {
		log.Warn("failpoints armed: this process will fail on purpose", "failpoints", cfg.failpoints)
	}
	var m *metrics.Metrics
	if obs != nil {
		m = obs.metrics
	}
	session, err := connectObserved(ctx, cfg, cfg.keyspace, log, obs.cqlObserver())
	if err != nil {
		return nil, err
	}
	driver := cassandra.Wrap(session)
	stmts, err := statementSession(driver, cfg.cqlFaults, log)
	if err != nil {
		session.Close()
		return nil, err
	}
	if err := checkSchema(ctx, cfg, stmts, log); err != nil {
		session.Close()
		return nil, err
	}
	claimAny, err := claimCommit(ctx, cfg, session, log)
	if err != nil {
		session.Close()
		return nil, err
	}
	now, err := processClock(cfg, log)
	if err != nil {
		session.Close()
		return nil, err
	}
	clock := newClockMonitor(cfg, stmts, now, m, log)
	store, err := ledger.NewCassandraStore(stmts, ledger.Config{
		Retention: cfg.retention, DueAfter: cfg.reconcileGrace, ClaimCommitAny: claimAny,
		OnSettle: settleLogger(log, driver.Serial().String(), m), Now: now,
	})
	if err != nil {
		session.Close()
		return nil, err
	}
	projections := projection.New(projection.Config{Batch: cfg.projectionBatch}, stmts, failpoints)
	cacheSize := cfg.replayCacheSize
	if cacheSize <= 0 {
		cacheSize = -1 // off; a zero workflow.Config field means the default
	}
	admission := limit.New(limit.Config{Attempts: cfg.rateAttempts, Replays: cfg.rateReplays, Reads: cfg.rateReads})
	wcfg := workflow.Config{TakeoverAfter: cfg.takeoverAfter, ReplayCacheSize: cacheSize, Admission: admission,
		Versions: versions.NewCassandraStore(stmts), Clock: clock.Check, Now: now}
	coord := leases.NewCassandraCoordinator(stmts, workflow.Operations()...)
	wcfg.Enabled = reconciler.NewFleet(coord, fleetReadTTL).Finishes
	if m != nil {
		wcfg.Observer = m
	}
	var publisher *outbox.Kafka
	if cfg.deliveryOn {
		if publisher, err = newPublisher(ctx, cfg, m, obs.tracer(), log); err != nil {
			session.Close()
			return nil, err
		}
		wcfg.Publisher, wcfg.PublishTimeout = publisher, cfg.publishTimeout
	}
	wf := workflow.New(wcfg, store, projections, failpoints, log)
	return &app{session: session, stmts: stmts, ledger: store, projections: projections, workflow: wf,
		requests: workflow.NewRequests(wf, store), publisher: publisher, metrics: m,
		clock: clock, now: now, coord: coord, admission: admission}, nil
}

// processClock is the clock this process dates claims and judges due
// entries by: the machine's, or in a test build the machine's run
// ORDERD_CLOCK_LEAD ahead (a clock that leads, without touching the
// machine's).
func processClock(cfg *config, log *slog.Logger) (func() time.Time, error) {
	if cfg.clockLead == 0 {
		return time.Now, nil
	}
	if !failpoint.Compiled {
		return nil, fmt.Errorf("clock lead %s: this binary was built without failpoints (only test builds, go build -tags failpoints, can shift their clock)", cfg.clockLead)
	}
	log.Warn("this process's clock runs ahead of the machine's on purpose", "clock_lead", cfg.clockLead.String())
	lead := cfg.clockLead
	return func() time.Time { return time.Now().Add(lead) }, nil
}

// newClockMonitor is this process's clock against the cluster's
// (clockskew), exported as metrics; it measures nothing yet.
func newClockMonitor(cfg *config, s cassandra.Session, now func() time.Time, m *metrics.Metrics, log *slog.Logger) *clockskew.Monitor {
	ccfg := clockskew.Config{Max: cfg.maxClockSkew, Now: now}
	if m != nil {
		ccfg.OnMeasure = m.ClockSkew(cfg.maxClockSkew)
	}
	return clockskew.New(ccfg, clockskew.CassandraClock(s), log)
}

// clockTries bounds the start-up's measurements of the clock's skew (a
// round trip slowed by load is not taken); Run measures again every second
// until one is.
const clockTries = 5

// measureClock takes the first measurement of the clock against the
// cluster's, before serve or reconcile claims or judges anything: the
// commands that do neither never measure.
func (a *app) measureClock(ctx context.Context, cfg *config, log *slog.Logger) {
	for try := 1; try <= clockTries; try++ {
		e, err := a.clock.Measure(ctx)
		if err == nil {
			log.Info("clock measured against the cluster's", "offset", e.Offset.String(), "uncertainty", e.Uncertainty.String(),
				"max", cfg.maxClockSkew.String())
			return
		}
		if try == clockTries || ctx.Err() != nil {
			log.Warn("could not measure the clock against the cluster's yet: no new claims until it is", "error", err)
			return
		}
	}
}

// newPublisher is the Kafka producer of order events. The topic is created
// if missing; a broker that does not answer yet is no reason not to serve
// (orders are accepted, their events wait in the due queue), so that is
// only a warning. tp (nil: none) records each record's publish span.
func newPublisher(ctx context.Context, cfg *config, m *metrics.Metrics, tp trace.TracerProvider, log *slog.Logger) (*outbox.Kafka, error) {
	kcfg := outbox.KafkaConfig{Brokers: cfg.kafkaBrokers(), Topic: cfg.kafkaTopic, Partitions: int32(cfg.kafkaPartitions),
		Linger: cfg.publisherLinger(), Conn: cfg.kafkaConn, Tracer: tp}
	if m != nil {
		kcfg.Observer = m
		kcfg.Hooks = append(kcfg.Hooks, m.KafkaHook())
	}
	p, err := outbox.NewKafka(kcfg, log)
	if err != nil {
		return nil, err
	}
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := p.EnsureTopic(tctx); err != nil {
		log.Warn("Kafka not reachable yet; events wait in the due queue until it is", "brokers", cfg.kafkaBrokersCSV,
			"security_protocol", cfg.kafkaConn.Protocol(), "error", err)
	}
	return p, nil
}

// statementSession is the session the stores run their statements through:
// the driver's, or, when faults are armed (ORDERD_CQL_FAULTS, tests only),
// one that makes the named statements fail. Both can wait for schema
// agreement, as the migrator does.
func statementSession(driver cql.Session, faults string, log *slog.Logger) (cql.Session, error) {
	if faults == "" {
		return driver, nil
	}
	if !failpoint.Compiled {
		return nil, fmt.Errorf("cql faults %q: this binary was built without failpoints (only test builds, go build -tags failpoints, can arm them)", faults)
	}
	fs := cassandra.NewFaultSession(driver)
	known := slices.Concat(ledger.Statements, projection.Statements, versions.Statements, leases.Statements, cql.Statements)
	if err := fs.ArmSpec(faults, known); err != nil {
		return nil, err
	}
	log.Warn("CQL faults armed: statements will fail on purpose", "cql_faults", faults)
	return fs, nil
}

// reconciler returns the process's reconciler loop, its stats exported.
func (a *app) reconciler(cfg *config, log *slog.Logger) (*reconciler.Loop, error) {
	loop := reconciler.New(reconciler.Config{
		Interval: cfg.reconcileInterval, MaxAttempts: cfg.reconcileMaxAttempts,
		BackoffBase: cfg.reconcileBackoff, BackoffMax: cfg.reconcileBackoffMax, Concurrency: cfg.reconcileConcurrency,
		// A pass is stalled once no entry has settled for twice what the
		// slowest one can take (a publish and ten CQL statements timing
		// out): 2 min with the defaults. Shorter, a pass through a broker
		// outage with longer timeouts would hand its shards over.
		StallAfter: 2 * (cfg.publishTimeout + 10*cfg.cqlTimeout),
		Clock:      a.clock.Check, Now: a.now,
		Redeliver: a.workflow.Redeliver,
	}, a.ledger, a.workflow.Settle, a.coord, log)
	if err := a.metrics.RegisterReconciler(loop.Stats); err != nil {
		return nil, err
	}
	return loop, nil
}

func reconcile(ctx context.Context, cfg *config, log *slog.Logger) error {
	obs, err := newObservability(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer obs.shutdown(log)
	a, err := newApp(ctx, cfg, log, obs)
	if err != nil {
		return err
	}
	defer a.close()
	a.measureClock(ctx, cfg, log)
	loop, err := a.reconciler(cfg, log)
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	gctx, stop := context.WithCancel(gctx)
	defer stop()
	g.Go(func() error { return a.clock.Run(gctx) })
	g.Go(func() error {
		defer stop() // the loop is done: so is the metrics server
		return loop.Run(gctx)
	})
	obs.serveMetrics(gctx, g, log)
	return g.Wait()
}

func requeue(ctx context.Context, cfg *config, args []string, log *slog.Logger) error {
	if len(args) != 1 {
		return errors.New("usage: orderd requeue [-tenant TENANT] REQUEST_ID (the tenant defaults to ORDERD_TENANT, else default)")
	}
	id, err := uuid.Parse(args[0])
	if err != nil {
		return fmt.Errorf("request id %q: %w", args[0], err)
	}
	a, err := newApp(ctx, cfg, log, nil)
	if err != nil {
		return err
	}
	defer a.close()
	return requeueOne(ctx, a.requests, cfg.tenant, id, log)
}

// requeuer is the one requeue (workflow.Requests.Requeue), which the gRPC
// RequeueRequest runs too: the command and the call answer alike.
type requeuer interface {
	Requeue(ctx context.Context, tenant string, requestID uuid.UUID) (workflow.Request, error)
}

// requeueOne requeues tenant's request id and logs the request as it then
// is: its state as GetRequest shows it (COMPLETE for a finished create,
// whose ledger row says PENDING).
func requeueOne(ctx context.Context, r requeuer, tenant string, id uuid.UUID, log *slog.Logger) error {
	rec, err := r.Requeue(ctx, tenant, id)
	if err != nil {
		return fmt.Errorf("requeue %s: %w", id, err)
	}
	log.Info("requeued", "request_id", id, "state", string(rec.State), "attempts", rec.Attempts)
	return nil
}

// republish publishes again the events of the orders of one tenant created
// in [from, to): what no due entry owes any more (orders accepted while
// delivery was off, or an obligation that outlived its retention). Events
// keep their ids, so consumers apply only those they lack.
func republish(ctx context.Context, cfg *config, log *slog.Logger) error {
	from, to := cfg.republishFrom.t, cfg.republishTo.t
	if to.IsZero() {
		to = time.Now().UTC()
	}
	if from.IsZero() || !from.Before(to) {
		return fmt.Errorf("republish needs -from before -to (RFC 3339), got -from %q -to %q", cfg.republishFrom.String(), to.Format(time.RFC3339))
	}
	if !cfg.deliveryOn {
		return errors.New("republish publishes to Kafka: it cannot run with delivery off (ORDERD_DELIVERY=false)")
	}
	a, err := newApp(ctx, cfg, log, nil)
	if err != nil {
		return err
	}
	defer a.close()
	var orders, events int
	err = a.projections.ScanOrders(ctx, cfg.tenant, from, to, func(o order.Order) error {
		orders++
		if cfg.republishDryRun {
			events += int(o.Version)
			return nil
		}
		n, err := a.workflow.Republish(ctx, o)
		events += n
		return err
	})
	verb := "republished"
	if cfg.republishDryRun {
		verb = "would republish"
	}
	log.Info(verb, "tenant", cfg.tenant, "from", from, "to", to, "orders", orders, "events", events, "error", err)
	if err != nil {
		return fmt.Errorf("republish (after %d orders, %d events): %w", orders, events, err)
	}
	return nil
}

func verify(ctx context.Context, cfg *config, log *slog.Logger) error {
	var acks []invariant.Ack
	if cfg.verifyAcks != "" {
		var err error
		if acks, err = invariant.ReadAcks(cfg.verifyAcks); err != nil {
			return err
		}
	}
	cfg.cqlTimeout = max(cfg.cqlTimeout, 30*time.Second)
	session, err := connect(ctx, cfg, cfg.keyspace, log)
	if err != nil {
		return err
	}
	defer session.Close()
	rep, err := invariant.Check(ctx, session, invariant.Config{Grace: cfg.reconcileGrace, Retention: cfg.retention, Acks: acks,
		CheckDelivered: cfg.verifyDelivered, ConsumerKeyspace: cfg.verifyConsumerKeyspace})
	if err != nil {
		return err
	}
	fmt.Print(rep.String())
	if !rep.OK() {
		return fmt.Errorf("%d invariant violations in keyspace %s", len(rep.Violations), cfg.keyspace)
	}
	fmt.Printf("keyspace %s: all invariants hold\n", cfg.keyspace)
	return nil
}

func migrate(ctx context.Context, cfg *config, log *slog.Logger) error {
	session, err := connect(ctx, cfg, "", log)
	if err != nil {
		return err
	}
	defer session.Close()
	stmts, err := statementSession(cassandra.Wrap(session), cfg.cqlFaults, log)
	if err != nil {
		return err
	}
	return migrateKeyspace(ctx, cfg, stmts, log)
}

// migrateKeyspace runs cql.Migrate, running it again for cfg.connectWait
// while the cluster does not answer. Just after a cluster forms, a node can
// answer before it counts its peers as up and refuse the migrator's serial
// reads as UNAVAILABLE; a one-shot migration job that exited then would
// keep everything behind it from starting. Every step of a migration is
// idempotent, so a run stopped part way is picked up where it stopped.
func migrateKeyspace(ctx context.Context, cfg *config, s cql.Session, log *slog.Logger) error {
	var res cql.Result
	err := keepTrying(ctx, cfg.connectWait, startRetryPause, log, "cluster not answering the migration yet; retrying", func() (bool, error) {
		var err error
		res, err = cql.Migrate(ctx, s, cql.Config{
			Keyspace: cfg.keyspace, DataCenter: cfg.localDC, ReplicationFactor: cfg.replicationFactor, Log: log,
		})
		return fault.KindOf(err) == fault.Unavailable, err
	})
	if err != nil {
		return fmt.Errorf("migrate keyspace %s: %w", cfg.keyspace, err)
	}
	log.Info("schema up to date", "keyspace", cfg.keyspace, "version", res.Current, "applied", len(res.Applied))
	return nil
}

// copyListing copies the customer listing of schema version 1
// (orders_by_customer) into version 5's (orders_by_customer_time), once
// every version is applied: the upgrade's one-off step (docs/operations.md
// "Upgrading"). The copy keeps every cell's write time, so it may run while
// orderd serves, and again.
func copyListing(ctx context.Context, cfg *config, log *slog.Logger) error {
	session, err := connect(ctx, cfg, cfg.keyspace, log)
	if err != nil {
		return err
	}
	defer session.Close()
	stmts, err := statementSession(cassandra.Wrap(session), cfg.cqlFaults, log)
	if err != nil {
		return err
	}
	if err := checkSchema(ctx, cfg, stmts, log); err != nil {
		return err
	}
	start := time.Now()
	stats, err := projection.CopyListing(ctx, stmts, projection.CopyConfig{Concurrency: cfg.copyConcurrency, Log: log})
	if err != nil {
		return fmt.Errorf("copy the customer listing of keyspace %s (stopped after %d rows; run it again): %w", cfg.keyspace, stats.Read, err)
	}
	log.Info("customer listing copied", "keyspace", cfg.keyspace, "rows", stats.Read, "copied", stats.Copied, "skipped", stats.Skipped,
		"took", time.Since(start).Round(time.Millisecond).String())
	return nil
}

func serve(ctx context.Context, cfg *config, log *slog.Logger) error {
	sec, err := newSecurity(ctx, &cfg.sec, log) // before connecting: a bad key file fails at once
	if err != nil {
		return err
	}
	obs, err := newObservability(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer obs.shutdown(log) // after the gRPC server stopped: flushes its last spans
	a, err := newApp(ctx, cfg, log, obs)
	if err != nil {
		return err
	}
	defer a.close()
	a.measureClock(ctx, cfg, log)
	wf := a.workflow

	key, err := pageTokenKey(cfg.pageTokenKey.key, log)
	if err != nil {
		return err
	}
	api, err := grpcapi.New(grpcapi.Config{PageTokenKey: key, Auth: sec.authn, AuthObserver: a.metrics, Requests: a.requests}, wf,
		workflow.NewOrders(a.projections, a.admission), log)
	if err != nil {
		return err
	}

	// Bound only now, after the cluster connect (which may wait up to
	// connect-wait): a port bound earlier would accept connections it cannot
	// answer, so clients would hang instead of being refused and trying
	// another instance.
	lis, err := listen("gRPC", "grpc-addr", cfg.grpcAddr)
	if err != nil {
		return err
	}
	// The guard runs before any handler (after the deadline, so that the
	// metrics see its refusals); panic recovery is innermost.
	// The codec hands a request whose text is not UTF-8 to the guard and the
	// handler (INVALID_ARGUMENT on the field) rather than failing it INTERNAL.
	opts := append(obs.grpcOptions(deadlineInterceptor(cfg.requestTimeout), api.UnaryInterceptor(), grpcapi.RecoverPanics(log)),
		grpc.ChainStreamInterceptor(api.StreamInterceptor()), grpcapi.Codec())
	if sec.creds != nil {
		opts = append(opts, sec.creds)
	}
	srv := grpc.NewServer(append(opts, transportLimits(cfg)...)...)
	ordersv1.RegisterOrderServiceServer(srv, api)
	healthSrv := health.NewServer()
	healthpb.RegisterHealthServer(srv, healthSrv)
	if cfg.sec.reflection {
		reflection.Register(srv)
	}
	a.metrics.InitializeGRPC(srv)
	probe := grpcapi.NewHealthProbe(healthSrv, quorumProbe(a.stmts), 2*time.Second, log)

	var loop *reconciler.Loop
	if cfg.reconcilerOn {
		if loop, err = a.reconciler(cfg, log); err != nil {
			return err
		}
	}

	healthOnly, err := healthListener(cfg.healthAddr, healthSrv)
	if err != nil {
		return err
	}

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return probe.Run(gctx) })
	g.Go(func() error { return a.clock.Run(gctx) })
	sec.watch(gctx, g, cfg.sec.reloadInterval, log)
	if loop != nil {
		g.Go(func() error { return loop.Run(gctx) })
	}
	obs.serveMetrics(gctx, g, log)
	healthOnly.serve(gctx, g, log)
	g.Go(func() error {
		log.Info("serving", append(buildinfo.LogAttrs(), "grpc_addr", lis.Addr().String(), "keyspace", cfg.keyspace, "tls", sec.creds != nil, "reflection", cfg.sec.reflection)...)
		if err := srv.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("grpc server: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		log.Info("shutting down", "grace", cfg.shutdownGrace.String())
		healthSrv.Shutdown()
		done := make(chan struct{})
		go func() { srv.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-time.After(cfg.shutdownGrace):
			log.Warn("graceful stop timed out; closing open calls")
			srv.Stop()
		}
		healthOnly.stop()
		return nil
	})
	return g.Wait()
}

// listen binds addr, the value of the setting flag, for what it serves; its
// error names the address, the setting and the cause:
// "listen for gRPC on 127.0.0.1:8080 (grpc-addr, ORDERD_GRPC_ADDR): bind:
// address already in use".
func listen(what, flag, addr string) (net.Listener, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) {
			err = op.Err // its text repeats the address
		}
		return nil, fmt.Errorf("listen for %s on %s (%s, %s): %w", what, addr, flag, envName(flag), err)
	}
	return lis, nil
}

// streamWorkers is how many goroutines serve calls from the pool: enough
// for every call in flight at the concurrency orderd is sized for; idle
// ones cost a small stack each.
const streamWorkers = 256

// transportLimits bound what one client can hold or send: streams per
// connection, the size of a request, how often it may ping (keepalive
// enforcement: a client pinging more than every 10 s is disconnected), and
// how long a connection lives.
func transportLimits(cfg *config) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxConcurrentStreams(uint32(cfg.maxStreams)),
		// Calls run on a pool of long-lived goroutines instead of a new
		// one each: a call's path (interceptors, workflow, driver) is deep,
		// and a fresh goroutine grows its stack to it by copying on every
		// call. A call finding every worker busy gets a goroutine of its
		// own, as without the pool.
		grpc.NumStreamWorkers(streamWorkers),
		grpc.MaxRecvMsgSize(cfg.maxRecvBytes),
		// Stop (the shutdown grace ran out) cancels the calls still open
		// and waits for their handlers to return: a handler that outlived
		// it would hand the workflow a background delivery after the
		// workflow was waited for, on a publisher and session being closed.
		grpc.WaitForHandlers(true),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionAge:      cfg.maxConnAge,
			MaxConnectionAgeGrace: cfg.requestTimeout, // a call in flight may finish
			Time:                  2 * time.Minute,
			Timeout:               20 * time.Second,
		}),
	}
}

// deadlineInterceptor bounds every call by d: a call without a deadline
// gets one, and a client deadline later than d is cut to d. So a call that
// waits for a PENDING request is always bounded, and no claim is sent after
// the reconciler may have presumed its request abandoned.
func deadlineInterceptor(d time.Duration) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		// WithTimeout keeps an earlier client deadline and caps a later one
		// (or none) at d. The cap is what makes the reconciler's grace safe:
		// it must outlast every claim a handler may still send or resend.
		ctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		return handler(ctx, req)
	}
}

// connect opens a session, retrying for cfg.connectWait so that orderd can
// start alongside a cluster that is still coming up.
func connect(ctx context.Context, cfg *config, keyspace string, log *slog.Logger) (*gocql.Session, error) {
	return connectObserved(ctx, cfg, keyspace, log, nil)
}

// connectObserved is connect with a QueryObserver (nil for none) on the session.
func connectObserved(ctx context.Context, cfg *config, keyspace string, log *slog.Logger, observer gocql.QueryObserver) (*gocql.Session, error) {
	cc, err := cfg.cassandraConfig(keyspace, observer)
	if err != nil {
		return nil, err
	}
	var (
		s        *gocql.Session
		badLogin bool
	)
	err = keepTrying(ctx, cfg.connectWait, startRetryPause, log, "cluster not reachable yet; retrying", func() (bool, error) {
		var err error
		s, err = cassandra.NewSession(cc)
		badLogin = err != nil && cassandra.IsBadCredentials(err)
		return !badLogin, err
	})
	switch {
	case badLogin:
		return nil, fmt.Errorf("the cluster refused the login of role %q: check ORDERD_CASSANDRA_USERNAME and the password file: %w", cfg.cassandraAccess.Username, err)
	case err != nil && ctx.Err() == nil:
		return nil, fmt.Errorf("%w (is the cluster up? `make cluster-up` starts the local one)", err)
	}
	return s, err
}

// checkSchema checks that the keyspace is fully migrated (cql.Check),
// asking again for cfg.connectWait while the cluster does not answer: a
// node lost just before orderd starts can time out its first reads until
// its peers take it for down, and a process that exited then would only be
// restarted into the same wait. A keyspace that is behind fails at once.
func checkSchema(ctx context.Context, cfg *config, s cassandra.Session, log *slog.Logger) error {
	return keepTrying(ctx, cfg.connectWait, startRetryPause, log, "cluster not answering the schema check yet; retrying", func() (bool, error) {
		err := cql.Check(ctx, s, cfg.keyspace)
		return fault.KindOf(err) == fault.Unavailable, err
	})
}

// startRetryPause is the pause between two tries of a start-up step.
const startRetryPause = 2 * time.Second

// keepTrying runs try until it succeeds, says not to try again, or wait has
// passed since the first try (0: one try), pausing between tries and
// logging each failure it tries again after with msg. It returns try's last
// error, or the context's if it ends first.
func keepTrying(ctx context.Context, wait, pause time.Duration, log *slog.Logger, msg string, try func() (again bool, err error)) error {
	deadline := time.Now().Add(wait)
	for {
		again, err := try()
		if err == nil || !again || time.Now().After(deadline) {
			return err
		}
		log.Warn(msg, "error", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
	}
}
