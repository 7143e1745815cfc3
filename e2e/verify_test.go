package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"
	"gopkg.in/inf.v0"

	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/stores/versions"
	"github.com/atlasmart/orderd/internal/tools/invariant"
)

// `orderd verify` is the last word of every fault test, so it must be able
// to fail: on a keyspace of its own, orders made through the real binary
// pass it (with their acknowledgements); then each kind of damage is done to
// the rows — a listing row lost, an order rewritten with another total, a
// request stranded PENDING, an acknowledgement with no request — and verify
// exits non-zero naming every one of them.
func TestVerifyFindsEachViolation(t *testing.T) {
	isolated(t)
	ctx := context.Background()
	ks := fmt.Sprintf("e2e_verify_%d", time.Now().UnixNano()/1e6)
	t.Cleanup(func() { dropKeyspace(context.Background(), ks) })
	if out, err := runOrderd(ctx, "migrate", "--keyspace", ks); err != nil {
		t.Fatalf("migrate %s: %v\n%s", ks, err, out)
	}
	p := startOrderd(t, "ORDERD_KEYSPACE="+ks, "ORDERD_RECONCILER=false")
	var acks []invariant.Ack
	var ids []string // request ids, in the order made
	for _, total := range []string{"10.00", "20.00", "30.00"} {
		req := newRequest(total)
		resp, _, err := create(t, p.client, req)
		if err != nil {
			t.Fatalf("CreateOrder: %v", err)
		}
		acks = append(acks, invariant.Ack{Tenant: tenant, RequestID: req.RequestId, OrderID: resp.Order.OrderId,
			CustomerID: req.CustomerId, Total: total, Currency: req.Currency})
		ids = append(ids, req.RequestId)
	}
	verify := func(acks []invariant.Ack) (string, error) {
		path := filepath.Join(t.TempDir(), "acks.jsonl")
		if err := invariant.WriteAcks(path, acks); err != nil {
			t.Fatal(err)
		}
		return runOrderd(ctx, "verify", "--keyspace", ks, "--reconcile-grace", "10s", "--acks", path)
	}
	if out, err := verify(acks); err != nil || !strings.Contains(out, "all invariants hold") {
		t.Fatalf("verify of the undamaged keyspace: %v\n%s", err, out)
	}

	s, err := cassandra.NewSession(cassandra.Config{Hosts: cluster.ContactPoints(), Keyspace: ks})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cctx := callCtx(t)
	lost, rewritten := acks[0], acks[1]
	// 1. The first order's listing row is lost.
	var month string
	var created time.Time
	if err := s.Query(`SELECT order_month, created_at FROM orders_by_id WHERE tenant = ? AND order_id = ?`,
		tenant, lost.OrderID).ScanContext(cctx, &month, &created); err != nil {
		t.Fatal(err)
	}
	if err := s.Query(`DELETE FROM orders_by_customer_time WHERE tenant = ? AND customer_id = ? AND order_month = ? AND created_at = ? AND order_id = ?`,
		tenant, lost.CustomerID, month, created, lost.OrderID).Consistency(gocql.All).ExecContext(cctx); err != nil {
		t.Fatal(err)
	}
	// 2. The second order is rewritten with another total.
	if err := s.Query(`UPDATE orders_by_id SET total = ? WHERE tenant = ? AND order_id = ?`,
		inf.NewDec(100, 2), tenant, rewritten.OrderID).Consistency(gocql.All).ExecContext(cctx); err != nil {
		t.Fatal(err)
	}
	// 3. A request stranded PENDING for an hour, nothing of it written.
	stranded := uuid.New()
	cmd := order.Command{CustomerID: "cust-stranded", Total: "5.00", Currency: "EUR"}
	enc := cmd.Encode()
	if applied, err := s.Query(`INSERT INTO write_requests_by_id
		(tenant, operation, request_id, entity_id, payload_hash, command, state, created_at, attempts, claim_token)
		VALUES (?, 'CREATE_ORDER', ?, ?, ?, ?, 'PENDING', ?, 0, ?) IF NOT EXISTS USING TTL 3600`,
		tenant, stranded.String(), order.ID(tenant, stranded).String(), order.Fingerprint(enc), enc,
		time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond), uuid.NewString()).
		SerialConsistency(gocql.LocalSerial).MapScanCASContext(cctx, map[string]any{}); err != nil || !applied {
		t.Fatalf("seed the stranded request: %v %v", applied, err)
	}
	// Not damage: a change of the third order refused (its expected
	// version ahead of the order), recorded in a partition with no change.
	third, err := uuid.Parse(acks[2].OrderID)
	if err != nil {
		t.Fatal(err)
	}
	aheadCmd := order.ChangeCommand{OrderID: third, ExpectedVersion: 3}
	ahead := order.NewChange(tenant, order.OperationCancel, uuid.New(),
		order.ChangeFingerprint(order.OperationCancel, aheadCmd.Encode()), aheadCmd, time.Now())
	if d, err := versions.NewCassandraStore(cassandra.Wrap(s)).Apply(cctx, ahead, 1); err != nil || d.Accepted {
		t.Fatalf("the refused change: %+v %v", d, err)
	}
	// 5. An outcome recorded accepted at a version no row has.
	phantom, phantomChange := uuid.New(), uuid.New()
	rec := versions.Record{Fingerprint: "sha256:v1:phantom", Version: 2}
	if err := s.Query(`UPDATE order_versions SET change_outcomes[?] = ? WHERE tenant = ? AND order_id = ?`,
		gocql.UUID(phantomChange), rec.Encode(), tenant, gocql.UUID(phantom)).Consistency(gocql.All).ExecContext(cctx); err != nil {
		t.Fatal(err)
	}
	// 4. An acknowledgement of a request the ledger never had.
	ghost := uuid.New()
	acks = append(acks, invariant.Ack{Tenant: tenant, RequestID: ghost.String(), OrderID: order.ID(tenant, ghost).String(),
		CustomerID: "cust-ghost", Total: "1.00", Currency: "EUR"})

	out, err := verify(acks)
	if err == nil {
		t.Fatalf("verify of the damaged keyspace passed:\n%s", out)
	}
	t.Logf("verify of the damaged keyspace (%v):\n%s", err, out)
	for what, want := range map[string]string{
		"the lost listing row":   fmt.Sprintf("COMPLETE request %s has 0 orders_by_customer_time rows, want 1", lost.RequestID),
		"the rewritten order":    fmt.Sprintf("does not match request %s's command", rewritten.RequestID),
		"its acknowledgement":    fmt.Sprintf("acknowledged request %s (order %s", rewritten.RequestID, rewritten.OrderID),
		"the stranded request":   fmt.Sprintf("request %s PENDING for", stranded),
		"the ghost ack":          fmt.Sprintf("acknowledged request %s is missing in the ledger", ghost),
		"the phantom acceptance": fmt.Sprintf("order %s: change %s is recorded accepted at version 2", phantom, phantomChange),
		"the count and the exit": "invariant violations in keyspace " + ks,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("verify does not report %s (%q):\n%s", what, want, out)
		}
	}
	if strings.Contains(out, ids[2]) || strings.Contains(out, acks[2].OrderID) {
		t.Errorf("verify reports the undamaged third request %s or its refused change:\n%s", ids[2], out)
	}
}
