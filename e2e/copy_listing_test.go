package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"
	"gopkg.in/inf.v0"

	"github.com/atlasmart/orderd/cql"
	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/projection"
)

// The old listing's statements, as orderd wrote orders_by_customer before
// schema version 5 (0004's Write and WriteChange; before 0004, no version).
const (
	oldListingCreateCQL = `INSERT INTO orders_by_customer
		(tenant, customer_id, order_month, order_id, status, total, currency, request_id, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	oldListingCreateV1CQL = `INSERT INTO orders_by_customer
		(tenant, customer_id, order_month, order_id, status, total, currency, request_id, created_at, updated_at, version)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)`
	oldListingChangeCQL = `UPDATE orders_by_customer SET status = ?, version = ?, updated_at = ?
		WHERE tenant = ? AND customer_id = ? AND order_month = ? AND order_id = ?`
	newListingCellsCQL = `SELECT created_at, order_id, status, version, writetime(total), writetime(status), writetime(version)
		FROM orders_by_customer_time WHERE tenant = ? AND customer_id = ? AND order_month = ?`
)

// TestCopyListing is the upgrade to schema version 5 in a keyspace of its
// own: rows of orders_by_customer as older instances wrote them — an order
// from before 0004 (no version), an order cancelled since, a change an old
// instance projected onto an order a new one created (the change's cells
// alone), such a change whose order exists nowhere, and an order the new
// table already holds at a newer version — are copied by `orderd
// copy-listing`, each cell with its own write time. The listing then
// shows every order newest first at its current version; the change whose
// order exists nowhere is left out; a second copy and a replayed Write
// change nothing.
func TestCopyListing(t *testing.T) {
	isolated(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ks := fmt.Sprintf("e2e_copy_%d", time.Now().UnixNano()/1e6)
	t.Cleanup(func() { dropKeyspace(context.Background(), ks) })
	admin, err := cassandra.NewSession(cassandra.Config{Hosts: cluster.ContactPoints(), Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := cql.Migrate(ctx, cassandra.Wrap(admin), cql.Config{Keyspace: ks}); err != nil {
		t.Fatalf("migrate %s: %v", ks, err)
	}
	s, err := cassandra.NewSession(cassandra.Config{Hosts: cluster.ContactPoints(), Keyspace: ks, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	store := projection.NewStore(cassandra.Wrap(s), nil)

	const ten, customer = "copy", "cust-1"
	base := time.Date(2026, 3, 14, 10, 30, 0, 123_000_000, time.UTC)
	month := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	newOrder := func(at time.Time, total string) order.Order {
		return order.New(ten, uuid.New(), order.Command{CustomerID: customer, Total: total, Currency: "EUR",
			Lines: []order.Line{{SKU: "sku-a", Quantity: 1, UnitPrice: total}}}, at)
	}
	change := func(o order.Order, op string, expected int64, at time.Time) (order.Order, order.Change) {
		cmd := order.ChangeCommand{OrderID: o.ID, ExpectedVersion: expected}
		if op == order.OperationAmend {
			cmd.ShippingNote = "back door"
		}
		c := order.NewChange(ten, op, uuid.New(), order.ChangeFingerprint(op, cmd.Encode()), cmd, at)
		return o.Apply(c), c
	}
	exec := func(what string, ts int64, stmt string, args ...any) {
		t.Helper()
		if err := s.Query(stmt, args...).WithTimestamp(ts).ExecContext(ctx); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	oldCreate := func(o order.Order, stmt string) {
		t.Helper()
		exec("old listing row of "+o.ID.String(), o.CreatedAt.UnixMicro(), stmt,
			ten, customer, month, o.ID.String(), o.Status, dec(t, o.Total), o.Currency, o.RequestID.String(), o.CreatedAt, o.CreatedAt)
	}
	oldChange := func(o order.Order, c order.Change) {
		t.Helper()
		exec("old listing change of "+o.ID.String(), projection.ChangeTimestamp(o.CreatedAt, c), oldListingChangeCQL,
			c.Status, c.Version, c.At, ten, customer, month, o.ID.String())
	}

	// a: created before 0004 (no version cell).
	a := newOrder(base, "10.00")
	oldCreate(a, oldListingCreateCQL)
	// b: created, then cancelled to version 2, both by old instances.
	b := newOrder(base.Add(time.Hour), "20.00")
	oldCreate(b, oldListingCreateV1CQL)
	b2, cancelB := change(b, order.OperationCancel, 1, base.Add(90*time.Minute))
	oldChange(b, cancelB)
	// c: created by a new instance (the new table and orders_by_id), then
	// amended to version 2 by an old one (its change cells only, in the old table).
	c := newOrder(base.Add(2*time.Hour), "30.00")
	if err := store.Write(ctx, c); err != nil {
		t.Fatal(err)
	}
	c2, amendC := change(c, order.OperationAmend, 1, base.Add(3*time.Hour))
	oldChange(c, amendC)
	// d: a change's cells only, and its order nowhere: left out.
	d := newOrder(base.Add(4*time.Hour), "40.00")
	_, amendD := change(d, order.OperationAmend, 1, base.Add(5*time.Hour))
	oldChange(d, amendD)
	// e: in both tables; the old one at version 2, the new one at version 3.
	e := newOrder(base.Add(-time.Hour), "50.00")
	oldCreate(e, oldListingCreateV1CQL)
	e2, amendE := change(e, order.OperationAmend, 1, base)
	oldChange(e, amendE)
	if err := store.Write(ctx, e); err != nil {
		t.Fatal(err)
	}
	e3, cancelE := change(e2, order.OperationCancel, 2, base.Add(time.Minute))
	if err := store.WriteChange(ctx, e3, cancelE); err != nil {
		t.Fatal(err)
	}

	out, err := runOrderd(ctx, "copy-listing", "--keyspace", ks)
	if err != nil {
		t.Fatalf("orderd copy-listing: %v\n%s", err, out)
	}
	for _, want := range []string{"customer listing copied", "rows=5", "copied=4", "skipped=1", "order_id=" + d.ID.String()} {
		if !strings.Contains(out, want) {
			t.Errorf("orderd copy-listing output lacks %q:\n%s", want, out)
		}
	}

	// Newest first, each at its current version.
	want := []order.Order{c2, b2, a, e3}
	wantListing := func(when string) {
		t.Helper()
		page, err := store.CustomerOrders(ctx, ten, customer, month, 1000, nil)
		if err != nil {
			t.Fatalf("%s: CustomerOrders: %v", when, err)
		}
		if len(page.Orders) != len(want) {
			t.Fatalf("%s: listing holds %d orders %+v, want %d", when, len(page.Orders), page.Orders, len(want))
		}
		for i, got := range page.Orders {
			w := want[i]
			if got.ID != w.ID || got.Status != w.Status || got.Version != w.Version || got.Total != w.Total ||
				got.Currency != w.Currency || got.RequestID != w.RequestID || !got.CreatedAt.Equal(w.CreatedAt) || !got.UpdatedAt.Equal(w.UpdatedAt) {
				t.Errorf("%s: listing #%d = %+v, want %+v", when, i, got, w)
			}
		}
	}
	wantListing("after the copy")

	// Every cell carries the write time it had where it came from.
	us := func(o order.Order) int64 { return o.CreatedAt.UnixMicro() }
	type cells struct{ status, total, state, version string }
	wantCells := map[uuid.UUID]cells{
		a.ID: {"CREATED", fmt.Sprint(us(a)), fmt.Sprint(us(a)), "<nil>"},
		b.ID: {"CANCELLED", fmt.Sprint(us(b)), fmt.Sprint(us(b) + 2), fmt.Sprint(us(b) + 2)},
		c.ID: {"CREATED", fmt.Sprint(us(c)), fmt.Sprint(us(c) + 2), fmt.Sprint(us(c) + 2)}, // an amendment keeps the status
		e.ID: {"CANCELLED", fmt.Sprint(us(e)), fmt.Sprint(us(e) + 3), fmt.Sprint(us(e) + 3)},
	}
	snapshot := func() string {
		t.Helper()
		iter := s.Query(newListingCellsCQL, ten, customer, month).IterContext(ctx)
		var (
			sb                                    strings.Builder
			created                               time.Time
			id                                    gocql.UUID
			status                                string
			version, wtTotal, wtStatus, wtVersion *int64
		)
		for iter.Scan(&created, &id, &status, &version, &wtTotal, &wtStatus, &wtVersion) {
			fmt.Fprintf(&sb, "%s %s %s v%s wt %s/%s/%s\n", created.Format(time.RFC3339Nano), id, status, str(version), str(wtTotal), str(wtStatus), str(wtVersion))
			w, ok := wantCells[uuid.UUID(id)]
			if !ok {
				t.Errorf("an unexpected listing row: order %s", uuid.UUID(id))
				continue
			}
			if got := (cells{status, str(wtTotal), str(wtStatus), str(wtVersion)}); got != w {
				t.Errorf("order %s: status and write times (total/status/version) %+v, want %+v", uuid.UUID(id), got, w)
			}
		}
		if err := iter.Close(); err != nil {
			t.Fatal(err)
		}
		return sb.String()
	}
	before := snapshot()
	t.Logf("the listing after the copy:\n%s", before)

	// Again (as after a rolling upgrade), and a finisher replaying b's
	// creation: nothing changes.
	stats, err := projection.CopyListing(ctx, cassandra.Wrap(s), projection.CopyConfig{Concurrency: 2, PageSize: 2})
	if err != nil || stats != (projection.CopyStats{Read: 5, Copied: 4, Skipped: 1}) {
		t.Fatalf("second copy: %+v, %v; want 5 read, 4 copied, 1 skipped", stats, err)
	}
	if err := store.Write(ctx, b); err != nil {
		t.Fatal(err)
	}
	if after := snapshot(); after != before {
		t.Errorf("a second copy and a replayed Write changed the listing:\nbefore %s\nafter  %s", before, after)
	}
	wantListing("after a second copy")
}

// str is *p, or "<nil>".
func str(p *int64) string {
	if p == nil {
		return "<nil>"
	}
	return strconv.FormatInt(*p, 10)
}

func dec(t *testing.T, s string) *inf.Dec {
	t.Helper()
	d, ok := new(inf.Dec).SetString(s)
	if !ok {
		t.Fatalf("decimal %q", s)
	}
	return d
}
