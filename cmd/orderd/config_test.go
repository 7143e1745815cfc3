package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/atlasmart/orderd/projection"
)

// TestProjectionBatchSetting: -projection-batch / ORDERD_PROJECTION_BATCH
// is projection.DefaultBatch unless set, and outside 0-10 it is refused
// before connecting (over 10 partitions, Cassandra warns of every batch).
func TestProjectionBatchSetting(t *testing.T) {
	for _, tc := range []struct {
		env     string
		args    []string
		want    int
		refused bool
	}{
		{"", nil, projection.DefaultBatch, false},
		{"1", nil, 1, false},
		{"", []string{"-projection-batch", "10"}, 10, false},
		{"4", []string{"-projection-batch", "2"}, 2, false},
		{"11", nil, 0, true},
		{"", []string{"-projection-batch", "-1"}, 0, true},
	} {
		cfg, err := serveConfig(t, "ORDERD_PROJECTION_BATCH", tc.env, tc.args)
		if tc.refused {
			if err == nil || !strings.Contains(err.Error(), "projection-batch") {
				t.Errorf("%q %v: validate = %v, want projection-batch refused", tc.env, tc.args, err)
			}
			continue
		}
		if err != nil || cfg.projectionBatch != tc.want {
			t.Errorf("%q %v: batch %d (validate %v), want %d", tc.env, tc.args, cfg.projectionBatch, err, tc.want)
		}
	}
}

// serveConfig is serve's config parsed from args with the environment
// variable name set to value (unset when value is empty: an empty number
// is refused as not a number), and what validate says of it.
func serveConfig(t *testing.T, name, value string, args []string) (config, error) {
	t.Helper()
	t.Setenv(name, value)
	if value == "" {
		os.Unsetenv(name)
	}
	t.Setenv("ORDERD_INSECURE", "true") // validate checks the security settings of serve too
	if name != "ORDERD_KAFKA_PLAINTEXT" {
		t.Setenv("ORDERD_KAFKA_PLAINTEXT", "true") // and the Kafka connection's
	}
	var cfg config
	if err := cfg.flags("serve").Parse(args); err != nil {
		t.Fatalf("%s=%q %v: %v", name, value, args, err)
	}
	return cfg, cfg.validate("serve")
}

// A numeric setting outside the range it can work in is refused before
// anything connects, naming the flag and its variable: a request timeout
// of 0 would fail every call, a reconcile grace of 0 would silently become
// 30 s behind the grace-versus-timeout check, a negative grace would make
// claims due while their handler still works on them, a NaN rate or 0 gRPC
// streams would lift a limit, 0 receive bytes would refuse every request.
func TestSettingsOutOfRangeAreRefusedNamingTheVariable(t *testing.T) {
	for _, tc := range []struct{ flag, value string }{
		{"cql-timeout", "0s"},
		{"connect-wait", "-1s"},
		{"replication-factor", "0"},
		{"retention", "30s"},
		{"retention", "100000h"},
		{"takeover-after", "-1s"},
		{"replay-cache-size", "-5"},
		{"reconcile-grace", "0s"},
		{"reconcile-grace", "-1s"},
		{"reconcile-interval", "0s"},
		{"reconcile-concurrency", "0"},
		{"reconcile-max-attempts", "0"},
		{"reconcile-backoff", "-5s"},
		{"reconcile-backoff-max", "1s"},
		{"kafka-partitions", "0"},
		{"kafka-linger", "-1ms"},
		{"kafka-linger", "2s"},
		{"publish-timeout", "0s"},
		{"request-timeout", "0s"},
		{"shutdown-grace", "-1s"},
		{"rate-attempts", "-1"},
		{"rate-attempts", "NaN"},
		{"rate-replays", "NaN"},
		{"rate-replays", "+Inf"},
		{"grpc-max-streams", "0"},
		{"grpc-max-streams", "4294967296"},
		{"grpc-max-recv-bytes", "0"},
		{"grpc-max-recv-bytes", "1023"},
		{"grpc-max-connection-age", "0s"},
	} {
		name := envName(tc.flag)
		t.Run(name+"="+tc.value, func(t *testing.T) {
			_, err := serveConfig(t, name, tc.value, nil)
			if err == nil || !strings.Contains(err.Error(), tc.flag+" ("+name+") is ") {
				t.Errorf("validate = %v, want it refused naming %s and %s", err, tc.flag, name)
			}
		})
	}
	// The edges that work are accepted.
	for _, tc := range []struct{ name, value string }{
		{"ORDERD_CONNECT_WAIT", "0s"},
		{"ORDERD_REPLAY_CACHE_SIZE", "0"},
		{"ORDERD_SHUTDOWN_GRACE", "0s"},
		{"ORDERD_RETENTION", "1m"},
		{"ORDERD_RECONCILE_BACKOFF_MAX", "5s"}, // equal to the first backoff
		{"ORDERD_KAFKA_LINGER", "0s"},
		{"ORDERD_KAFKA_LINGER", "1s"},
		{"ORDERD_RATE_ATTEMPTS", "0"},
		{"ORDERD_GRPC_MAX_STREAMS", "1"},
		{"ORDERD_GRPC_MAX_STREAMS", "4294967295"},
		{"ORDERD_GRPC_MAX_RECV_BYTES", "1024"},
	} {
		t.Run(tc.name+"="+tc.value, func(t *testing.T) {
			if _, err := serveConfig(t, tc.name, tc.value, nil); err != nil {
				t.Errorf("validate = %v, want accepted", err)
			}
		})
	}
}

