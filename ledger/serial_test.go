package ledger

import (
	"context"
	"slices"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/platform/cassandra/cassandratest"
)

// TestSerialConsistencyReachesEveryStatement: the session's serial
// consistency (cassandra.Config.Serial, ORDERD_SERIAL_CONSISTENCY) is the
// serial phase of every ledger LWT and the level of every read that settles
// one, with either setting; Peek stays LOCAL_QUORUM.
func TestSerialConsistencyReachesEveryStatement(t *testing.T) {
	for _, serial := range []gocql.Consistency{gocql.LocalSerial, gocql.Serial} {
		t.Run(serial.String(), func(t *testing.T) {
			rec := cassandratest.NewRecorder(serial)
			fs := cassandra.NewFaultSession(rec)
			// The claim applies but its answer is lost: a serial read settles it.
			fs.Arm(StmtClaim, cassandra.FaultLoseResponse, 1)
			store, err := NewCassandraStore(fs, Config{ReleaseWindow: -1})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			r := testClaim()
			if won, _, err := store.Claim(ctx, r, nil); err != nil || !won {
				t.Fatalf("Claim = %v, %v; want won", won, err)
			}
			if err := store.RecordAttempt(ctx, r, "CLUSTER_UNAVAILABLE"); err != nil {
				t.Fatalf("RecordAttempt: %v", err)
			}
			if _, err := store.Get(ctx, r.Key); err != ErrNotFound {
				t.Fatalf("Get: %v, want ErrNotFound from the recorder", err)
			}
			before := len(rec.Runs())
			_, _ = store.Peek(ctx, r.Key)

			runs := rec.Runs()
			cas, serialReads := cassandratest.CheckSerial(t, runs[:before], serial, StmtGet)
			for _, run := range runs[before:] {
				if run.Name == StmtGet && run.Consistency != gocql.LocalQuorum {
					t.Errorf("Peek ran at %v, want LOCAL_QUORUM", run.Consistency)
				}
			}
			// claim (lost), claim again, the attempt note; the settling read and Get.
			if cas != 3 || serialReads != 2 {
				t.Errorf("%d LWTs and %d serial reads, want 3 and 2: %+v", cas, serialReads, rec.Runs())
			}
		})
	}
}

// TestClaimCommitConsistency: the claim's Paxos commit runs at LOCAL_QUORUM,
// or at ANY with Config.ClaimCommitAny; every other conditional write of the
// ledger commits at the session's LOCAL_QUORUM either way (ANY is for the
// claim alone: docs/architecture.md, "Claim commit at ANY").
func TestClaimCommitConsistency(t *testing.T) {
	for _, tc := range []struct {
		any  bool
		want gocql.Consistency
	}{{false, gocql.LocalQuorum}, {true, gocql.Any}} {
		t.Run(tc.want.String(), func(t *testing.T) {
			rec := cassandratest.NewRecorder(gocql.LocalSerial)
			store, err := NewCassandraStore(rec, Config{ReleaseWindow: -1, ClaimCommitAny: tc.any})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			r := testClaim()
			if won, _, err := store.Claim(ctx, r, nil); err != nil || !won {
				t.Fatalf("Claim = %v, %v; want won", won, err)
			}
			if err := store.RecordAttempt(ctx, r, "CLUSTER_UNAVAILABLE"); err != nil {
				t.Fatalf("RecordAttempt: %v", err)
			}
			claims := 0
			for _, run := range rec.Runs() {
				switch {
				case run.Name == StmtClaim:
					claims++
					if !run.ConsistencyGiven || run.Consistency != tc.want {
						t.Errorf("claim committed at %v (given %v), want %v", run.Consistency, run.ConsistencyGiven, tc.want)
					}
				case run.CAS && run.ConsistencyGiven && run.Consistency != gocql.LocalQuorum:
					t.Errorf("%s committed at %v, want the session's LOCAL_QUORUM", run.Name, run.Consistency)
				}
			}
			if claims != 1 {
				t.Errorf("%d claims sent, want 1: %+v", claims, rec.Runs())
			}
		})
	}
}

// testClaim is a claim of a fresh request.
func testClaim() Record {
	return Record{Key: Key{Tenant: "t", Operation: "CREATE_ORDER", RequestID: uuid.New()},
		EntityID: uuid.New(), Fingerprint: "sha256:v1:00", Command: []byte("{}"),
		CreatedAt: time.Now().UTC(), ClaimToken: uuid.New()}
}

// TestDropBucketIsDatedByTheCluster: the due queue's partition tombstone is
// dated by the coordinator's clock, never by this process's, so a
// reconciler whose clock leads cannot date it ahead and delete entries
// written into the minute after it (every other ledger write keeps the
// driver's client-side time).
func TestDropBucketIsDatedByTheCluster(t *testing.T) {
	rec := cassandratest.NewRecorder(gocql.LocalSerial)
	store, err := NewCassandraStore(rec, Config{ReleaseWindow: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if won, _, err := store.Claim(ctx, testClaim(), nil); err != nil || !won {
		t.Fatalf("Claim = %v, %v; want won", won, err)
	}
	if err := store.DropBucket(ctx, 3, time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	drops := 0
	for _, run := range rec.Runs() {
		drop := run.Name == StmtDropBucket
		if drop {
			drops++
		}
		if run.ServerTimestamp != drop {
			t.Errorf("%s: dated by the cluster %v, want %v", run.Name, run.ServerTimestamp, drop)
		}
	}
	if drops != 1 {
		t.Errorf("%d drops recorded, want 1: %+v", drops, rec.Runs())
	}
}

// TestAnEntryThatOwesNothingBindsNoNull: a new request's due entry binds
// every value it writes and leaves owed_order unset. A null would be a
// tombstone cell in every entry, and the reconciler reads a minute's
// entries of a shard at once (Cassandra warns past 1,000 tombstones).
func TestAnEntryThatOwesNothingBindsNoNull(t *testing.T) {
	rec := cassandratest.NewRecorder(gocql.LocalSerial)
	store, err := NewCassandraStore(rec, Config{ReleaseWindow: -1})
	if err != nil {
		t.Fatal(err)
	}
	if won, _, err := store.Claim(context.Background(), testClaim(), nil); err != nil || !won {
		t.Fatalf("Claim = %v, %v; want won", won, err)
	}
	enqueues := 0
	for _, run := range rec.Runs() {
		if run.Name != StmtEnqueue {
			continue
		}
		enqueues++
		for i, v := range run.Values {
			if v == nil {
				t.Errorf("the due entry binds null as value %d: %v", i, run.Values)
			}
		}
		if !slices.Contains(run.Values, any(gocql.UnsetValue)) {
			t.Errorf("the due entry sets every column, owed_order too: %v", run.Values)
		}
	}
	if enqueues != 1 {
		t.Errorf("%d due entries written, want 1", enqueues)
	}
}
