package e2e

import (
	"context"
	"testing"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/atlasmart/orderd/internal/cassandra"
	"github.com/atlasmart/orderd/internal/versions"
	"github.com/atlasmart/orderd/internal/versions/versionstest"
)

// The version check's contract against the real store on the three-node
// cluster: the same suite versionstest.Memory passes
// (internal/versions/memory_test.go), faults armed per subtest.
//
// The suite changes orders that exist nowhere else (tenant
// versionstest.Tenant), so its partitions go when it ends: `orderd verify`
// in later tests holds every history of the keyspace to an order. They go
// by LWT deletes, as the table is LWT-only.
func TestVersionsContract(t *testing.T) {
	s := ledgerSession(t)
	t.Cleanup(func() { dropContractHistories(t, s) })
	versionstest.Run(t, func(t *testing.T) versionstest.Subject {
		fs := cassandra.NewFaultSession(cassandra.Wrap(s))
		return versionstest.Subject{Store: versions.NewCassandraStore(fs), Arm: fs.Arm}
	})
}

func dropContractHistories(t *testing.T, s *gocql.Session) {
	ctx := context.Background()
	iter := s.Query(`SELECT DISTINCT tenant, order_id FROM order_versions`).IterContext(ctx)
	var (
		tenant string
		id     gocql.UUID
		ids    []gocql.UUID
	)
	for iter.Scan(&tenant, &id) {
		if tenant == versionstest.Tenant {
			ids = append(ids, id)
		}
	}
	if err := iter.Close(); err != nil {
		t.Errorf("list the contract's histories: %v", err)
		return
	}
	for _, id := range ids {
		if _, err := s.Query(`DELETE FROM order_versions WHERE tenant = ? AND order_id = ? IF EXISTS`, versionstest.Tenant, id).
			SerialConsistency(gocql.LocalSerial).MapScanCASContext(ctx, map[string]any{}); err != nil {
			t.Errorf("drop the contract's history of %s: %v", id, err)
		}
	}
}
