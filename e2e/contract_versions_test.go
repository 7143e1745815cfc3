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
func TestVersionsContract(t *testing.T) {
	s := ledgerSession(t)
	versionstest.Run(t, func(t *testing.T) versionstest.Subject {
		fs := cassandra.NewFaultSession(cassandra.Wrap(s))
		return versionstest.Subject{Store: versions.NewCassandraStore(fs), Arm: fs.Arm}
	})
}
