package leases

import (
	"context"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/platform/cassandra/cassandratest"
)

// TestLeaseSerialConsistency: every shard lease LWT runs its Paxos round at
// the session's serial consistency, and so does the read that settles one
// whose answer was lost.
func TestLeaseSerialConsistency(t *testing.T) {
	for _, serial := range []gocql.Consistency{gocql.LocalSerial, gocql.Serial} {
		t.Run(serial.String(), func(t *testing.T) {
			rec := cassandratest.NewRecorder(serial)
			fs := cassandra.NewFaultSession(rec)
			fs.Arm(StmtAcquire, cassandra.FaultLoseResponse, 1)
			c := NewCassandraCoordinator(fs)
			ctx, me := context.Background(), uuid.New()
			_, _ = c.Acquire(ctx, 3, me, 15*time.Second) // settled by coord.lease
			_, _ = c.Renew(ctx, 3, me, 15*time.Second)
			_ = c.Release(ctx, 3, me)
			cas, reads := cassandratest.CheckSerial(t, rec.Runs(), serial, StmtLease)
			if cas != 3 || reads != 1 {
				t.Errorf("%d lease LWTs and %d settling reads, want 3 and 1: %+v", cas, reads, rec.Runs())
			}
		})
	}
}
