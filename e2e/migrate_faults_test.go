package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/atlasmart/orderd/cql"
	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
)

// TestMigrationLWTsUnknownOutcomes runs the migrator through a FaultSession
// on the real cluster: the lease LWT applied with its response lost (settled
// as held: no two-minute wait for its TTL), the version records applied but
// answered as timeouts, or not sent at all (settled, then sent again), and
// the lease LWT timing out unapplied (not held: wait and take it again).
// Its lease lasts 4 s and is renewed every second, through a renewal whose
// response is lost (settled as applied by the taken_at it wrote) and one
// timing out unapplied (settled, sent again): it outlives a run stalled
// longer than its TTL.
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
	fs.Arm(cql.StmtRenew, cassandra.FaultLoseResponse, 1)
	fs.Arm(cql.StmtRenew, cassandra.FaultTimeout, 1)
	// The first version's record waits 6 s, longer than the lease's TTL,
	// then looks at the lease: still this run's.
	var owner gocql.UUID
	var ownerErr error
	fs.Before(cql.StmtRecord, func() {
		time.Sleep(6 * time.Second)
		ownerErr = s.Query(fmt.Sprintf(`SELECT owner FROM %s.schema_lock WHERE id = 'migrate'`, ks)).
			Consistency(gocql.LocalSerial).ScanContext(ctx, &owner)
	})
	start := time.Now()
	res, err := cql.Migrate(ctx, fs, cql.Config{Keyspace: ks, LeaseTTL: 4 * time.Second})
	if err != nil {
		t.Fatalf("migrate through lost responses: %v", err)
	}
	if ownerErr != nil {
		t.Fatalf("6 s into a run with a 4 s lease, the lease was gone (%v): it was not renewed", ownerErr)
	}
	if fs.Pending(cql.StmtRenew) != 0 {
		t.Fatalf("%d renewal faults never served: the run did not renew the lease", fs.Pending(cql.StmtRenew))
	}
	if len(res.Applied) != len(versions) || res.Current != versions[len(versions)-1].Number {
		t.Fatalf("migrate applied %v (current %d), want all %d versions", res.Applied, res.Current, len(versions))
	}
	if fs.Hits("migrate.lock") != 1 || fs.Hits("migrate.record") != 2 {
		t.Fatalf("faults served: lock %d, record %d; want 1 and 2", fs.Hits("migrate.lock"), fs.Hits("migrate.record"))
	}
	t.Logf("migrated %s through a lost lease response, two lost records and two lost renewals in %s", ks, time.Since(start).Round(time.Millisecond))
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

