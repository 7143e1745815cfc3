package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/app/workflow"
	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/stores/leases"
	"github.com/atlasmart/orderd/ledger"
	"github.com/atlasmart/orderd/projection"
	"github.com/atlasmart/orderd/reconciler"
)

// BenchmarkReconcilerFindPending measures one reconciler pass over every
// shard finding 100 PENDING requests among 1,000 and among 100,000 COMPLETE
// ones (each made by the real ledger as a finished request leaves it:
// due-queue entry, claim LWT, entry released), and prints both times and their ratio. Run it with
//
//	make bench-reconciler
//
// Each size gets a fresh keyspace. The history is first caught up by one
// pass (the cursor moves past settled minutes, as it does in a running
// system), then 100 requests are claimed and left PENDING, and the timed pass
// finds them. The finisher only records what it was given, so the time is
// the cost of finding: reading the due minutes, one LOCAL_SERIAL read per
// due entry, and removing the entry.
func BenchmarkReconcilerFindPending(b *testing.B) {
	type result struct {
		complete          int
		generate, catchUp time.Duration
		find              time.Duration
		found             int
		buckets           int
	}
	var results []result
	for _, n := range []int{1_000, 100_000} {
		r := result{complete: n}
		func() {
			s, store, done := benchKeyspace(b, fmt.Sprintf("bench_rec_%d", n))
			defer done()
			start := time.Now()
			claimMany(b, store, n, true)
			r.generate = time.Since(start)

			var finished atomic.Int64
			loop := reconciler.New(reconciler.Config{Margin: time.Nanosecond},
				store, func(context.Context, ledger.Record) (ledger.Settled, error) {
					finished.Add(1)
					return ledger.Finished, nil
				},
				leases.NewCassandraCoordinator(cassandra.Wrap(s)), slog.New(slog.NewTextHandler(io.Discard, nil)))
			all := make([]int, ledger.PendingShards)
			for i := range all {
				all[i] = i
			}
			time.Sleep(1100 * time.Millisecond) // let the last minute's entries fall due
			start = time.Now()
			if _, err := loop.PassShards(context.Background(), all); err != nil {
				b.Fatalf("catch-up pass: %v", err)
			}
			r.catchUp = time.Since(start)
			// The next minute begins with an empty due bucket, as in a running
			// system whose cursor has moved past the history.
			time.Sleep(time.Until(time.Now().Truncate(time.Minute).Add(time.Minute + 100*time.Millisecond)))
			if _, err := loop.PassShards(context.Background(), all); err != nil {
				b.Fatalf("second catch-up pass: %v", err)
			}

			claimMany(b, store, 100, false)
			time.Sleep(1100 * time.Millisecond)
			b.ResetTimer()
			start = time.Now()
			res, err := loop.PassShards(context.Background(), all)
			r.find = time.Since(start)
			b.StopTimer()
			if err != nil {
				b.Fatalf("timed pass: %v", err)
			}
			r.found, r.buckets = res.Pending, res.Buckets
			if res.Pending != 100 {
				b.Fatalf("the pass found %d PENDING requests, want 100 (%+v)", res.Pending, res)
			}
		}()
		results = append(results, r)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\nreconciler pass over %d shards, finding 100 PENDING requests:\n", ledger.PendingShards)
	fmt.Fprintf(&sb, "%10s %14s %14s %12s %9s %8s\n", "COMPLETE", "generate", "catch-up pass", "find pass", "buckets", "found")
	for _, r := range results {
		fmt.Fprintf(&sb, "%10d %14s %14s %12s %9d %8d\n", r.complete, r.generate.Round(time.Millisecond),
			r.catchUp.Round(time.Millisecond), r.find.Round(time.Microsecond), r.buckets, r.found)
	}
	ratio := float64(results[1].find) / float64(results[0].find)
	fmt.Fprintf(&sb, "find pass ratio 100,000 / 1,000 COMPLETE: %.2f\n", ratio)
	fmt.Print(sb.String())
	b.ReportMetric(float64(results[0].find.Microseconds())/1000, "ms/find@1k")
	b.ReportMetric(float64(results[1].find.Microseconds())/1000, "ms/find@100k")
	b.ReportMetric(ratio, "ratio")
}

// claimMany claims n new requests, each with a real command, through the
// real ledger; complete says whether each is then finished (its due entry
// released) or left PENDING, as a crash right after the claim leaves it.
func claimMany(b *testing.B, store *ledger.Ledger, n int, complete bool) {
	b.Helper()
	var (
		wg    sync.WaitGroup
		next  atomic.Int64
		first atomic.Value
	)
	cmd := order.Command{CustomerID: "bench", Total: "12.34", Currency: "EUR"}
	encoded := cmd.Encode()
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for next.Add(1) <= int64(n) {
				id := uuid.New()
				rec := ledger.Record{
					Key:      ledger.Key{Tenant: tenant, Operation: order.OperationCreate, RequestID: id},
					EntityID: order.ID(tenant, id), Fingerprint: order.Fingerprint(encoded), Command: encoded,
					CreatedAt: time.Now().UTC().Truncate(time.Millisecond), ClaimToken: uuid.New(),
				}
				won, cur, err := store.Claim(ctx, rec, nil)
				if err == nil && !won {
					err = fmt.Errorf("claim of a new id %s lost", id)
				}
				if err == nil && complete {
					err = store.Release(ctx, cur)
				}
				if err != nil {
					first.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := first.Load().(error); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkReconcilerHeal measures how fast one reconciler instance heals a
// backlog that a crash left behind: 10,000 requests claimed and left
// PENDING (nothing projected), finished by the real workflow (projections
// and COMPLETE) at two bounds of per-bucket concurrency, and a sequential
// reference on 1,000; and, side by side at 64, the same with every read
// and every projection row its own request (ledger.Alone.Reads,
// projection.Config.Batch 1), the reconciler before its reads and writes
// were grouped. Goal: 10,000 healed in ≤ 20 s. Run it with
//
//	make bench-reconciler
func BenchmarkReconcilerHeal(b *testing.B) {
	type result struct {
		pending, concurrency int
		alone                bool
		took                 time.Duration
		passes               int
	}
	var results []result
	for _, c := range []struct {
		pending, concurrency int
		alone                bool
	}{{1_000, 1, false}, {10_000, 16, false}, {10_000, 64, true}, {10_000, 64, false}} {
		r := result{pending: c.pending, concurrency: c.concurrency, alone: c.alone}
		func() {
			s, store, done := benchKeyspace(b, fmt.Sprintf("bench_heal_%d", c.concurrency))
			defer done()
			driver := cassandra.Wrap(s)
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			batch := projection.DefaultBatch
			if c.alone {
				var err error
				if store, err = ledger.NewBaseline(ledger.NewCQLTable(driver), ledger.Config{DueAfter: time.Second}, ledger.Alone{Reads: true}); err != nil {
					b.Fatal(err)
				}
				batch = 1
			}
			wf := workflow.New(workflow.Config{}, store, projection.New(projection.Config{Batch: batch}, driver, nil), nil, log)
			claimMany(b, store, c.pending, false)
			time.Sleep(1100 * time.Millisecond) // every entry due

			loop := reconciler.New(reconciler.Config{Margin: time.Nanosecond, Concurrency: c.concurrency}, store,
				wf.Settle,
				leases.NewCassandraCoordinator(driver), log)
			all := make([]int, ledger.PendingShards)
			for i := range all {
				all[i] = i
			}
			b.ResetTimer()
			start, finished := time.Now(), 0
			for finished < c.pending && time.Since(start) < 5*time.Minute {
				res, err := loop.PassShards(context.Background(), all)
				if err != nil {
					b.Logf("pass: %v", err)
				}
				finished += res.Finished
				r.passes++
			}
			r.took = time.Since(start)
			b.StopTimer()
			if finished != c.pending {
				b.Fatalf("healed %d of %d PENDING requests in %s", finished, c.pending, r.took)
			}
		}()
		results = append(results, r)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\nhealing a backlog of PENDING requests with one reconciler instance (%d shards):\n", ledger.PendingShards)
	fmt.Fprintf(&sb, "%9s %12s %-8s %10s %8s %12s\n", "PENDING", "concurrency", "requests", "took", "passes", "healed/s")
	for _, r := range results {
		fmt.Fprintf(&sb, "%9d %12d %-8s %10s %8d %12.0f\n", r.pending, r.concurrency, grouping(r.alone), r.took.Round(time.Millisecond), r.passes,
			float64(r.pending)/r.took.Seconds())
	}
	alone, grouped := results[2], results[3]
	fmt.Fprintf(&sb, "grouped / alone at 64, same run: time %.2f\n", grouped.took.Seconds()/alone.took.Seconds())
	fmt.Print(sb.String())
	for _, r := range results[1:] {
		b.ReportMetric(r.took.Seconds(), fmt.Sprintf("s/heal10k@%d-%s", r.concurrency, grouping(r.alone)))
	}
}

// grouping names how a heal bench case sends its reads and projection rows.
func grouping(alone bool) string {
	if alone {
		return "alone"
	}
	return "grouped"
}

// benchKeyspace migrates a fresh keyspace named prefix_<ms> and returns a
// session on it and the real ledger store (entries due after 1 s); done
// closes the session and drops the keyspace. Benchmarks use it, and tests
// whose rows must not meet the run's keyspace.
func benchKeyspace(b testing.TB, prefix string) (*gocql.Session, *ledger.Ledger, func()) {
	b.Helper()
	ks := fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano()/1e6)
	if out, err := runOrderd(context.Background(), "migrate", "--keyspace", ks); err != nil {
		b.Fatalf("migrate %s: %v\n%s", ks, err, out)
	}
	drop := func() { dropKeyspace(context.Background(), ks) }
	s, err := cassandra.NewSession(cassandra.Config{Hosts: cluster.ContactPoints(), Keyspace: ks, Timeout: 10 * time.Second})
	if err != nil {
		drop()
		b.Fatal(err)
	}
	done := func() { s.Close(); drop() }
	store, err := ledger.NewCassandraStore(cassandra.Wrap(s), ledger.Config{DueAfter: time.Second})
	if err != nil {
		done()
		b.Fatal(err)
	}
	return s, store, done
}

// BenchmarkDueQueueSweep measures how fast one reconciler instance reads
// the due queue: one shard's minute holding 30,000 settled (done) entries,
// as a busy minute leaves it, read whole as its final sweep reads it. The
// rows read per second bound the rate the queue supports per instance
// (docs/reconciler.md "Highest rate": each entry is read twice). Run it
// with make bench-reconciler.
func BenchmarkDueQueueSweep(b *testing.B) {
	const entries = 30_000
	_, store, done := benchKeyspace(b, "bench_sweep")
	defer done()
	ctx := context.Background()
	const shard = 3
	bucket := ledger.BucketOf(time.Now().Add(-10 * time.Minute))
	created := bucket.Add(-time.Minute)
	// Each entry written as the queue writes it (a reschedule into the
	// minute: the full row), then marked done as a finisher marks it.
	var (
		wg     sync.WaitGroup
		next   atomic.Int64
		failed atomic.Int64
	)
	for range 64 {
		wg.Go(func() {
			for i := next.Add(1); i <= entries; i = next.Add(1) {
				from := ledger.DueEntry{
					Key:        ledger.Key{Tenant: tenant, Operation: "CREATE_ORDER", RequestID: uuid.New()},
					Shard:      shard,
					Due:        bucket.Add(-time.Hour),
					NotBefore:  bucket.Add(-time.Hour),
					ClaimToken: uuid.New(),
					CreatedAt:  created,
				}
				due := bucket.Add(time.Duration(i) * time.Minute / entries)
				to := from
				to.Due, to.NotBefore = bucket, due.Truncate(time.Millisecond)
				if store.Reschedule(ctx, from, due) != nil || store.RemoveEntry(ctx, to) != nil {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d of %d entries could not be written", n, entries)
	}
	b.ResetTimer()
	var took time.Duration
	for range b.N {
		start := time.Now()
		listed, err := store.DueEntries(ctx, shard, bucket, time.Time{}, bucket.Add(ledger.BucketWidth))
		took = time.Since(start)
		if err != nil {
			b.Fatalf("sweep: %v", err)
		}
		if len(listed) != 0 {
			b.Fatalf("sweep listed %d entries, want none (all done)", len(listed))
		}
	}
	b.StopTimer()
	fmt.Printf("\ndue-queue sweep: %d done entries in one shard's minute read in %s: %.0f rows/s\n",
		entries, took.Round(time.Millisecond), entries/took.Seconds())
	b.ReportMetric(entries/took.Seconds(), "rows/s")
}
