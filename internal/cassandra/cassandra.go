// Package cassandra owns orderd's connection to the cluster: one session
// configured with the driver policies the write path depends on, and the one
// place where driver errors become fault kinds. Everything else sees
// *gocql.Session through it and never inspects driver error types.
//
// Driver policy, deliberately:
//   - Token-aware routing over DC-aware round robin (replicas of the local DC
//     first, shuffled), so a coordinator is usually a replica.
//   - LOCAL_QUORUM for reads and plain writes, LOCAL_SERIAL for LWTs; both are
//     set on the session so no statement falls back to the server's SERIAL.
//   - The driver retries only statements marked idempotent (projection upserts
//     with pinned timestamps). LWTs are never marked idempotent: an unknown
//     LWT outcome is settled with a LOCAL_SERIAL read, not a blind retry.
//   - No speculative execution.
//   - Timeouts are ordered: server write timeout (2 s) < CAS contention
//     (1 s) + write < driver timeout (Config.Timeout, 5 s) < handler deadline.
package cassandra

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/atlasmart/orderd/internal/fault"
)

// Config names the cluster and how to talk to it.
type Config struct {
	// Hosts are contact points; default 127.0.0.1,127.0.0.2,127.0.0.3.
	Hosts []string
	// Port is the native protocol port; default 9042.
	Port int
	// LocalDC is the data centre whose replicas serve LOCAL_* requests; default dc1.
	LocalDC string
	// Keyspace the session uses; empty for none (the migrator's session).
	Keyspace string
	// Timeout bounds one request as the driver sees it; default 5 s. It must
	// outlive the server's own write and CAS timeouts so the server answers first.
	Timeout time.Duration
	// ConnectTimeout bounds each connection attempt; default 5 s.
	ConnectTimeout time.Duration
}

// WithDefaults fills zero fields.
func (c Config) WithDefaults() Config {
	if len(c.Hosts) == 0 {
		c.Hosts = []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}
	}
	if c.Port == 0 {
		c.Port = 9042
	}
	if c.LocalDC == "" {
		c.LocalDC = "dc1"
	}
	if c.Timeout == 0 {
		c.Timeout = 5 * time.Second
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = 5 * time.Second
	}
	return c
}

// NewSession connects to the cluster.
func NewSession(cfg Config) (*gocql.Session, error) {
	cfg = cfg.WithDefaults()
	cluster := gocql.NewCluster(cfg.Hosts...)
	cluster.Port = cfg.Port
	cluster.Keyspace = cfg.Keyspace
	cluster.Consistency = gocql.LocalQuorum
	cluster.SerialConsistency = gocql.LocalSerial
	cluster.Timeout = cfg.Timeout
	cluster.ConnectTimeout = cfg.ConnectTimeout
	cluster.PoolConfig.HostSelectionPolicy = gocql.TokenAwareHostPolicy(
		gocql.DCAwareRoundRobinPolicy(cfg.LocalDC), gocql.ShuffleReplicas())
	// Retries apply only to statements marked Idempotent(true).
	cluster.RetryPolicy = &gocql.ExponentialBackoffRetryPolicy{NumRetries: 2, Min: 50 * time.Millisecond, Max: 500 * time.Millisecond}
	cluster.ReconnectInterval = 2 * time.Second
	session, err := cluster.CreateSession()
	if err != nil {
		return nil, &fault.Error{Kind: fault.Unavailable, Reason: "CLUSTER_UNAVAILABLE",
			Message: "cannot reach the Cassandra cluster", Cause: fmt.Errorf("connect to %s: %w", strings.Join(cfg.Hosts, ","), err)}
	}
	return session, nil
}

// WriteError converts an error from a write. It keeps "definitely not
// written" (Unavailable) apart from "may have been written" (OutcomeUnknown).
func WriteError(op string, err error) error {
	if err == nil {
		return nil
	}
	kind := fault.Internal
	switch {
	case definitelyNotApplied(err):
		kind = fault.Unavailable
	case mayHaveApplied(err):
		kind = fault.OutcomeUnknown
	}
	return convert(op, kind, err)
}

// ReadError converts an error from a read: any transient failure is
// Unavailable, since a read changes nothing.
func ReadError(op string, err error) error {
	if err == nil {
		return nil
	}
	kind := fault.Internal
	if definitelyNotApplied(err) || mayHaveApplied(err) || isReadTimeout(err) {
		kind = fault.Unavailable
	}
	return convert(op, kind, err)
}

func convert(op string, kind fault.Kind, err error) error {
	fe := &fault.Error{Kind: kind, Cause: fmt.Errorf("%s: %w", op, err)}
	switch kind {
	case fault.Unavailable:
		fe.Reason, fe.Message, fe.RetryAfter = "CLUSTER_UNAVAILABLE", "the database is unavailable; retry with the same request_id", time.Second
	case fault.OutcomeUnknown:
		fe.Reason, fe.Message, fe.RetryAfter = "OUTCOME_UNKNOWN", "the outcome of a write is unknown; retry with the same request_id to settle it", time.Second
	default:
		fe.Reason, fe.Message = "INTERNAL", "internal error"
	}
	return fe
}

func definitelyNotApplied(err error) bool {
	var unavailable *gocql.RequestErrUnavailable
	var overloaded *gocql.RequestErrOverloaded
	var bootstrapping *gocql.RequestErrBootstrapping
	return errors.As(err, &unavailable) || errors.As(err, &overloaded) || errors.As(err, &bootstrapping) ||
		errors.Is(err, gocql.ErrNoConnections) || errors.Is(err, gocql.ErrSessionClosed) ||
		errors.Is(err, gocql.ErrUnavailable) || errors.Is(err, gocql.ErrNoStreams) || errors.Is(err, gocql.ErrNoHosts) || errors.Is(err, gocql.ErrNoConnectionsStarted)
}

func mayHaveApplied(err error) bool {
	var writeTimeout *gocql.RequestErrWriteTimeout
	var casUnknown *gocql.RequestErrCASWriteUnknown
	var writeFailure *gocql.RequestErrWriteFailure
	return errors.As(err, &writeTimeout) || errors.As(err, &casUnknown) || errors.As(err, &writeFailure) ||
		errors.Is(err, gocql.ErrTimeoutNoResponse) || errors.Is(err, gocql.ErrConnectionClosed) || errors.Is(err, gocql.ErrTooManyTimeouts) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

func isReadTimeout(err error) bool {
	var readTimeout *gocql.RequestErrReadTimeout
	var readFailure *gocql.RequestErrReadFailure
	return errors.As(err, &readTimeout) || errors.As(err, &readFailure)
}
