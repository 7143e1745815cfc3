package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/stores/leases"
	"github.com/atlasmart/orderd/internal/stores/leases/leasestest"
)

// The lease coordinator's contract on the real cluster: leases.Leases on
// the CQL table through a FaultSession, the same suite
// leasestest.MemoryCoordinator (the same protocol on an in-memory table)
// passes. It runs in a keyspace of its
// own: its members say they finish no operation (as an older release's
// would), which in the run's keyspace would hold back every other test's
// CancelOrder and AmendOrder while they live.
func TestCoordinatorContract(t *testing.T) {
	isolated(t)
	ks := "e2e_coord_" + uuid.NewString()[:8]
	if out, err := runOrderd(context.Background(), "migrate", "--keyspace", ks); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	t.Cleanup(func() { dropKeyspace(context.Background(), ks) })
	s, err := cassandra.NewSession(cassandra.Config{Hosts: cluster.ContactPoints(), Keyspace: ks})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	leasestest.RunCoordinator(t, func(t *testing.T) leasestest.CoordinatorSubject {
		fs := cassandra.NewFaultSession(cassandra.Wrap(s))
		return leasestest.CoordinatorSubject{
			Coord: leases.NewCassandraCoordinator(fs),
			Arm:   fs.Arm,
			Wait:  time.Sleep,
			Advertising: func(ops ...string) leases.Coordinator {
				return leases.NewCassandraCoordinator(fs, ops...)
			},
		}
	})
}