// A linger of 0 reaches the publisher as "none", not as its default.
func TestKafkaLingerZeroMeansNone(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  time.Duration
	}{{"0s", -1}, {"20ms", 20 * time.Millisecond}} {
		cfg, err := serveConfig(t, "ORDERD_KAFKA_LINGER", tc.value, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.publisherLinger(); got != tc.want {
			t.Errorf("ORDERD_KAFKA_LINGER=%s: the publisher's linger is %v, want %v", tc.value, got, tc.want)
		}
	}
}

// Every problem is named in one error, and a command is checked only for
// the settings it has: migrate has no request timeout or reconciler.
func TestSettingsCheckedAllAtOnceAndOnlyTheCommandsOwn(t *testing.T) {
	t.Setenv("ORDERD_REQUEST_TIMEOUT", "0s")
	t.Setenv("ORDERD_RECONCILE_CONCURRENCY", "0")
	_, err := serveConfig(t, "ORDERD_KAFKA_PARTITIONS", "0", nil)
	for _, want := range []string{"ORDERD_REQUEST_TIMEOUT", "ORDERD_RECONCILE_CONCURRENCY", "ORDERD_KAFKA_PARTITIONS"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("validate = %v, want %s named", err, want)
		}
	}
	var cfg config
	if err := cfg.flags("migrate").Parse(nil); err != nil {
		t.Fatal(err)
	}
	if err := cfg.validate("migrate"); err != nil {
		t.Errorf("migrate with serve's settings out of range: validate = %v, want nil (it has none of them)", err)
	}
}

// The reconcile grace must be shorter than the retention: a PENDING
// request's row and due entry would expire before it falls due.
func TestReconcileGraceShorterThanRetention(t *testing.T) {
	t.Setenv("ORDERD_RECONCILE_GRACE", "2h")
	_, err := serveConfig(t, "ORDERD_RETENTION", "1h", nil)
	if err == nil || !strings.Contains(err.Error(), "reconcile-grace (2h0m0s) must be shorter than retention (1h0m0s)") {
		t.Errorf("validate = %v, want the grace refused against the retention", err)
	}
}

// The reconcile grace must cover all a claim can take to land after its due
// entry was dated: the call's deadline, the driver's timeout, and the skew
// of both clocks. A grace of the request timeout and a nanosecond let a
// claim still in the coordinator's hands be judged abandoned.
func TestReconcileGraceCoversTheLatestClaim(t *testing.T) {
	for _, c := range []struct {
		grace, request, cql, skew string
		ok                        bool
	}{
		{grace: "30s", request: "15s", cql: "5s", skew: "2s", ok: true}, // the defaults: 30 > 24
		{grace: "15.000000001s", request: "15s", cql: "5s", skew: "2s"},
		{grace: "24s", request: "15s", cql: "5s", skew: "2s"}, // equal is not enough
		{grace: "24.001s", request: "15s", cql: "5s", skew: "2s", ok: true},
		{grace: "30s", request: "15s", cql: "5s", skew: "6s"}, // a wider skew needs more
	} {
		t.Setenv("ORDERD_REQUEST_TIMEOUT", c.request)
		t.Setenv("ORDERD_CQL_TIMEOUT", c.cql)
		t.Setenv("ORDERD_MAX_CLOCK_SKEW", c.skew)
		_, err := serveConfig(t, "ORDERD_RECONCILE_GRACE", c.grace, nil)
		if c.ok && err != nil {
			t.Errorf("%+v: validate = %v, want it accepted", c, err)
		}
		if !c.ok && (err == nil || !strings.Contains(err.Error(), "must exceed request-timeout")) {
			t.Errorf("%+v: validate = %v, want the grace refused against request-timeout + cql-timeout + 2 x max-clock-skew", c, err)
		}
	}
}

// Kafka is reached over SASL_SSL unless plaintext is asked for: serve
// without a Kafka login is refused before anything connects, naming the
// settings; with one (or with plaintext asked for) it is accepted.
func TestKafkaLoginRequiredUnlessPlaintextIsAsked(t *testing.T) {
	_, err := serveConfig(t, "ORDERD_KAFKA_PLAINTEXT", "", nil)
	if err == nil || !strings.Contains(err.Error(), "kafka-username and kafka-password-file") {
		t.Fatalf("no Kafka login: validate = %v, want it refused naming the settings", err)
	}
	if _, err := serveConfig(t, "ORDERD_KAFKA_PLAINTEXT", "true", nil); err != nil {
		t.Fatalf("plaintext asked for: %v", err)
	}
	t.Setenv("ORDERD_KAFKA_USERNAME", "orderd")
	t.Setenv("ORDERD_KAFKA_PASSWORD_FILE", "/run/secrets/kafka")
	if _, err := serveConfig(t, "ORDERD_KAFKA_PLAINTEXT", "false", nil); err != nil {
		t.Fatalf("login set: %v", err)
	}
	if _, err := serveConfig(t, "ORDERD_KAFKA_PLAINTEXT", "true", nil); err == nil {
		t.Fatal("plaintext with a login: accepted, want refused")
	}
}
