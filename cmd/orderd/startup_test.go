package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/atlasmart/orderd/cql"
	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/platform/cassandra/cassandratest"
)

func TestKeepTrying(t *testing.T) {
	errNotYet := errors.New("not yet")
	errFinal := errors.New("final")
	for _, c := range []struct {
		name      string
		wait      time.Duration
		results   []error // try's errors in turn; the last repeats
		again     func(error) bool
		wantErr   error
		wantTries int
		wantLines int
	}{
		{"tries again until it succeeds", time.Minute, []error{errNotYet, errNotYet, nil}, func(error) bool { return true }, nil, 3, 2},
		{"stops at once when told not to", time.Minute, []error{errFinal}, func(error) bool { return false }, errFinal, 1, 0},
		{"stops at the first error not to try again", time.Minute, []error{errNotYet, errFinal}, func(err error) bool { return err == errNotYet }, errFinal, 2, 1},
		{"one try with no wait", 0, []error{errNotYet}, func(error) bool { return true }, errNotYet, 1, 0},
		{"gives up once the wait has passed", 30 * time.Millisecond, []error{errNotYet}, func(error) bool { return true }, errNotYet, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logs bytes.Buffer
			tries := 0
			start := time.Now()
			err := keepTrying(context.Background(), c.wait, 5*time.Millisecond, slog.New(slog.NewTextHandler(&logs, nil)), "not there yet",
				func() (bool, error) {
					err := c.results[min(tries, len(c.results)-1)]
					tries++
					return c.again(err), err
				})
			if !errors.Is(err, c.wantErr) || (c.wantErr == nil && err != nil) {
				t.Fatalf("keepTrying = %v, want %v", err, c.wantErr)
			}
			lines := strings.Count(logs.String(), `msg="not there yet"`)
			if c.wantTries == 0 { // until the wait: at least two tries, every one but the last logged
				if tries < 2 || lines != tries-1 || time.Since(start) < c.wait {
					t.Fatalf("%d tries, %d lines in %s; want tries for %s, each but the last logged", tries, lines, time.Since(start), c.wait)
				}
				return
			}
			if tries != c.wantTries || lines != c.wantLines {
				t.Fatalf("%d tries and %d log lines, want %d and %d:\n%s", tries, lines, c.wantTries, c.wantLines, logs.String())
			}
		})
	}
}

func TestKeepTryingStopsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	tries := 0
	err := keepTrying(ctx, time.Minute, time.Hour, discard(), "not there yet", func() (bool, error) {
		tries++
		cancel() // ends the pause after this try
		return true, errors.New("not yet")
	})
	if !errors.Is(err, context.Canceled) || tries != 1 {
		t.Fatalf("keepTrying = %v after %d tries, want context.Canceled after 1", err, tries)
	}
}

// The start-up schema check asks again while the cluster does not answer
// (a read timeout, as just after a node is lost), and fails at once, with
// the hint to migrate, when the keyspace itself is behind. The session
// answers every read with no rows, so once the timeout is served the
// keyspace reads as never migrated.
func TestSchemaCheckAsksAgainWhileTheClusterDoesNotAnswer(t *testing.T) {
	s := cassandra.NewFaultSession(cassandratest.NewRecorder(gocql.LocalSerial))
	s.Arm("migrate.applied", cassandra.FaultTimeout, 1)
	var logs bytes.Buffer
	cfg := &config{keyspace: "orderd", connectWait: time.Minute}
	err := checkSchema(context.Background(), cfg, s, slog.New(slog.NewTextHandler(&logs, nil)))
	if err == nil || !strings.Contains(err.Error(), "keyspace orderd lacks schema versions") || !strings.Contains(err.Error(), "run `orderd migrate`") {
		t.Fatalf("checkSchema = %v, want the keyspace found behind once the cluster answered", err)
	}
	if s.Hits("migrate.applied") != 1 || strings.Count(logs.String(), "retrying") != 1 {
		t.Fatalf("timeouts served %d, retry lines:\n%s; want one of each", s.Hits("migrate.applied"), logs.String())
	}

	// With no time to wait, the timeout is the answer: Unavailable, and no
	// hint to migrate a keyspace that may well be migrated.
	s.Arm("migrate.applied", cassandra.FaultTimeout, 1)
	logs.Reset()
	cfg.connectWait = 0
	err = checkSchema(context.Background(), cfg, s, slog.New(slog.NewTextHandler(&logs, nil)))
	if fault.KindOf(err) != fault.Unavailable || strings.Contains(err.Error(), "orderd migrate") || logs.Len() != 0 {
		t.Fatalf("checkSchema = %v (kind %s), log %q; want Unavailable without a hint to migrate, nothing logged", err, fault.KindOf(err), logs.String())
	}
}

// A migration the cluster refuses as UNAVAILABLE (as a node just started
// can, before it counts its peers as up) runs again and completes; with no
// time to wait, the refusal is the answer. The recorder applies every
// conditional write and finds no row, so a migration that got through
// records every schema version.
func TestMigrationRunsAgainWhileTheClusterDoesNotAnswer(t *testing.T) {
	versions, err := cql.Versions("orderd")
	if err != nil {
		t.Fatal(err)
	}
	rec := cassandratest.NewRecorder(gocql.LocalSerial)
	s := cassandra.NewFaultSession(rec)
	s.Arm("migrate.applied", cassandra.FaultUnavailable, 1)
	var logs bytes.Buffer
	cfg := &config{keyspace: "orderd", connectWait: time.Minute}
	if err := migrateKeyspace(context.Background(), cfg, s, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
		t.Fatalf("migrateKeyspace = %v, want the migration done once the cluster answered", err)
	}
	records := 0
	for _, r := range rec.Runs() {
		if r.Name == cql.StmtRecord {
			records++
		}
	}
	if s.Hits("migrate.applied") != 1 || strings.Count(logs.String(), "retrying") != 1 || records != len(versions) {
		t.Fatalf("refusals served %d, versions recorded %d of %d, log:\n%s; want one refusal, one retry line, every version recorded",
			s.Hits("migrate.applied"), records, len(versions), logs.String())
	}

	s.Arm("migrate.applied", cassandra.FaultUnavailable, 1)
	logs.Reset()
	cfg.connectWait = 0
	err = migrateKeyspace(context.Background(), cfg, s, slog.New(slog.NewTextHandler(&logs, nil)))
	if fault.KindOf(err) != fault.Unavailable || strings.Contains(logs.String(), "retrying") {
		t.Fatalf("migrateKeyspace = %v (kind %s), log %q; want Unavailable after one try", err, fault.KindOf(err), logs.String())
	}
}
