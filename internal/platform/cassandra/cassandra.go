// Package cassandra owns orderd's connection to the cluster: one session
// configured with the driver policies the write path depends on, and the one
// place where driver errors become fault kinds. Everything else sees
// a Session (session.go) through it and never inspects driver error types.
//
// Driver policy, deliberately:
//   - Token-aware routing over DC-aware round robin (replicas of the local DC
//     first, shuffled), so a coordinator is usually a replica.
//   - LOCAL_QUORUM for reads and plain writes. Every Paxos round (the
//     serial phase of an LWT, and the serial reads that settle one) runs at
//     one serial consistency, Config.Serial: LOCAL_SERIAL by default (a
//     round within the local DC), SERIAL for claims that hold across data
//     centres (ORDERD_SERIAL_CONSISTENCY, docs/operations.md "Multi-DC").
//     This package owns that level: it is set on the session, so no
//     statement falls back to the server's default, and Session.Serial
//     hands it to the stores, which never name a serial level themselves.
//   - The driver retries only statements marked idempotent (projection upserts
//     with pinned timestamps). LWTs are never marked idempotent: an unknown
//     LWT outcome is settled with a serial read, not a blind retry.
//   - No speculative execution.
//   - Timeouts are ordered: server write timeout (2 s) < CAS contention
//     (1 s) + write < driver timeout (Config.Timeout, 5 s) < handler deadline.
package cassandra

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/atlasmart/orderd/internal/domain/fault"
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
	// QueryObserver, if set, is told of every statement attempt (its text,
	// context, timing and error): metrics and tracing hook in here
	// (metrics.NewCQLObserver) without the stores knowing. If it is also a
	// gocql.BatchObserver, it is told of every batch too.
	QueryObserver gocql.QueryObserver
	// Username and Password, if set, log in with Cassandra's
	// PasswordAuthenticator. Never logged.
	Username, Password string
	// TLS, if set, encrypts every connection to the cluster.
	TLS *TLS
	// Serial is the consistency of every Paxos round: gocql.LocalSerial
	// (default; linearizable within the local DC) or gocql.Serial
	// (linearizable across every DC, at a cross-DC round trip per phase).
	// See ParseSerial.
	Serial gocql.Consistency
}

// ParseSerial reads a serial consistency setting: "local_serial" or
// "serial" (any case; "" is local_serial).
func ParseSerial(name string) (gocql.Consistency, error) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "", "local_serial":
		return gocql.LocalSerial, nil
	case "serial":
		return gocql.Serial, nil
	}
	return 0, fmt.Errorf("serial consistency %q: use local_serial or serial", name)
}

// TLS is client encryption to the cluster.
type TLS struct {
	// CAFile: PEM certificates that sign the nodes' certificates; required.
	CAFile string
	// CertFile and KeyFile: a client certificate, for clusters that require
	// one (require_client_auth); optional.
	CertFile, KeyFile string
	// SkipHostVerification accepts a node certificate that does not name the
	// node's address (still signed by CAFile). Off by default.
	SkipHostVerification bool
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
	if c.Serial == gocql.Any { // the zero value: unset
		c.Serial = gocql.LocalSerial
	}
	return c
}

// NewSession connects to the cluster.
func NewSession(cfg Config) (*gocql.Session, error) {
	cluster, err := clusterConfig(cfg)
	if err != nil {
		return nil, err
	}
	session, err := cluster.CreateSession()
	if err != nil {
		return nil, fault.New(fault.ReasonClusterUnavailable, fmt.Errorf("connect to %s: %w", strings.Join(cluster.Hosts, ","), err))
	}
	return session, nil
}

