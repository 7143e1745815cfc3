package e2e

import (
	"testing"
	"time"

	"github.com/atlasmart/orderd/internal/cassandra"
	"github.com/atlasmart/orderd/reconciler"
	"github.com/atlasmart/orderd/reconciler/reconcilertest"
)

// The lease coordinator's contract on the real cluster:
// reconciler.CassandraCoordinator through a FaultSession, the same suite
// reconcilertest.MemoryCoordinator passes. It shares the run's keyspace:
// the suite's shards are far above the reconciler's, and its membership
// measurements are relative to whatever else is alive.
func TestCoordinatorContract(t *testing.T) {
	isolated(t)
	s := freshSession(t)
	reconcilertest.RunCoordinator(t, func(t *testing.T) reconcilertest.CoordinatorSubject {
		fs := cassandra.NewFaultSession(cassandra.Wrap(s))
		return reconcilertest.CoordinatorSubject{
			Coord: reconciler.NewCassandraCoordinator(fs),
			Arm:   fs.Arm,
			Wait:  time.Sleep,
		}
	})
}
