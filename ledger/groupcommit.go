package ledger

import (
	"context"
	"sync"
	"time"
)

// Writes to the due queue are group-committed. Every claim writes its due
// entry, and every new order releases it once its order is recorded; all
// entries of one (shard, minute) sit in one partition, and the shard of an
// entry is that of its claim's time slot (ShardOf), so the entries and the
// releases of concurrent requests share partitions. Writes to one partition
// that meet in a groupCommit share one unlogged, single-partition batch:
// one request and one mutation per replica instead of one per order — the
// cluster's cost per order, not only orderd's, is what bounds throughput
// here (docs/benchmarks.md).
//
// A batch opens with its first write and is sent once its window has
// passed and no earlier batch of its partition is still being written, or
// at once when it is full. The entries a claim waits for use no window:
// the first is sent at once, and those arriving while it is in flight go
// together in the next batch, so batching costs a claim at most one
// write's wait and only under load. Releases, which no client waits for,
// use a window (Config.ReleaseWindow): an entry falls due DueAfter (30 s)
// after its claim, and one released late, or never (a crash while it
// waits), only costs the reconciler one look.

// maxBatch bounds a batch: 32 rows of about 100 bytes stay under
// Cassandra's batch_size_warn_threshold (5 KiB).
const maxBatch = 32

// groupCommit groups concurrent writes of due entries by partition.
type groupCommit struct {
	window time.Duration
	limit  int                                                 // entries per batch; 1: every write alone
	write  func(ctx context.Context, entries []DueEntry) error // one batch, one partition

	mu    sync.Mutex
	parts map[partitionOf]*partitionState
}

type partitionOf struct {
	shard  int
	bucket int64 // unix milliseconds of the minute
}

// partitionState is what a partition has going: the batch still taking
// writes, the batches being written, and every batch not yet done (the
// state goes with the last).
type partitionState struct {
	open     *batch
	inFlight int
	idle     chan struct{} // closed when inFlight drops to 0
	batches  int
}

type batch struct {
	entries []DueEntry
	full    chan struct{} // closed when it holds limit entries
	done    chan struct{} // closed once written (or failed)
	err     error
}

func newGroupCommit(window time.Duration, limit int, write func(context.Context, []DueEntry) error) *groupCommit {
	return &groupCommit{window: window, limit: limit, write: write, parts: map[partitionOf]*partitionState{}}
}

// add writes e with whatever else of its partition meets it, and returns
// once that batch is written. The first caller of a batch leads it: it
// waits for the window, a full batch or the partition's previous batch,
// and writes it; its context bounds the batch.
func (g *groupCommit) add(ctx context.Context, e DueEntry) error {
	p := partitionOf{shard: e.Shard, bucket: e.Due.UnixMilli()}
	b, leads := g.join(p, e)
	if leads {
		g.lead(ctx, p, b)
	}
	select {
	case <-b.done:
		return b.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *groupCommit) join(p partitionOf, e DueEntry) (*batch, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ps := g.parts[p]
	if ps == nil {
		ps = &partitionState{idle: make(chan struct{})}
		g.parts[p] = ps
	}
	b, leads := ps.open, ps.open == nil
	if leads {
		b = &batch{full: make(chan struct{}), done: make(chan struct{})}
		ps.open = b
		ps.batches++
	}
	b.entries = append(b.entries, e)
	if len(b.entries) == g.limit {
		ps.open = nil // later writes start the next batch
		close(b.full)
	}
	return b, leads
}

func (g *groupCommit) lead(ctx context.Context, p partitionOf, b *batch) {
	if g.window > 0 {
		t := time.NewTimer(g.window)
		select {
		case <-t.C:
		case <-b.full:
		case <-ctx.Done():
		}
		t.Stop()
	}
	entries := g.await(ctx, p, b)
	b.err = g.write(ctx, entries)
	g.mu.Lock()
	ps := g.parts[p]
	if ps.inFlight--; ps.inFlight == 0 {
		close(ps.idle)
		ps.idle = make(chan struct{})
	}
	if ps.batches--; ps.batches == 0 {
		delete(g.parts, p)
	}
	g.mu.Unlock()
	close(b.done)
}

// await waits until b may be written — no batch of its partition in
// flight, or b full, or the leader's context done — closes it to further
// writes and counts it in flight.
func (g *groupCommit) await(ctx context.Context, p partitionOf, b *batch) []DueEntry {
	for {
		g.mu.Lock()
		ps := g.parts[p]
		if ps.inFlight == 0 || len(b.entries) == g.limit || ctx.Err() != nil {
			if ps.open == b {
				ps.open = nil
			}
			ps.inFlight++
			entries := b.entries
			g.mu.Unlock()
			return entries
		}
		idle := ps.idle
		g.mu.Unlock()
		select {
		case <-idle:
		case <-b.full:
		case <-ctx.Done():
		}
	}
}
