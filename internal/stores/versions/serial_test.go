package versions

import (
	"context"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/platform/cassandra/cassandratest"
)

// TestSerialConsistency: the version check's LWT and the read that settles
// its unknown outcome run at the session's serial consistency.
func TestSerialConsistency(t *testing.T) {
	for _, serial := range []gocql.Consistency{gocql.LocalSerial, gocql.Serial} {
		t.Run(serial.String(), func(t *testing.T) {
			rec := cassandratest.NewRecorder(serial)
			fs := cassandra.NewFaultSession(rec)
			fs.Arm(StmtApply, cassandra.FaultLoseResponse, 1)
			ch := order.Change{ID: uuid.New(), Tenant: "t", OrderID: uuid.New(), Operation: "CANCEL_ORDER",
				RequestID: uuid.New(), Fingerprint: "sha256:v1:00", Version: 2, Status: "CANCELLED", At: time.Now().UTC()}
			_, _ = NewCassandraStore(fs).Apply(context.Background(), ch, 0)
			cas, reads := cassandratest.CheckSerial(t, rec.Runs(), serial, StmtState)
			if cas == 0 || reads == 0 {
				t.Errorf("%d LWTs and %d settling reads, want both: %+v", cas, reads, rec.Runs())
			}
		})
	}
}
