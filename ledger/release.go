package ledger

import (
	"context"
	"sync"
	"time"
)

// Releases are group-committed. Every new order releases its claim's due
// entry once its order is recorded, in the background (its client does not
// wait for it), and every entry of one (shard, minute) sits in one
// partition. So the releases that arrive within ReleaseWindow for one
// partition share one unlogged, single-partition batch: one request and one
// mutation per replica instead of one per order — the cluster's cost per
// order, not only orderd's, is what bounds throughput here
// (docs/benchmarks.md). Waiting costs nothing that matters: an entry falls
// due DueAfter (30 s) after its claim, and one released late, or never (a
// crash while it waits), only costs the reconciler one look.

// maxReleaseBatch bounds a batch: 32 rows of about 100 bytes stay under
// Cassandra's batch_size_warn_threshold (5 KiB).
const maxReleaseBatch = 32

// releaseBatcher groups concurrent removals of due entries by partition.
type releaseBatcher struct {
	window time.Duration
	write  func(ctx context.Context, entries []DueEntry) error // one batch, one partition

	mu   sync.Mutex
	open map[partitionOf]*releaseBatch // the batch still taking entries, per partition
}

type partitionOf struct {
	shard  int
	bucket int64 // unix milliseconds of the minute
}

type releaseBatch struct {
	entries []DueEntry
	full    chan struct{} // closed when it holds maxReleaseBatch entries
	done    chan struct{} // closed once written (or failed)
	err     error
}

func newReleaseBatcher(window time.Duration, write func(context.Context, []DueEntry) error) *releaseBatcher {
	return &releaseBatcher{window: window, write: write, open: map[partitionOf]*releaseBatch{}}
}

// remove removes e with whatever else of its partition is removed within
// the window, and returns once that batch is written. The first caller of a
// batch leads it: it waits for the window (or a full batch) and writes it;
// its context bounds the batch.
func (r *releaseBatcher) remove(ctx context.Context, e DueEntry) error {
	p := partitionOf{shard: e.Shard, bucket: e.Due.UnixMilli()}
	b, leads := r.join(p, e)
	if leads {
		r.lead(ctx, p, b)
	}
	select {
	case <-b.done:
		return b.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *releaseBatcher) join(p partitionOf, e DueEntry) (*releaseBatch, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, ok := r.open[p]
	if !ok {
		b = &releaseBatch{full: make(chan struct{}), done: make(chan struct{})}
		r.open[p] = b
	}
	b.entries = append(b.entries, e)
	if len(b.entries) == maxReleaseBatch {
		delete(r.open, p) // later entries start the next batch
		close(b.full)
	}
	return b, !ok
}

func (r *releaseBatcher) lead(ctx context.Context, p partitionOf, b *releaseBatch) {
	t := time.NewTimer(r.window)
	select {
	case <-t.C:
	case <-b.full:
	case <-ctx.Done():
	}
	t.Stop()
	r.mu.Lock()
	if r.open[p] == b {
		delete(r.open, p)
	}
	entries := b.entries
	r.mu.Unlock()
	b.err = r.write(ctx, entries)
	close(b.done)
}
