package e2e

import (
	"testing"

	"github.com/atlasmart/orderd/internal/cassandra"
	"github.com/atlasmart/orderd/internal/versions"
	"github.com/atlasmart/orderd/internal/versions/versionstest"
)

// The version check's contract against the real store on the three-node
// cluster: the same suite versionstest.Memory passes
// (internal/versions/memory_test.go), faults armed per subtest.
//
// It runs in a keyspace of its own: the suite changes orders that exist
// nowhere else, and `orderd verify` in later tests holds every history of
// the run's keyspace to an order (an LWT-only table's partitions cannot be
// deleted conditionally to clean up after it).
func TestVersionsContract(t *testing.T) {
	isolated(t)
	s, _, done := benchKeyspace(t, "e2e_versions")
	t.Cleanup(done)
	versionstest.Run(t, func(t *testing.T) versionstest.Subject {
		fs := cassandra.NewFaultSession(cassandra.Wrap(s))
		return versionstest.Subject{Store: versions.NewCassandraStore(fs), Arm: fs.Arm}
	})
}
