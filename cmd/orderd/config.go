package main

import (
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/atlasmart/orderd/internal/adapters/outbox"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/platform/kafkaconn"
	"github.com/atlasmart/orderd/internal/platform/tracing"
	"github.com/atlasmart/orderd/ledger"
	"github.com/atlasmart/orderd/projection"
)

// config is every setting of orderd. Flags take their defaults from ORDERD_*
// environment variables, so containers can use either.
type config struct {
	contactPointsCSV  string
	localDC           string
	serialConsistency string
	claimCommit       string
	keyspace          string
	replicationFactor int
	cqlTimeout        time.Duration
	connectWait       time.Duration
	cassandraAccess   cassandra.Access
	grpcAddr          string
	healthAddr        string
	tenant            string
	retention         time.Duration
	takeoverAfter     time.Duration
	replayCacheSize   int
	projectionBatch   int
	rateAttempts      float64
	rateReplays       float64
	rateReads         float64
	requestTimeout    time.Duration
	shutdownGrace     time.Duration
	maxStreams        int
	maxRecvBytes      int
	maxConnAge        time.Duration
	pageTokenKey      keyFlag
	sec               securityConfig
	logFormat         string
	logLevel          string
	failpoints        string
	cqlFaults         string
	maxClockSkew      time.Duration
	clockLead         time.Duration // test builds only: this process's clock runs ahead

	reconcilerOn         bool
	reconcileGrace       time.Duration
	reconcileConcurrency int
	reconcileInterval    time.Duration
	reconcileMaxAttempts int
	reconcileBackoff     time.Duration
	reconcileBackoffMax  time.Duration

	deliveryOn      bool
	kafkaBrokersCSV string
	kafkaConn       kafkaconn.Settings
	kafkaTopic      string
	kafkaPartitions int
	kafkaLinger     time.Duration
	publishTimeout  time.Duration

	verifyAcks             string
	verifyDelivered        bool
	verifyConsumerKeyspace string

	copyConcurrency int

	republishFrom, republishTo timeFlag
	republishDryRun            bool

	healthTimeout time.Duration // healthcheck's wait for an answer

	metricsAddr         string
	metricsAddrExplicit bool // set by flag or environment, not the default
	pprof               bool
	tracing             string

	envErrs []string      // ORDERD_* values that did not parse
	envRead []string      // every ORDERD_* variable the command's settings read, for its help
	defined *flag.FlagSet // the command's flags: only its own settings are checked
}

