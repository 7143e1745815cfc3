package e2e

import (
	"testing"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/stores/versions"
	"github.com/atlasmart/orderd/internal/stores/versions/versionstest"
)

// The version check's contract against the real store on the three-node
// cluster: the same suite versionstest.Memory passes
// (internal/stores/versions/memory_test.go), faults armed per subtest.
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
		return versionstest.Subject{Store: versions.NewCassandraStore(fs), Arm: fs.Arm, Before: fs.Before,
			Unrecorded: func(t *testing.T, ch order.Change) bool { return applyUnrecorded(t, s, ch) }}
	})
}

// applyUnrecorded runs the version check as a version before migration
// 0006 sends it: the change's row and the statics, no outcome recorded.
func applyUnrecorded(t *testing.T, s *gocql.Session, ch order.Change) bool {
	t.Helper()
	var note any
	if ch.SetsNote() {
		note = ch.ShippingNote
	}
	args := []any{ch.Version, ch.Status, gocql.UUID(ch.ID), ch.Operation, gocql.UUID(ch.RequestID), ch.Fingerprint,
		ch.Status, note, ch.At, ch.Tenant, gocql.UUID(ch.OrderID), ch.Version}
	cond := ` IF current_version = null`
	if ch.Version-1 > order.CreatedVersion {
		cond, args = ` IF current_version = ? AND status = 'CREATED'`, append(args, ch.Version-1)
	}
	applied, err := s.Query(`UPDATE order_versions SET current_version = ?, status = ?, change_id = ?, operation = ?,
		request_id = ?, payload_hash = ?, new_status = ?, shipping_note = ?, changed_at = ?
		WHERE tenant = ? AND order_id = ? AND version = ?`+cond, args...).
		SerialConsistency(gocql.LocalSerial).MapScanCAS(map[string]any{})
	if err != nil {
		t.Fatalf("the unrecorded version check: %v", err)
	}
	return applied
}