// clusterConfig is the driver configuration of cfg.
func clusterConfig(cfg Config) (*gocql.ClusterConfig, error) {
	cfg = cfg.WithDefaults()
	if cfg.Serial != gocql.LocalSerial && cfg.Serial != gocql.Serial {
		return nil, fmt.Errorf("serial consistency %s: want LOCAL_SERIAL or SERIAL", cfg.Serial)
	}
	cluster := gocql.NewCluster(cfg.Hosts...)
	cluster.Port = cfg.Port
	cluster.Keyspace = cfg.Keyspace
	cluster.Consistency = gocql.LocalQuorum
	// Wrap reads this back, so the stores' serial reads use the level of
	// the session's LWTs.
	cluster.SerialConsistency = cfg.Serial
	cluster.Timeout = cfg.Timeout
	cluster.ConnectTimeout = cfg.ConnectTimeout
	// Token-aware, replicas in ring order, never shuffled: every statement
	// on one partition is coordinated by the same replica while it is up,
	// so concurrent LWTs on one request (a retry storm) do not race Paxos
	// ballots from three coordinators. Load still spreads: each replica is
	// first for its share of the ring.
	cluster.PoolConfig.HostSelectionPolicy = gocql.TokenAwareHostPolicy(
		gocql.DCAwareRoundRobinPolicy(cfg.LocalDC), gocql.DoNotShuffleReplicas())
	// Retries apply only to statements marked Idempotent(true).
	cluster.RetryPolicy = &gocql.ExponentialBackoffRetryPolicy{NumRetries: 2, Min: 50 * time.Millisecond, Max: 500 * time.Millisecond}
	cluster.ReconnectInterval = 2 * time.Second
	// Each statement is written to its connection when it is issued, not
	// held up to 200 µs to be coalesced with others (the driver's
	// default): side by side (3,000 new orders at 32 streams, alternating
	// runs) orderd used about 14% less CPU per request this way, at the
	// same throughput and no worse latency; measured again with
	// `orderbench run -phases cost` against builds waiting 50 µs and
	// 200 µs (3,000 new orders at 16 and 64 streams, one run), waiting
	// cost 3-10% more CPU per order and gained no throughput.
	cluster.WriteCoalesceWaitTime = 0
	if cfg.QueryObserver != nil {
		cluster.QueryObserver = cfg.QueryObserver
		if b, ok := cfg.QueryObserver.(gocql.BatchObserver); ok {
			cluster.BatchObserver = b // batches count as their statement
		}
	}
	if cfg.Username != "" {
		cluster.Authenticator = gocql.PasswordAuthenticator{Username: cfg.Username, Password: cfg.Password}
	}
	if cfg.TLS != nil {
		if cfg.TLS.CAFile == "" {
			return nil, errors.New("cassandra TLS needs a CA file")
		}
		cluster.SslOpts = &gocql.SslOptions{
			Config:                 &tls.Config{MinVersion: tls.VersionTLS12},
			CaPath:                 cfg.TLS.CAFile,
			CertPath:               cfg.TLS.CertFile,
			KeyPath:                cfg.TLS.KeyFile,
			EnableHostVerification: !cfg.TLS.SkipHostVerification,
		}
	}
	return cluster, nil
}

// WriteError converts an error from a write. It keeps "definitely not
// written" (Unavailable) apart from "may have been written"
// (OutcomeUnknown). Any failure on the way to or from the server that is not
// known to have stopped the request before it was sent (a reset connection,
// a timeout) may have applied; only what the server refused or cannot accept
// (syntax, invalid query, bad values) is Internal.
func WriteError(op string, err error) error {
	if err == nil {
		return nil
	}
	kind := fault.OutcomeUnknown
	switch {
	case definitelyNotApplied(err):
		kind = fault.Unavailable
	case isBug(err):
		kind = fault.Internal
	}
	return convert(op, kind, err)
}

// ReadError converts an error from a read: any failure that is not a bug is
// Unavailable, since a read changes nothing.
func ReadError(op string, err error) error {
	if err == nil {
		return nil
	}
	kind := fault.Unavailable
	if isBug(err) {
		kind = fault.Internal
	}
	return convert(op, kind, err)
}

func convert(op string, kind fault.Kind, err error) error {
	reason := fault.ReasonInternal
	switch kind {
	case fault.Unavailable:
		reason = fault.ReasonClusterUnavailable
	case fault.OutcomeUnknown:
		reason = fault.ReasonOutcomeUnknown
	}
	return fault.New(reason, fmt.Errorf("%s: %w", op, err))
}

// definitelyNotApplied: the request never reached a replica (no
// connection, no stream) or the coordinator refused it before writing
// (Unavailable, overloaded, bootstrapping).
func definitelyNotApplied(err error) bool {
	var unavailable *gocql.RequestErrUnavailable
	var overloaded *gocql.RequestErrOverloaded
	var bootstrapping *gocql.RequestErrBootstrapping
	return errors.As(err, &unavailable) || errors.As(err, &overloaded) || errors.As(err, &bootstrapping) ||
		errors.Is(err, gocql.ErrNoConnections) || errors.Is(err, gocql.ErrSessionClosed) ||
		errors.Is(err, gocql.ErrUnavailable) || errors.Is(err, gocql.ErrNoStreams) || errors.Is(err, gocql.ErrNoHosts) ||
		errors.Is(err, gocql.ErrNoConnectionsStarted)
}

// isBug: the server answered that the statement itself is wrong, or the
// driver could not encode or decode a value. Retrying cannot help.
func isBug(err error) bool {
	var (
		syntax       *gocql.RequestErrSyntax
		invalid      *gocql.RequestErrInvalid
		config       *gocql.RequestErrConfig
		unauthorized *gocql.RequestErrUnauthorized
		credentials  *gocql.RequestErrCredentials
		function     *gocql.RequestErrFunctionFailure
		marshal      gocql.MarshalError
		unmarshal    gocql.UnmarshalError
	)
	return errors.As(err, &syntax) || errors.As(err, &invalid) || errors.As(err, &config) ||
		errors.As(err, &unauthorized) || errors.As(err, &credentials) || errors.As(err, &function) ||
		errors.As(err, &marshal) || errors.As(err, &unmarshal) || errors.Is(err, gocql.ErrQueryArgLength)
}

// IsBadCredentials reports whether err is the cluster refusing the login
// (a wrong username or password, or a login it requires and did not get):
// retrying cannot help.
func IsBadCredentials(err error) bool {
	var re gocql.RequestError
	if errors.As(err, &re) && re.Code() == gocql.ErrCodeCredentials {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "password are incorrect") || strings.Contains(msg, "authentication required")
}
