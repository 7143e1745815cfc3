package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/atlasmart/orderd/cql"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
)

// TestMigrationLWTsUnknownOutcomes runs the migrator through a FaultSession
// on the real cluster: the lease LWT applied with its response lost (settled
// as held: no two-minute wait for its TTL), the version records applied but
// answered as timeouts, or not sent at all (settled, then sent again), and
// the lease LWT timing out unapplied (not held: wait and take it again).
func TestMigrationLWTsUnknownOutcomes(t *testing.T) {
	isolated(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ks := fmt.Sprintf("e2e_migfault_%d", time.Now().UnixNano()/1e6)
	t.Cleanup(func() { dropKeyspace(context.Background(), ks) })
	s, err := cassandra.NewSession(cassandra.Config{Hosts: cluster.ContactPoints(), Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fs := cassandra.NewFaultSession(cassandra.Wrap(s))
	versions, err := cql.Versions(ks)
	if err != nil {
		t.Fatal(err)
	}

	fs.Arm("migrate.lock", cassandra.FaultLoseResponse, 1)
	fs.Arm("migrate.record", cassandra.FaultLoseResponse, 1)
	fs.Arm("migrate.record", cassandra.FaultTimeout, 1)
	start := time.Now()
	res, err := cql.Migrate(ctx, fs, cql.Config{Keyspace: ks})
	if err != nil {
		t.Fatalf("migrate through lost responses: %v", err)
	}
	if len(res.Applied) != len(versions) || res.Current != versions[len(versions)-1].Number {
		t.Fatalf("migrate applied %v (current %d), want all %d versions", res.Applied, res.Current, len(versions))
	}
	if fs.Hits("migrate.lock") != 1 || fs.Hits("migrate.record") != 2 {
		t.Fatalf("faults served: lock %d, record %d; want 1 and 2", fs.Hits("migrate.lock"), fs.Hits("migrate.record"))
	}
	t.Logf("migrated %s through a lost lease response and two lost records in %s", ks, time.Since(start).Round(time.Millisecond))
	assertRecorded(t, s, ks, len(versions))
	assertLeaseFree(t, s, ks)

	// Un-record the last version (as if its run had stopped half way) and
	// migrate again with the lease LWT timing out unapplied.
	last := versions[len(versions)-1].Number
	if applied, err := s.Query(fmt.Sprintf(`DELETE FROM %s.schema_migrations WHERE version = ? IF EXISTS`, ks), last).
		SerialConsistency(gocql.LocalSerial).MapScanCASContext(ctx, map[string]any{}); err != nil || !applied {
		t.Fatalf("un-record version %d: %v %v", last, applied, err)
	}
	if err := cql.Check(ctx, cassandra.Wrap(s), ks); err == nil {
		t.Fatal("cql.Check passed on a keyspace missing a version")
	}
	fs.Arm("migrate.lock", cassandra.FaultTimeout, 1)
	res, err = cql.Migrate(ctx, fs, cql.Config{Keyspace: ks})
	if err != nil || len(res.Applied) != 1 || res.Applied[0] != last {
		t.Fatalf("re-migrate after an unapplied lease timeout: %v %v, want version %d applied", res, err, last)
	}
	assertRecorded(t, s, ks, len(versions))
	assertLeaseFree(t, s, ks)
	if err := cql.Check(ctx, cassandra.Wrap(s), ks); err != nil {
		t.Fatalf("cql.Check after the migration: %v", err)
	}
}

func assertRecorded(t *testing.T, s *gocql.Session, ks string, want int) {
	t.Helper()
	var n int
	if err := s.Query(fmt.Sprintf(`SELECT count(*) FROM %s.schema_migrations`, ks)).Consistency(gocql.LocalSerial).
		ScanContext(callCtx(t), &n); err != nil || n != want {
		t.Fatalf("schema_migrations holds %d versions (%v), want %d", n, err, want)
	}
}

func assertLeaseFree(t *testing.T, s *gocql.Session, ks string) {
	t.Helper()
	var owner gocql.UUID
	err := s.Query(fmt.Sprintf(`SELECT owner FROM %s.schema_lock WHERE id = 'migrate'`, ks)).Consistency(gocql.LocalSerial).
		ScanContext(callCtx(t), &owner)
	if err != gocql.ErrNotFound {
		t.Fatalf("the migration lease is still held after the run (owner %v, %v)", owner, err)
	}
}