func (c *config) flags(cmd string) *flag.FlagSet {
	fs := flag.NewFlagSet("orderd "+cmd, flag.ContinueOnError)
	c.defined = fs
	if cmd == "healthcheck" { // it reads serve's addresses and certificate, nothing of the cluster
		c.healthcheckFlags(fs)
		c.nameVariables(fs)
		return fs
	}
	fs.StringVar(&c.contactPointsCSV, "cassandra-contact-points", c.env("ORDERD_CASSANDRA_CONTACT_POINTS", "127.0.0.1,127.0.0.2,127.0.0.3"), "comma-separated Cassandra contact points")
	fs.StringVar(&c.localDC, "local-dc", c.env("ORDERD_LOCAL_DC", "dc1"), "data centre served at LOCAL_QUORUM / LOCAL_SERIAL")
	fs.StringVar(&c.serialConsistency, "serial-consistency", c.env("ORDERD_SERIAL_CONSISTENCY", "local_serial"), "Paxos level of every LWT and of the reads that settle one: local_serial (claims hold within the local DC) or serial (across every DC, at a cross-DC round trip; docs/operations.md, Multi-DC)")
	fs.StringVar(&c.keyspace, "keyspace", c.env("ORDERD_KEYSPACE", "orderd"), "keyspace")
	fs.IntVar(&c.replicationFactor, "replication-factor", c.envInt("ORDERD_REPLICATION_FACTOR", 3), "replication factor in the local DC when migrate creates the keyspace (1 for a one-node dev cluster)")
	fs.DurationVar(&c.cqlTimeout, "cql-timeout", c.envDuration("ORDERD_CQL_TIMEOUT", 5*time.Second), "driver timeout of one CQL request (longer than the server's write and CAS timeouts)")
	c.cassandraAccess.RegisterFlags(fs, envDefaults{c})
	fs.DurationVar(&c.connectWait, "connect-wait", c.envDuration("ORDERD_CONNECT_WAIT", 60*time.Second), "how long to keep trying, at start, to reach the cluster, and then again to get an answer to the schema check (or, for migrate, to get the migration through)")
	fs.StringVar(&c.logFormat, "log-format", c.env("ORDERD_LOG_FORMAT", "json"), "json or text")
	fs.StringVar(&c.logLevel, "log-level", c.env("ORDERD_LOG_LEVEL", "info"), "debug, info, warn or error")
	fs.StringVar(&c.cqlFaults, "cql-faults", c.env("ORDERD_CQL_FAULTS", ""), "CQL statement faults to arm, for tests only: statement=unavailable|timeout|lose-response[*N];... (see internal/platform/cassandra.FaultSession)")
	if cmd != "migrate" && cmd != "copy-listing" {
		fs.DurationVar(&c.retention, "retention", c.envDuration("ORDERD_RETENTION", 7*24*time.Hour), "how long the ledger remembers a request (its TTL)")
		fs.DurationVar(&c.takeoverAfter, "takeover-after", c.envDuration("ORDERD_TAKEOVER_AFTER", time.Second), "age after which a retry finishes a PENDING request itself instead of waiting")
		fs.Float64Var(&c.rateAttempts, "rate-attempts", c.envFloat("ORDERD_RATE_ATTEMPTS", 2000), "CreateOrder calls per second per tenant that may reach the database (new requests, and duplicates the replay cache cannot answer); over it: RESOURCE_EXHAUSTED; 0: unlimited")
		fs.Float64Var(&c.rateReplays, "rate-replays", c.envFloat("ORDERD_RATE_REPLAYS", 10000), "duplicates per second per tenant answered from the replay cache; over it: RESOURCE_EXHAUSTED; 0: unlimited")
		fs.Float64Var(&c.rateReads, "rate-reads", c.envFloat("ORDERD_RATE_READS", 5000), "reads per second per tenant (GetOrder, GetRequest, a call of ListCustomerOrders or ListRequests); over it: RESOURCE_EXHAUSTED; 0: unlimited")
		fs.IntVar(&c.replayCacheSize, "replay-cache-size", c.envInt("ORDERD_REPLAY_CACHE_SIZE", 10_000), "recent recorded outcomes kept in memory to answer duplicates without a ledger read (a few hundred bytes each); 0 disables")
		fs.IntVar(&c.projectionBatch, "projection-batch", c.envInt("ORDERD_PROJECTION_BATCH", projection.DefaultBatch), "most orders whose rows of one projection table share one write (an unlogged batch), or whose reads share one query, when they meet under load; 1: every row and read alone (docs/architecture.md, \"Group-committed projection rows and grouped reads\")")
		fs.StringVar(&c.failpoints, "failpoints", c.env("ORDERD_FAILPOINTS", ""), "failpoints to arm, for tests only (see internal/platform/failpoint)")
		fs.DurationVar(&c.clockLead, "clock-lead", c.envDuration("ORDERD_CLOCK_LEAD", 0), "run this process's clock this far ahead of the machine's, for tests only (test builds)")
		fs.DurationVar(&c.maxClockSkew, "max-clock-skew", c.envDuration("ORDERD_MAX_CLOCK_SKEW", 2*time.Second), "largest difference from the cluster's clock (measured every 10 s) at which this process claims requests and reconciles; beyond it, new requests are refused CLOCK_SKEWED and the reconciler gives up its shards")
		fs.DurationVar(&c.reconcileGrace, "reconcile-grace", c.envDuration("ORDERD_RECONCILE_GRACE", 30*time.Second), "age at which a PENDING request is presumed abandoned and finished by the reconciler (must exceed request-timeout + cql-timeout + 2 x max-clock-skew)")
		fs.DurationVar(&c.reconcileInterval, "reconcile-interval", c.envDuration("ORDERD_RECONCILE_INTERVAL", 2*time.Second), "pause between reconciler passes")
		fs.IntVar(&c.reconcileConcurrency, "reconcile-concurrency", c.envInt("ORDERD_RECONCILE_CONCURRENCY", 64), "due requests a reconciler pass finishes at once, over all its shards")
		fs.IntVar(&c.reconcileMaxAttempts, "reconcile-max-attempts", c.envInt("ORDERD_RECONCILE_MAX_ATTEMPTS", 5), "failed attempts after which a request counts as stuck (it is still retried)")
		fs.DurationVar(&c.reconcileBackoff, "reconcile-backoff", c.envDuration("ORDERD_RECONCILE_BACKOFF", 5*time.Second), "first backoff between attempts of one request (doubles, with jitter)")
		fs.DurationVar(&c.reconcileBackoffMax, "reconcile-backoff-max", c.envDuration("ORDERD_RECONCILE_BACKOFF_MAX", 5*time.Minute), "longest backoff between attempts")
	}
	if cmd == "serve" || cmd == "reconcile" || cmd == "deliver" || cmd == "republish" {
		fs.BoolVar(&c.deliveryOn, "delivery", c.envBool("ORDERD_DELIVERY", true), "publish every accepted order's event to Kafka (docs/outbox.md); false: no events")
		fs.StringVar(&c.kafkaBrokersCSV, "kafka-brokers", c.env("ORDERD_KAFKA_BROKERS", "127.0.0.1:19092"), "comma-separated Kafka seed brokers (host:port)")
		c.kafkaConn.RegisterFlags(fs, envDefaults{c})
		fs.StringVar(&c.kafkaTopic, "kafka-topic", c.env("ORDERD_KAFKA_TOPIC", outbox.DefaultTopic), "topic order events are published to")
		fs.IntVar(&c.kafkaPartitions, "kafka-partitions", c.envInt("ORDERD_KAFKA_PARTITIONS", 12), "partitions of the events topic when orderd creates it (an existing topic is left as it is)")
		fs.DurationVar(&c.kafkaLinger, "kafka-linger", c.envDuration("ORDERD_KAFKA_LINGER", outbox.DefaultLinger), "how long a partition's first buffered event waits for more to share its produce request (delivery latency traded for fewer broker requests; the client's answer never waits for it)")
		fs.DurationVar(&c.publishTimeout, "publish-timeout", c.envDuration("ORDERD_PUBLISH_TIMEOUT", 10*time.Second), "how long one publication of an event waits for the broker's acknowledgement")
	}
	if cmd == "requeue" {
		fs.StringVar(&c.tenant, "tenant", c.env("ORDERD_TENANT", "default"), "tenant of the request to requeue")
	}
	if cmd == "republish" {
		fs.StringVar(&c.tenant, "tenant", c.env("ORDERD_TENANT", "default"), "tenant whose orders' events to publish again")
		fs.Var(&c.republishFrom, "from", "publish the events of orders created at or after this time (RFC 3339); required")
		fs.Var(&c.republishTo, "to", "... and before this time (RFC 3339); default now")
		fs.BoolVar(&c.republishDryRun, "dry-run", false, "count the orders and events, publish nothing")
	}
	if cmd == "verify" {
		fs.StringVar(&c.verifyAcks, "acks", "", "JSON lines of acknowledged outcomes (from orderload -acks) to check against the rows")
		fs.BoolVar(&c.verifyDelivered, "delivered", false, "check that every order (the acknowledged ones, given -acks) older than the reconcile grace has its event acknowledged by Kafka")
		fs.StringVar(&c.verifyConsumerKeyspace, "consumer-keyspace", "", "a reference consumer's keyspace (cmd/orderconsumer): check that every order (the acknowledged ones, given -acks) older than the reconcile grace was applied there once")
	}
	if cmd == "copy-listing" {
		fs.IntVar(&c.copyConcurrency, "concurrency", 32, "rows written at once")
	}
	if cmd == "serve" || cmd == "reconcile" || cmd == "deliver" {
		fs.StringVar(&c.metricsAddr, "metrics-addr", c.env("ORDERD_METRICS_ADDR", "127.0.0.1:9090"), "HTTP listen address of /metrics (Prometheus); empty disables")
		_, c.metricsAddrExplicit = os.LookupEnv("ORDERD_METRICS_ADDR")
		fs.BoolVar(&c.pprof, "pprof", c.envBool("ORDERD_PPROF", false), "serve Go profiles at /debug/pprof/ on the metrics listener")
	}
	if cmd == "serve" {
		fs.StringVar(&c.claimCommit, "claim-commit", c.env("ORDERD_CLAIM_COMMIT", "local_quorum"), "consistency of the claim LWT's Paxos commit: local_quorum, or any (one round trip less per new order; needs paxos_state_purging: repaired and paxos repair on every node, checked at start: docs/operations.md, \"Claim commit at ANY\")")
		fs.StringVar(&c.tracing, "tracing", c.env("ORDERD_TRACING", "off"), "OpenTelemetry tracing: off, stdout (spans on stderr) or otlp (OTLP/gRPC to OTEL_EXPORTER_OTLP_ENDPOINT)")
		fs.BoolVar(&c.reconcilerOn, "reconciler", c.envBool("ORDERD_RECONCILER", true), "run the reconciler inside serve")
		c.listenFlags(fs)
		fs.DurationVar(&c.requestTimeout, "request-timeout", c.envDuration("ORDERD_REQUEST_TIMEOUT", 15*time.Second), "the longest any call runs: calls without a deadline get it, later client deadlines are cut to it")
		fs.DurationVar(&c.shutdownGrace, "shutdown-grace", c.envDuration("ORDERD_SHUTDOWN_GRACE", 20*time.Second), "how long open calls may finish after SIGTERM")
		fs.IntVar(&c.maxStreams, "grpc-max-streams", c.envInt("ORDERD_GRPC_MAX_STREAMS", 256), "concurrent calls one connection may have open")
		fs.IntVar(&c.maxRecvBytes, "grpc-max-recv-bytes", c.envInt("ORDERD_GRPC_MAX_RECV_BYTES", 1<<20), "largest request message accepted (larger: RESOURCE_EXHAUSTED, nothing read)")
		fs.DurationVar(&c.maxConnAge, "grpc-max-connection-age", c.envDuration("ORDERD_GRPC_MAX_CONNECTION_AGE", 30*time.Minute), "connections are closed gracefully after this long (clients reconnect, so load spreads over new instances)")
		c.pageTokenKey = c.envKey("ORDERD_PAGE_TOKEN_KEY")
		c.sec.flags(fs, c)
		fs.Var(&c.pageTokenKey, "page-token-key", "key signing ListCustomerOrders page tokens: hex or base64, at least 32 bytes, the same on every instance; unset: a random key per process (prefer the environment variable: a flag shows in ps)")
	}
	c.nameVariables(fs)
	return fs
}

