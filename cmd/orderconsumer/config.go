package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/platform/kafkaconn"
	"github.com/atlasmart/orderd/internal/platform/tracing"
)

// envPrefix: every flag -some-name falls back to ORDERCONSUMER_SOME_NAME.
const envPrefix = "ORDERCONSUMER_"

// config is every setting of the consumer.
type config struct {
	brokers           string
	topic             string
	group             string
	fromStart         bool
	kafka             kafkaconn.Settings
	cassandra         string
	cassandraAccess   cassandra.Access
	localDC           string
	keyspace          string
	replicationFactor int
	metricsAddr       string
	logFormat         string
	logLevel          string
	tracing           string
	shutdownGrace     time.Duration
	sessionTimeout    time.Duration
}

// parseConfig reads flags from args; a flag not on the command line takes
// its environment variable (lookupEnv, normally os.LookupEnv), then its
// default.
func parseConfig(args []string, lookupEnv func(string) (string, bool), output io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("orderconsumer", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.StringVar(&c.brokers, "brokers", "127.0.0.1:19092", "comma-separated Kafka seed brokers")
	fs.StringVar(&c.topic, "topic", "atlasmart.orders.v1.events", "topic of the order events")
	fs.StringVar(&c.group, "group", "orderconsumer", "Kafka consumer group")
	c.kafka.RegisterFlags(fs, flagDefaults{})
	fs.BoolVar(&c.fromStart, "from-start", true,
		"where a partition without a committed offset starts: its oldest record (false: its newest)")
	fs.StringVar(&c.cassandra, "cassandra", "127.0.0.1,127.0.0.2,127.0.0.3", "comma-separated Cassandra contact points")
	c.cassandraAccess.RegisterFlags(fs, flagDefaults{})
	// dc1, not Cassandra's stock datacenter1: the repository's clusters
	// (internal/tools/localcluster, e2e's containers) and orderd name their data centre
	// dc1, and Cassandra 5 refuses a keyspace replicated to a data centre
	// it does not know ("Unrecognized strategy option {datacenter1}").
	fs.StringVar(&c.localDC, "local-dc", "dc1",
		"Cassandra data centre served at LOCAL_QUORUM / LOCAL_SERIAL, and where the keyspace is replicated")
	fs.StringVar(&c.keyspace, "keyspace", "orderconsumer", "keyspace of the consumer's tables (created if missing)")
	fs.IntVar(&c.replicationFactor, "replication-factor", 3, "replicas in the local data centre when the keyspace is created")
	fs.StringVar(&c.metricsAddr, "metrics-addr", "", "listen address of Prometheus /metrics; empty: off")
	fs.StringVar(&c.logFormat, "log-format", "json", "json or text")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error (debug: a line per applied record)")
	fs.StringVar(&c.tracing, "tracing", "off", "span exporter: "+tracing.Modes+" (OTEL_* variables configure otlp); off still continues the producer's trace in log lines")
	fs.DurationVar(&c.shutdownGrace, "shutdown-grace", 20*time.Second, "how long the poll in hand may finish after SIGINT/SIGTERM")
	fs.DurationVar(&c.sessionTimeout, "session-timeout", 45*time.Second,
		"how long the group waits for a member that stopped answering before its partitions move (a killed member's records wait this long; the broker allows 6s to 30m)")
	fs.VisitAll(func(f *flag.Flag) { f.Usage += " (env " + envName(f.Name) + ")" })

	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments %q: orderconsumer takes flags only", fs.Args())
	}
	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if v, ok := lookupEnv(envName(f.Name)); ok && !onCommandLine[f.Name] {
			// Set parses as the flag would, so a bad value fails the same way.
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", envName(f.Name), v, err))
			}
		}
	})
	if len(errs) == 0 {
		errs = append(errs, c.kafka.Check(), c.cassandraAccess.Check())
	}
	return c, errors.Join(errs...)
}

// flagDefaults gives the shared flags (kafkaconn.Settings,
// cassandra.Access) their plain defaults: the environment is read after
// parsing, for every flag alike.
type flagDefaults struct{}

func (flagDefaults) String(_, fallback string) string  { return fallback }
func (flagDefaults) Bool(_ string, fallback bool) bool { return fallback }

func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// list splits a comma-separated flag value, dropping empty items.
func list(csv string) []string {
	var out []string
	for _, s := range strings.Split(csv, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// logger writes to w; a line logged for a record carries the record's
// trace (tracing.LogHandler).
func (c config) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		return nil, fmt.Errorf("log level %q: %w", c.logLevel, err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch c.logFormat {
	case "json":
		return slog.New(tracing.LogHandler(slog.NewJSONHandler(w, opts))), nil
	case "text":
		return slog.New(tracing.LogHandler(slog.NewTextHandler(w, opts))), nil
	}
	return nil, fmt.Errorf("log format %q: use json or text", c.logFormat)
}
