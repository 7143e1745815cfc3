package e2e

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/tools/freeport"
	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

// The runbooks' commands for an operator with cluster access, run as the
// built binary: `orderd requeue -tenant TENANT REQUEST_ID` puts a FAILED
// request back (a bad call is refused and changes nothing), and a
// standalone `orderd reconcile` finishes it, counts it in its metrics and
// stops cleanly on SIGTERM (docs/runbooks.md).
func TestOperatorRequeueThenStandaloneReconcile(t *testing.T) {
	s := freshSession(t)
	id := uuid.New()
	orderID := order.ID(tenant, id)
	cmd := order.Command{CustomerID: "cust-operator", Total: "9.99", Currency: "EUR"}
	enc := cmd.Encode()
	created := time.Now().UTC().Add(-time.Minute).Truncate(time.Millisecond)
	// A request set aside as FAILED whose command an operator has repaired.
	if applied, err := s.Query(`INSERT INTO write_requests_by_id
		(tenant, operation, request_id, entity_id, payload_hash, command, state, created_at, completed_at, attempts, last_error, claim_token)
		VALUES (?, 'CREATE_ORDER', ?, ?, ?, ?, 'FAILED', ?, ?, 1, 'COMMAND_UNREADABLE', ?) IF NOT EXISTS USING TTL 3600`,
		tenant, id.String(), orderID.String(), order.Fingerprint(enc), enc, created, created, uuid.NewString()).
		SerialConsistency(gocql.LocalSerial).MapScanCASContext(callCtx(t), map[string]any{}); err != nil || !applied {
		t.Fatalf("seed a FAILED request: %v %v", applied, err)
	}
	ks := []string{"ORDERD_KEYSPACE=" + keyspace}
	requeue := func(args ...string) (string, error) {
		return runOrderdEnv(callCtx(t), ks, append([]string{"requeue"}, args...)...)
	}

	for _, bad := range []struct {
		args []string
		want string
	}{
		{nil, "usage: orderd requeue"},
		{[]string{"-tenant", tenant, "not-a-uuid"}, `request id "not-a-uuid"`},
		{[]string{"-tenant", "another-tenant", id.String()}, "requeue " + id.String()},
	} {
		out, err := requeue(bad.args...)
		if err == nil || !strings.Contains(out, bad.want) {
			t.Errorf("orderd requeue %v: %v, output %q; want an error saying %q", bad.args, err, out, bad.want)
		}
		waitRequestState(t, shared.client, id.String(), ordersv1.RequestState_REQUEST_STATE_FAILED, time.Second)
	}

	out, err := requeue("-tenant", tenant, id.String())
	if err != nil || !strings.Contains(out, "requeued") || !strings.Contains(out, "state=PENDING") {
		t.Fatalf("orderd requeue: %v\n%s", err, out)
	}
	waitRequestState(t, shared.client, id.String(), ordersv1.RequestState_REQUEST_STATE_PENDING, time.Second)

	metricsAddr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	rec, err := spawnOrderd("reconcile", "", metricsAddr, fastReconciler...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = rec.stop()
		if t.Failed() {
			t.Logf("orderd reconcile output:\n%s", rec.output.String())
		}
	})
	waitRequestState(t, shared.client, id.String(), ordersv1.RequestState_REQUEST_STATE_COMPLETE, 45*time.Second)
	got, err := shared.client.GetOrder(callCtx(t), &ordersv1.GetOrderRequest{OrderId: orderID.String()})
	if err != nil || got.Order.Total != "9.99" || got.Order.CustomerId != "cust-operator" {
		t.Fatalf("the requeued request's order: %v %v", got.GetOrder(), err)
	}
	if _, err := eventually(10*time.Second, func() error {
		if v, ok := scrapeAt(t, metricsAddr, "orderd_reconciler_finished_total"); !ok || v < 1 {
			return fmt.Errorf("orderd_reconciler_finished_total = %v (present %v)", v, ok)
		}
		return nil
	}); err != nil {
		t.Errorf("the standalone reconciler's metrics: %v", err)
	}

	_ = rec.cmd.Process.Signal(syscall.SIGTERM)
	if code := rec.waitExit(t, 30*time.Second); code != 0 {
		t.Errorf("orderd reconcile exited %d on SIGTERM, want 0", code)
	}
}