// listenFlags are serve's listen addresses, which healthcheck reads too.
func (c *config) listenFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.grpcAddr, "grpc-addr", c.env("ORDERD_GRPC_ADDR", "127.0.0.1:8080"), "gRPC listen address")
	fs.StringVar(&c.healthAddr, "health-addr", c.env("ORDERD_HEALTH_ADDR", ""), "plaintext listener serving only gRPC health, for probes that cannot use TLS or credentials (Kubernetes): service \"\" is readiness, \"liveness\" is SERVING while the process runs; empty disables")
}

// healthcheckFlags are the settings of healthcheck: serve's, read from the
// same variables, so that in serve's container it finds serve's port.
func (c *config) healthcheckFlags(fs *flag.FlagSet) {
	c.listenFlags(fs)
	fs.StringVar(&c.sec.tlsCertFile, "tls-cert-file", c.env("ORDERD_TLS_CERT_FILE", ""), "serve's PEM certificate: set, the check speaks TLS to -grpc-addr and accepts only this certificate (unused with -health-addr)")
	fs.DurationVar(&c.healthTimeout, "timeout", 5*time.Second, "how long the check waits for an answer")
}

func (c *config) contactPoints() []string { return splitList(c.contactPointsCSV) }

// claimCommitAny reports whether claims commit at ANY (-claim-commit any);
// commands without the flag commit at LOCAL_QUORUM (they claim nothing).
func (c *config) claimCommitAny() (bool, error) {
	switch strings.ToLower(c.claimCommit) {
	case "", "local_quorum":
		return false, nil
	case "any":
		return true, nil
	}
	return false, fmt.Errorf("claim-commit %q: use local_quorum or any", c.claimCommit)
}

