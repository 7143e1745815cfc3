package e2e

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/ledger"
	"github.com/atlasmart/orderd/ledger/ledgertest"
)

// ledgerSession opens a session on the run's keyspace, closed when t ends.
func ledgerSession(t *testing.T) *gocql.Session {
	t.Helper()
	s, err := cassandra.NewSession(cassandra.Config{Hosts: cluster.ContactPoints(), Keyspace: keyspace})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// The ledger's contract against the real store on the three-node cluster:
// the same suite ledgertest.Memory passes (ledger/memory_test.go). Each
// subtest gets its own FaultSession over one shared session, so faults
// armed by one never reach another.
func TestLedgerContract(t *testing.T) {
	runLedgerContract(t, ledger.Config{})
}

// runLedgerContract runs the ledger contract on the ledger with cfg, on its CQL table
// on the real cluster, its statements through a FaultSession.
func runLedgerContract(t *testing.T, cfg ledger.Config) {
	s := ledgerSession(t)
	ledgertest.Run(t, func(t *testing.T) ledgertest.Subject {
		fs := cassandra.NewFaultSession(cassandra.Wrap(s))
		store, err := ledger.NewCassandraStore(fs, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return ledgertest.Subject{Store: store, Arm: fs.Arm, Before: fs.Before, Pending: fs.Pending,
			Legacy: func(ctx context.Context, rec ledger.Record) error { return writeLegacyComplete(ctx, s, rec) }}
	})
}

// writeLegacyComplete turns a PENDING claim into rec, COMPLETE with its
// outcome, with the statement the protocol before one-LWT completed
// requests with (its rows live until their TTL).
func writeLegacyComplete(ctx context.Context, s *gocql.Session, rec ledger.Record) error {
	ttl := int(rec.ExpiresAt(7 * 24 * time.Hour).Sub(time.Now()).Seconds())
	applied, err := s.Query(`UPDATE write_requests_by_id USING TTL ?
		SET state = 'COMPLETE', completed_at = ?, outcome = ?
		WHERE tenant = ? AND operation = ? AND request_id = ? IF state = 'PENDING' AND claim_token = ?`,
		ttl, rec.CompletedAt, rec.Outcome, rec.Tenant, rec.Operation, rec.RequestID.String(), rec.ClaimToken.String()).
		SerialConsistency(gocql.LocalSerial).MapScanCASContext(ctx, map[string]any{})
	if err == nil && !applied {
		err = fmt.Errorf("request %s is not its PENDING claim", rec.RequestID)
	}
	return err
}

// ledgerColumns are the cells of a ledger row that can hold a value (the
// key columns carry no TTL of their own).
var ledgerColumns = []string{"entity_id", "payload_hash", "command", "state", "created_at",
	"completed_at", "outcome", "attempts", "last_error", "claim_token"}

// A defect this guards against: cells of one row expired apart (a state without its
// fingerprint). After the claim and after each later write, every cell that
// holds a value has one TTL (to the second), and none outlives the claim's
// expiry instant; the claim's due entry expires with it.
func TestLedgerTTL(t *testing.T) {
	s := ledgerSession(t)
	const retention = 2 * time.Minute
	store, err := ledger.NewCassandraStore(cassandra.Wrap(s), ledger.Config{Retention: retention})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	// Claimed 30.7 s ago, as by a slow handler: about 89 s left, never a
	// whole number of seconds.
	rec := claimRecord("ttl", time.Now().Add(-30*time.Second-700*time.Millisecond))
	expiry := rec.ExpiresAt(retention)

	check := func(step string, wantNull ...string) {
		t.Helper()
		ttls := cellTTLs(t, ctx, s, rec.Key)
		end := time.Now()
		lo := int(math.Floor(expiry.Sub(end).Seconds())) - 2
		hi := int(math.Ceil(expiry.Sub(end).Seconds())) + 1 // the server counts whole seconds
		var set []string
		minTTL, maxTTL := math.MaxInt, math.MinInt
		for _, col := range ledgerColumns {
			ttl, ok := ttls[col]
			isNull := !ok
			if isNull != slices.Contains(wantNull, col) {
				t.Errorf("after %s: %s is null: %v, want %v", step, col, isNull, !isNull)
			}
			if isNull {
				continue
			}
			if ttl < 0 {
				t.Errorf("after %s: %s holds a value with no TTL: it would never expire", step, col)
				continue
			}
			set = append(set, fmt.Sprintf("%s=%d", col, ttl))
			minTTL, maxTTL = min(minTTL, ttl), max(maxTTL, ttl)
		}
		t.Logf("after %s: TTLs %s (expiry in %.1f s)", step, strings.Join(set, " "), expiry.Sub(end).Seconds())
		if maxTTL-minTTL > 1 {
			t.Errorf("after %s: cells of one row expire apart: TTLs from %d to %d s", step, minTTL, maxTTL)
		}
		if maxTTL > hi {
			t.Errorf("after %s: a cell lives %d s, past the claim's expiry instant (%d s left)", step, maxTTL, hi-1)
		}
		if minTTL < lo {
			t.Errorf("after %s: a cell lives only %d s, short of the claim's expiry instant (%d s left)", step, minTTL, lo+2)
		}
	}

	if won, _, err := store.Claim(ctx, rec, nil); err != nil || !won {
		t.Fatalf("Claim = %v, %v", won, err)
	}
	check("claim", "completed_at", "outcome", "last_error")
	e := store.ClaimEntry(rec)
	var entryTTL int
	if err := s.Query(`SELECT TTL(created_at) FROM due_requests
		WHERE shard = ? AND due_bucket = ? AND not_before = ? AND tenant = ? AND operation = ? AND request_id = ? AND claim_token = ?`,
		e.Shard, e.Due, e.NotBefore, e.Tenant, e.Operation, e.RequestID.String(), e.ClaimToken.String()).ScanContext(ctx, &entryTTL); err != nil {
		t.Fatalf("read the claim's entry: %v", err)
	}
	if left := expiry.Sub(time.Now()).Seconds(); float64(entryTTL) > math.Ceil(left)+1 {
		t.Errorf("the claim's due entry lives %d s, past its request (%.1f s left)", entryTTL, left)
	}

	if err := store.RecordAttempt(ctx, rec, "CLUSTER_UNAVAILABLE"); err != nil {
		t.Fatal(err)
	}
	check("attempt", "completed_at", "outcome")

	cur, err := store.Get(ctx, rec.Key)
	if err != nil {
		t.Fatal(err)
	}
	if failed, err := store.MarkFailed(ctx, cur, "COMMAND_UNREADABLE"); err != nil || failed.State != ledger.Failed {
		t.Fatalf("MarkFailed = %s, %v", failed.State, err)
	}
	check("fail", "outcome")

	if requeued, err := store.Requeue(ctx, rec.Key); err != nil || requeued.State != ledger.Pending {
		t.Fatalf("Requeue = %s, %v", requeued.State, err)
	}
	check("requeue", "completed_at", "outcome")

	if cur, err = store.Get(ctx, rec.Key); err != nil {
		t.Fatal(err)
	}
	// A finisher whose clock lags 20 s computes a TTL 20 s too long. The row
	// then lives 20 s longer — but all of it: every cell is rewritten with
	// that one TTL, so no cell (a state) outlives another (its fingerprint),
	// which is what answered a same-payload retry REQUEST_ID_REUSED.
	lagging, err := ledger.NewCassandraStore(cassandra.Wrap(s), ledger.Config{Retention: retention,
		Now: func() time.Time { return time.Now().Add(-20 * time.Second) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := lagging.RecordAttempt(ctx, cur, "CLUSTER_UNAVAILABLE"); err != nil {
		t.Fatal(err)
	}
	ttls := cellTTLs(t, ctx, s, rec.Key)
	if ttls["state"] != ttls["payload_hash"] || ttls["state"] != ttls["created_at"] || ttls["state"] < int(expiry.Sub(time.Now()).Seconds())+15 {
		t.Errorf("after a lagging finisher's write: TTLs %v, want all cells equal (and about 20 s past the expiry instant)", ttls)
	}
	if cur, err = store.Get(ctx, rec.Key); err != nil {
		t.Fatal(err)
	}
	if failed, err := store.MarkFailed(ctx, cur, "COMMAND_UNREADABLE"); err != nil || failed.State != ledger.Failed {
		t.Fatalf("MarkFailed = %s, %v", failed.State, err)
	}
	check("fail after a lagging write", "outcome")
}

// claimRecord is a claim of a tenant of its own (named after the test) made
// at created, for the store's own tests.
func claimRecord(name string, created time.Time) ledger.Record {
	return ledger.Record{
		Key:         ledger.Key{Tenant: name + "-" + uuid.NewString(), Operation: "CreateOrder", RequestID: uuid.New()},
		EntityID:    uuid.New(),
		Fingerprint: "sha256:v1:" + name,
		Command:     []byte(`{"v":1}`),
		CreatedAt:   created.UTC().Truncate(time.Millisecond),
		ClaimToken:  uuid.New(),
	}
}

// cellTTLs reads the TTL of every cell of the row that holds a value (-1 for
// a value without a TTL); a null cell is absent.
func cellTTLs(t *testing.T, ctx context.Context, s *gocql.Session, key ledger.Key) map[string]int {
	t.Helper()
	cells := map[string]nullable{
		"entity_id": &cell[gocql.UUID]{}, "payload_hash": &cell[string]{}, "command": &cell[[]byte]{},
		"state": &cell[string]{}, "created_at": &cell[time.Time]{}, "completed_at": &cell[time.Time]{},
		"outcome": &cell[[]byte]{}, "attempts": &cell[int]{}, "last_error": &cell[string]{}, "claim_token": &cell[gocql.UUID]{},
	}
	var (
		cols []string
		dest []any
		ttls = make([]*int, len(ledgerColumns))
	)
	for i, c := range ledgerColumns {
		cols = append(cols, c, "TTL("+c+")")
		dest = append(dest, cells[c].dest(), &ttls[i])
	}
	q := `SELECT ` + strings.Join(cols, ", ") + ` FROM write_requests_by_id WHERE tenant = ? AND operation = ? AND request_id = ?`
	if err := s.Query(q, key.Tenant, key.Operation, key.RequestID.String()).ScanContext(ctx, dest...); err != nil {
		t.Fatalf("read the TTLs of %s: %v", key.RequestID, err)
	}
	out := map[string]int{}
	for i, c := range ledgerColumns {
		if cells[c].null() {
			continue
		}
		out[c] = -1
		if ttls[i] != nil {
			out[c] = *ttls[i]
		}
	}
	return out
}

// cell scans one column into a pointer, so a null stays apart from an
// empty value.
type cell[T any] struct{ p *T }

type nullable interface {
	dest() any
	null() bool
}

func (c *cell[T]) dest() any  { return &c.p }
func (c *cell[T]) null() bool { return c.p == nil }

// peekBesideALiveClaim peeks the remnant of rec's request id and a live
// claim of the same tenant many times at once, so that most peeks share a
// grouped read (one query by several ids): the remnant is still nothing to
// each, the live claim still the claim.
func peekBesideALiveClaim(t *testing.T, ctx context.Context, store *ledger.Ledger, remnant ledger.Record) {
	t.Helper()
	live := claimRecord("live", time.Now())
	live.Tenant = remnant.Tenant
	if won, _, err := store.Claim(ctx, live, nil); err != nil || !won {
		t.Fatalf("claim beside the remnant: won %v, %v", won, err)
	}
	const peeks = 16
	var g errgroup.Group
	for i := range peeks {
		g.Go(func() error {
			if i%2 == 0 {
				if _, err := store.Peek(ctx, remnant.Key); !errors.Is(err, ledger.ErrNotFound) {
					return fmt.Errorf("Peek of the remnant beside a live claim = %v, want ErrNotFound", err)
				}
				return nil
			}
			if got, err := store.Peek(ctx, live.Key); err != nil || got.ClaimToken != live.ClaimToken {
				return fmt.Errorf("Peek of the live claim beside a remnant = %+v, %v", got, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Error(err)
	}
}

// A ledger row past its retention whose row marker outlived its cells (the
// claim's marker and the later cells' TTLs are rounded apart by under a
// second) is an "expired remnant": a row with no state and no fingerprint.
// The real store alone can hold one (ledgertest.Memory expires a record
// whole), so this runs on the cluster only. A remnant is no request: reads
// find nothing, scans list nothing, and a claim on its request id is
// answered Unavailable (retry shortly, nothing kept: its due entry goes)
// until the marker expires, after which the same claim applies.
func TestLedgerExpiredRemnant(t *testing.T) {
	s := ledgerSession(t)
	store, err := ledger.NewCassandraStore(cassandra.Wrap(s), ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	rec := claimRecord("remnant", time.Now())

	// The remnant: a row marker alone, written as the ledger's rows are
	// (an LWT; its table never takes plain writes).
	const markerTTL = 4 * time.Second
	written := time.Now()
	applied, err := s.Query(`INSERT INTO write_requests_by_id (tenant, operation, request_id)
		VALUES (?, ?, ?) IF NOT EXISTS USING TTL ?`,
		rec.Tenant, rec.Operation, rec.RequestID.String(), int(markerTTL.Seconds())).
		SerialConsistency(gocql.LocalSerial).MapScanCASContext(ctx, map[string]any{})
	if err != nil || !applied {
		t.Fatalf("write the remnant: applied %v, %v", applied, err)
	}
	if got := cellTTLs(t, ctx, s, rec.Key); len(got) != 0 {
		t.Fatalf("the remnant holds cells %v, want none", got)
	}

	if _, err := store.Peek(ctx, rec.Key); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("Peek of a remnant = %v, want ErrNotFound", err)
	}
	if _, err := store.Get(ctx, rec.Key); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("Get (LOCAL_SERIAL) of a remnant = %v, want ErrNotFound", err)
	}
	if listed := scanTenant(t, ctx, store, rec.Tenant); len(listed) != 0 {
		t.Errorf("a scan of the remnant's tenant lists %v, want nothing", listed)
	}
	peekBesideALiveClaim(t, ctx, store, rec)

	won, _, err := store.Claim(ctx, rec, nil)
	if won || fault.KindOf(err) != fault.Unavailable {
		t.Fatalf("Claim over a remnant = won %v, %v; want not won, Unavailable", won, err)
	}
	if time.Since(written) < markerTTL {
		// Only meaningful while the marker lived: else the claim raced its expiry.
		if n := dueEntries(t, rec.RequestID.String()); n != 0 {
			t.Errorf("the refused claim left %d due entries, want 0", n)
		}
	} else {
		t.Fatalf("the remnant expired (%s) before the claim was answered: the test proves nothing; run it again", time.Since(written))
	}

	// Once the marker expires, the same claim applies: nothing was kept.
	time.Sleep(time.Until(written.Add(markerTTL + time.Second)))
	won, cur, err := store.Claim(ctx, rec, nil)
	if err != nil || !won || cur.State != ledger.Pending {
		t.Fatalf("Claim after the remnant expired = won %v, state %s, %v; want a PENDING claim", won, cur.State, err)
	}
	got, err := store.Get(ctx, rec.Key)
	if err != nil || got.Fingerprint != rec.Fingerprint || got.ClaimToken != rec.ClaimToken {
		t.Fatalf("Get after the claim = %+v, %v", got, err)
	}
}

// scanTenant lists every ledger row of tenant, page by page.
func scanTenant(t *testing.T, ctx context.Context, store *ledger.Ledger, tenant string) []ledger.Record {
	t.Helper()
	var out []ledger.Record
	var next []byte
	for {
		page, err := store.Scan(ctx, ledger.ScanFilter{Tenant: tenant}, 100, next)
		if err != nil {
			t.Fatalf("scan tenant %s: %v", tenant, err)
		}
		out = append(out, page.Records...)
		if next = page.Next; next == nil {
			return out
		}
	}
}

// A scan page that fills up on the last row of a chunk (scanChunk rows,
// one query) resumes at the next chunk, not at a skip of the whole chunk
// (which no position may hold): in a keyspace of its own, holding exactly
// one tenant's 201 claims, a page of 200 ends there, and the next page
// holds the last claim and ends the scan. Every claim is listed once.
func TestLedgerScanPageFullAtAChunksLastRow(t *testing.T) {
	isolated(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	ks := fmt.Sprintf("%s_scan", keyspace)
	if out, err := runOrderd(ctx, "migrate", "--keyspace", ks); err != nil {
		t.Fatalf("migrate %s: %v\n%s", ks, err, out)
	}
	t.Cleanup(func() { dropKeyspace(context.Background(), ks) })
	s, err := cassandra.NewSession(cassandra.Config{Hosts: cluster.ContactPoints(), Keyspace: ks})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer s.Close()
	store, err := ledger.NewCassandraStore(cassandra.Wrap(s), ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}

	const claims, pageSize = 201, 200 // pageSize: one chunk
	tenant := "scan-" + uuid.NewString()
	want := map[uuid.UUID]bool{}
	var g errgroup.Group
	g.SetLimit(16)
	for range claims {
		rec := claimRecord("scan", time.Now())
		rec.Tenant = tenant
		want[rec.RequestID] = true
		g.Go(func() error {
			if won, _, err := store.Claim(ctx, rec, nil); err != nil || !won {
				return fmt.Errorf("claim %s: won %v, %v", rec.RequestID, won, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}

	first, err := store.Scan(ctx, ledger.ScanFilter{Tenant: tenant}, pageSize, nil)
	if err != nil || len(first.Records) != pageSize || first.Next == nil {
		t.Fatalf("first page: %d records, next %x, %v; want %d and a next page", len(first.Records), first.Next, err, pageSize)
	}
	second, err := store.Scan(ctx, ledger.ScanFilter{Tenant: tenant}, pageSize, first.Next)
	if err != nil || len(second.Records) != claims-pageSize || second.Next != nil {
		t.Fatalf("second page: %d records, next %x, %v; want %d and the end", len(second.Records), second.Next, err, claims-pageSize)
	}
	seen := map[uuid.UUID]int{}
	for _, r := range append(first.Records, second.Records...) {
		seen[r.RequestID]++
		if !want[r.RequestID] || seen[r.RequestID] > 1 {
			t.Errorf("listed %s (%d times), a claim of this test: %v", r.RequestID, seen[r.RequestID], want[r.RequestID])
		}
	}
	if len(seen) != claims {
		t.Errorf("%d claims listed, want all %d", len(seen), claims)
	}
}
