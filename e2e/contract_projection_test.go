package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/projection"
	"github.com/atlasmart/orderd/projection/projectiontest"
)

// eventsCQL reads an order's event rows; projection.Store has no reader of
// that table, so the contract reads it directly. (No leading name comment:
// it runs on the driver's session, which prepares, and so binds values of,
// only statements that start with their verb.)
const eventsCQL = `SELECT event_id, event_type, detail, event_time, version
	FROM order_events_by_order WHERE tenant = ? AND order_id = ?`

// The projection contract on the real cluster: projection.Store through a
// FaultSession, the same suite projectiontest.Memory passes. In a keyspace
// of its own: the suite writes orders and changes with no request and no
// history, which orderd verify of the run's keyspace would report.
func TestProjectionContract(t *testing.T) {
	isolated(t)
	ks := fmt.Sprintf("e2e_projection_%d", time.Now().UnixNano()/1e6)
	if out, err := runOrderd(context.Background(), "migrate", "--keyspace", ks); err != nil {
		t.Fatalf("migrate %s: %v\n%s", ks, err, out)
	}
	t.Cleanup(func() { dropKeyspace(context.Background(), ks) })
	s, err := cassandra.NewSession(cassandra.Config{Hosts: cluster.ContactPoints(), Keyspace: ks})
	if err != nil {
		t.Fatalf("connect to %s: %v", ks, err)
	}
	t.Cleanup(s.Close)
	projectiontest.Run(t, func(t *testing.T) projectiontest.Subject {
		fs := cassandra.NewFaultSession(cassandra.Wrap(s))
		return projectiontest.Subject{
			Store: projection.NewStore(fs, nil),
			Arm:   fs.Arm,
			Events: func(ctx context.Context, tenant string, id uuid.UUID) ([]projectiontest.Event, error) {
				return events(ctx, s, tenant, id)
			},
		}
	})
}

func events(ctx context.Context, s *gocql.Session, tenant string, id uuid.UUID) ([]projectiontest.Event, error) {
	iter := s.Query(eventsCQL, tenant, id.String()).IterContext(ctx)
	var (
		out     []projectiontest.Event
		eventID gocql.UUID
		e       projectiontest.Event
		at      time.Time
		version *int64
	)
	for iter.Scan(&eventID, &e.Type, &e.Detail, &at, &version) {
		e.ID, e.Time = uuid.UUID(eventID), at.UTC()
		if version != nil {
			e.Version = *version
		}
		out = append(out, e)
		e, version = projectiontest.Event{}, nil
	}
	return out, iter.Close()
}