// cassandraConfig is the driver configuration for keyspace ("" for none),
// with the login and TLS settings; the password is read from its file now.
func (c *config) cassandraConfig(keyspace string, observer gocql.QueryObserver) (cassandra.Config, error) {
	serial, err := cassandra.ParseSerial(c.serialConsistency)
	if err != nil {
		return cassandra.Config{}, err
	}
	cc := cassandra.Config{Hosts: c.contactPoints(), LocalDC: c.localDC, Keyspace: keyspace, Timeout: c.cqlTimeout,
		QueryObserver: observer, Serial: serial}
	return cc, c.cassandraAccess.Apply(&cc)
}

func (c *config) kafkaBrokers() []string { return splitList(c.kafkaBrokersCSV) }

// splitList is a comma-separated list's non-empty items, trimmed.
func splitList(csv string) []string {
	var out []string
	for _, h := range strings.Split(csv, ",") {
		if h = strings.TrimSpace(h); h != "" {
			out = append(out, h)
		}
	}
	return out
}

func (c *config) logger() (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		return nil, fmt.Errorf("log level %q: %w", c.logLevel, err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch c.logFormat {
	case "json":
		return slog.New(tracing.LogHandler(slog.NewJSONHandler(os.Stderr, opts))), nil
	case "text":
		return slog.New(tracing.LogHandler(slog.NewTextHandler(os.Stderr, opts))), nil
	}
	return nil, fmt.Errorf("log format %q: use json or text", c.logFormat)
}

func (c *config) envBool(name string, def bool) bool {
	c.envRead = append(c.envRead, name)
	if v, ok := os.LookupEnv(name); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			c.envErrs = append(c.envErrs, fmt.Sprintf("%s=%q is not true or false", name, v))
		}
		return b
	}
	return def
}