// assertStopped fails unless a run stopped before it recorded every one of
// all versions.
func assertStopped(t *testing.T, s *gocql.Session, ks string, res cql.Result, all int) {
	t.Helper()
	var n int
	if err := s.Query(fmt.Sprintf(`SELECT count(*) FROM %s.schema_migrations`, ks)).Consistency(gocql.LocalSerial).
		ScanContext(callCtx(t), &n); err != nil || n >= all || len(res.Applied) >= all {
		t.Fatalf("the run went on after it lost its lease: applied %v, %d of %d versions recorded (%v)", res.Applied, n, all, err)
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

// TestMigrationLeaseRenewed runs the migrator with a 4 s lease (renewed
// every second) on the real cluster through the renewals that end a run
// (those it survives are TestMigrationLWTsUnknownOutcomes's): not applied
// (another migrator took the lease: the run stops with ErrLeaseLost and
// leaves the other's lease alone), waiting longer than the lease lasts,
// and refused until the lease may be gone (the run stops in both).
func TestMigrationLeaseRenewed(t *testing.T) {
	isolated(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	s, err := cassandra.NewSession(cassandra.Config{Hosts: cluster.ContactPoints(), Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	newKeyspace := func(name string) string {
		ks := fmt.Sprintf("e2e_%s_%d", name, time.Now().UnixNano()/1e6)
		t.Cleanup(func() { dropKeyspace(context.Background(), ks) })
		return ks
	}
	versions, err := cql.Versions("orderd")
	if err != nil {
		t.Fatal(err)
	}
	cfg := func(ks string) cql.Config { return cql.Config{Keyspace: ks, LeaseTTL: 4 * time.Second} }

	t.Run("taken over", func(t *testing.T) {
		ks := newKeyspace("lease_taken")
		fs := cassandra.NewFaultSession(cassandra.Wrap(s))
		thief := gocql.UUIDFromTime(time.Now())
		fs.Before(cql.StmtRenew, func() {
			if applied, err := s.Query(fmt.Sprintf(`UPDATE %s.schema_lock USING TTL 60 SET owner = ? WHERE id = 'migrate' IF EXISTS`, ks), thief).
				SerialConsistency(gocql.LocalSerial).MapScanCASContext(ctx, map[string]any{}); err != nil || !applied {
				t.Errorf("take the lease over: %v %v", applied, err)
			}
		})
		fs.Before(cql.StmtRecord, func() { time.Sleep(3 * time.Second) })
		res, err := cql.Migrate(ctx, fs, cfg(ks))
		if !errors.Is(err, cql.ErrLeaseLost) || fault.KindOf(err) != fault.Unavailable {
			t.Fatalf("migrate whose lease was taken over: %v, want ErrLeaseLost of kind Unavailable", err)
		}
		assertStopped(t, s, ks, res, len(versions))
		var owner gocql.UUID
		if err := s.Query(fmt.Sprintf(`SELECT owner FROM %s.schema_lock WHERE id = 'migrate'`, ks)).
			Consistency(gocql.LocalSerial).ScanContext(ctx, &owner); err != nil || owner != thief {
			t.Fatalf("the lease after the run: owner %v (%v), want the other migrator's %v left alone", owner, err, thief)
		}
		t.Logf("stopped after versions %v: %v", res.Applied, err)
	})

	t.Run("a renewal that hangs past the lease", func(t *testing.T) {
		ks := newKeyspace("lease_hung")
		fs := cassandra.NewFaultSession(cassandra.Wrap(s))
		// The first renewal waits 12 s before it is sent; the lease's TTL
		// is 4 s. From 5 s on, when the lease has lapsed, another migrator
		// takes it, and the first version's record is let through. The
		// run must have given its lease up by then, sending nothing more.
		start := time.Now()
		fs.Before(cql.StmtRenew, func() { time.Sleep(12 * time.Second) })
		fs.Before(cql.StmtRecord, func() {
			time.Sleep(time.Until(start.Add(5 * time.Second)))
			if applied, err := s.Query(fmt.Sprintf(`INSERT INTO %s.schema_lock (id, owner, taken_at) VALUES ('migrate', ?, ?) IF NOT EXISTS USING TTL 60`, ks),
				gocql.UUIDFromTime(time.Now()), time.Now()).SerialConsistency(gocql.LocalSerial).MapScanCASContext(ctx, map[string]any{}); err != nil || !applied {
				t.Errorf("another migrator takes the lapsed lease: %v %v", applied, err)
			}
		})
		res, err := cql.Migrate(ctx, fs, cfg(ks))
		if !errors.Is(err, cql.ErrLeaseLost) || !strings.Contains(err.Error(), "no renewal applied") {
			t.Fatalf("migrate whose renewal hung: %v, want ErrLeaseLost (no renewal applied)", err)
		}
		assertRecorded(t, s, ks, 0)
		if len(res.Applied) != 0 {
			t.Fatalf("the run applied %v after its lease lapsed", res.Applied)
		}
	})

	t.Run("renewals refused", func(t *testing.T) {
		ks := newKeyspace("lease_refused")
		fs := cassandra.NewFaultSession(cassandra.Wrap(s))
		fs.Arm(cql.StmtRenew, cassandra.FaultUnavailable, 100)
		fs.Before(cql.StmtRecord, func() { time.Sleep(5 * time.Second) })
		res, err := cql.Migrate(ctx, fs, cfg(ks))
		if !errors.Is(err, cql.ErrLeaseLost) || !strings.Contains(err.Error(), "no renewal applied") {
			t.Fatalf("migrate whose renewals were all refused: %v, want ErrLeaseLost (no renewal applied)", err)
		}
		assertStopped(t, s, ks, res, len(versions))
	})
}