// envDefaults gives a shared flag (cassandra.Access, kafkaconn.Settings)
// its ORDERD_* variable as default, as every other flag has, and records
// the variable as read (the help lists it).
type envDefaults struct{ c *config }

func (d envDefaults) String(flag, fallback string) string { return d.c.env(envName(flag), fallback) }
func (d envDefaults) Bool(flag string, fallback bool) bool {
	return d.c.envBool(envName(flag), fallback)
}

func (c *config) env(name, def string) string {
	c.envRead = append(c.envRead, name)
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

func (c *config) envInt(name string, def int) int {
	c.envRead = append(c.envRead, name)
	if v, ok := os.LookupEnv(name); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			c.envErrs = append(c.envErrs, fmt.Sprintf("%s=%q is not a number", name, v))
		}
		return n
	}
	return def
}

func (c *config) envFloat(name string, def float64) float64 {
	c.envRead = append(c.envRead, name)
	if v, ok := os.LookupEnv(name); ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			c.envErrs = append(c.envErrs, fmt.Sprintf("%s=%q is not a number", name, v))
		}
		return f
	}
	return def
}

func (c *config) envDuration(name string, def time.Duration) time.Duration {
	c.envRead = append(c.envRead, name)
	if v, ok := os.LookupEnv(name); ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			c.envErrs = append(c.envErrs, fmt.Sprintf("%s=%q is not a duration like 5s", name, v))
		}
		return d
	}
	return def
}

// graceBound checks that a claim can no longer land once its due entry is
// due. The entry is dated when the claim is made; the claim can be sent
// until the call's deadline (request-timeout), and once sent the
// coordinator may still apply it until the driver gives up on it
// (cql-timeout, longer than the server's own write and CAS timeouts;
// retries and re-sends are all made before the deadline). The entry is
// dated by the claimant's clock and judged due by the reconciler's, each
// within max-clock-skew of the cluster's (clockskew: beyond it neither
// claims nor reconciles). A reconciler that finds no row for a due entry
// drops it, so the grace must cover all of it, or a claim landing later
// would have no entry.
func (c *config) graceBound() error {
	if c.reconcileGrace <= 0 || c.requestTimeout <= 0 || c.cqlTimeout <= 0 || c.maxClockSkew <= 0 {
		return nil // the range check names those
	}
	if need := c.requestTimeout + c.cqlTimeout + 2*c.maxClockSkew; c.reconcileGrace <= need {
		return fmt.Errorf("reconcile-grace (%s) must exceed request-timeout (%s) + cql-timeout (%s) + 2 x max-clock-skew (%s) = %s: "+
			"a claim could still land after its due entry fell due, and the reconciler would drop the entry as the claim of no request",
			c.reconcileGrace, c.requestTimeout, c.cqlTimeout, c.maxClockSkew, need)
	}
	return nil
}

// timeFlag is a flag holding an RFC 3339 time.
type timeFlag struct{ t time.Time }

func (f *timeFlag) String() string {
	if f.t.IsZero() {
		return ""
	}
	return f.t.Format(time.RFC3339Nano)
}

func (f *timeFlag) Set(s string) error {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return fmt.Errorf("want an RFC 3339 time such as 2026-12-01T00:00:00Z: %w", err)
	}
	f.t = t.UTC()
	return nil
}

// validate reports settings that cannot work.
func (c *config) validate(cmd string) error {
	if len(c.envErrs) > 0 {
		return fmt.Errorf("bad settings: %s", strings.Join(c.envErrs, "; "))
	}
	if errs := c.rangeErrors(); len(errs) > 0 {
		return fmt.Errorf("bad settings: %s", strings.Join(errs, "; "))
	}
	if cmd == "serve" {
		if err := c.sec.validate(); err != nil {
			return err
		}
	}
	if c.has("retention") && c.reconcileGrace >= c.retention {
		return fmt.Errorf("reconcile-grace (%s) must be shorter than retention (%s): a PENDING request's row would expire before the reconciler looks at it", c.reconcileGrace, c.retention)
	}
	if err := c.graceBound(); err != nil {
		return err
	}
	if _, err := c.claimCommitAny(); err != nil {
		return err
	}
	switch c.tracing {
	case "", "off", "stdout", "otlp":
	default:
		return fmt.Errorf("tracing %q: use off, stdout or otlp", c.tracing)
	}
	if c.deliveryOn && len(c.kafkaBrokers()) == 0 {
		return fmt.Errorf("delivery is on but no Kafka brokers are set: set ORDERD_KAFKA_BROKERS, or ORDERD_DELIVERY=false")
	}
	if c.projectionBatch < 0 || c.projectionBatch > 10 {
		return fmt.Errorf("projection-batch %d: use 1 to 10 (0: the default, %d): a batch over 10 partitions makes Cassandra warn", c.projectionBatch, projection.DefaultBatch)
	}
	if err := c.cassandraAccess.Check(); err != nil {
		return err
	}
	if c.deliveryOn {
		if err := c.kafkaConn.Check(); err != nil {
			return err
		}
	}
	if len(c.contactPoints()) == 0 {
		return fmt.Errorf("no Cassandra contact points: set ORDERD_CASSANDRA_CONTACT_POINTS")
	}
	return nil
}

// validRate reports whether r is a rate limit that works: 0 (unlimited) or
// a finite positive number. NaN compares false both ways, so "not
// negative" is asked as ">= 0": a NaN rate would admit every call.
func validRate(r float64) bool { return r >= 0 && !math.IsInf(r, 0) }

// minRecvBytes is the least grpc-max-recv-bytes: a CreateOrder of a few
// lines.
const minRecvBytes = 1024

// rangeErrors names every numeric setting of the command outside the range
// it can work in, by flag and variable, so that one failed start shows them
// all. Zero is refused where the services would read it as "use the
// default" (a setting the operator wrote as 0 is not a request for 30 s),
// and wherever it cannot work (a request timeout of 0 fails every call).
func (c *config) rangeErrors() []string {
	checks := []struct {
		flag string
		ok   bool
		got  any
		want string
	}{
		{"cql-timeout", c.cqlTimeout > 0, c.cqlTimeout, "a positive duration"},
		{"connect-wait", c.connectWait >= 0, c.connectWait, "0 (one try) or more"},
		{"replication-factor", c.replicationFactor >= 1, c.replicationFactor, "at least 1"},
		{"retention", c.retention >= ledger.MinRetention && c.retention <= ledger.MaxRetention, c.retention,
			fmt.Sprintf("between %s and %s", ledger.MinRetention, ledger.MaxRetention)},
		{"takeover-after", c.takeoverAfter > 0, c.takeoverAfter, "a positive duration"},
		{"replay-cache-size", c.replayCacheSize >= 0, c.replayCacheSize, "0 (off) or more"},
		{"reconcile-grace", c.reconcileGrace > 0, c.reconcileGrace, "a positive duration"},
		{"max-clock-skew", c.maxClockSkew > 0, c.maxClockSkew, "a positive duration"},
		{"reconcile-interval", c.reconcileInterval > 0, c.reconcileInterval, "a positive duration"},
		{"reconcile-concurrency", c.reconcileConcurrency >= 1, c.reconcileConcurrency, "at least 1"},
		{"reconcile-max-attempts", c.reconcileMaxAttempts >= 1, c.reconcileMaxAttempts, "at least 1"},
		{"reconcile-backoff", c.reconcileBackoff > 0, c.reconcileBackoff, "a positive duration"},
		{"reconcile-backoff-max", c.reconcileBackoffMax >= c.reconcileBackoff, c.reconcileBackoffMax,
			fmt.Sprintf("at least reconcile-backoff (%s)", c.reconcileBackoff)},
		{"kafka-partitions", c.kafkaPartitions >= 1, c.kafkaPartitions, "at least 1"},
		{"kafka-linger", c.kafkaLinger >= 0 && c.kafkaLinger <= time.Second, c.kafkaLinger, "0 (send at once) up to 1s"},
		{"publish-timeout", c.publishTimeout > 0, c.publishTimeout, "a positive duration"},
		{"request-timeout", c.requestTimeout > 0, c.requestTimeout, "a positive duration"},
		{"shutdown-grace", c.shutdownGrace >= 0, c.shutdownGrace, "0 (stop at once) or more"},
		{"rate-attempts", validRate(c.rateAttempts), c.rateAttempts, "0 (unlimited) or a positive number"},
		{"rate-replays", validRate(c.rateReplays), c.rateReplays, "0 (unlimited) or a positive number"},
		{"rate-reads", validRate(c.rateReads), c.rateReads, "0 (unlimited) or a positive number"},
		// gRPC reads 0 streams as no limit at all, and 0 bytes refuses
		// every request with a body.
		{"grpc-max-streams", c.maxStreams >= 1 && c.maxStreams <= math.MaxUint32, c.maxStreams, "1 to 4294967295"},
		{"grpc-max-recv-bytes", c.maxRecvBytes >= minRecvBytes, c.maxRecvBytes, fmt.Sprintf("at least %d", minRecvBytes)},
		{"grpc-max-connection-age", c.maxConnAge > 0, c.maxConnAge, "a positive duration"},
	}
	var errs []string
	for _, ch := range checks {
		if !ch.ok && c.has(ch.flag) {
			errs = append(errs, fmt.Sprintf("%s (%s) is %v, want %s", ch.flag, envName(ch.flag), ch.got, ch.want))
		}
	}
	return errs
}

// has reports whether the command has the setting flag.
func (c *config) has(flag string) bool { return c.defined != nil && c.defined.Lookup(flag) != nil }

// envName is the environment variable of flag: ORDERD_ and the flag's name
// in upper case, dashes as underscores.
func envName(flag string) string {
	return "ORDERD_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// publisherLinger is kafka-linger as the publisher takes it: its zero
// means its default, so "send at once" is negative.
func (c *config) publisherLinger() time.Duration {
	if c.kafkaLinger == 0 {
		return -1
	}
	return c.kafkaLinger
}
