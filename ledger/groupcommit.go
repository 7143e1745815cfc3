package ledger

import (
	"context"
	"time"

	"github.com/atlasmart/orderd/internal/platform/groupcommit"
)

// Writes to the due queue are group-committed (internal/platform/groupcommit).
// Every claim writes its due entry, and every new order releases it once
// its order is recorded; all
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

// Quorum reads of the ledger are grouped the same way (Ledger.Peek):
// the reads of one tenant's and operation's requests that meet share one
// query (request_id IN ...), at most readsInFlight at once per group, so a
// read that meets none goes at once.
const (
	maxReads      = 16
	readsInFlight = 4
)

// peek is one Peek waiting in a grouped read: its key and, once the read
// ran, its row or its error (ErrNotFound).
type peek struct {
	key Key
	rec Record
	err error
}

// peekGroup is the key of a grouped read: rows one query can ask for.
type peekGroup struct{ tenant, operation string }

func newGroupRead(limit int, read func(context.Context, []*peek) error) *groupcommit.Committer[peekGroup, *peek] {
	return groupcommit.New(groupcommit.Config{Limit: limit, InFlight: readsInFlight},
		func(p *peek) peekGroup { return peekGroup{p.key.Tenant, p.key.Operation} }, nil, read)
}

// partitionOf is the due-queue partition of an entry: its batches' key.
type partitionOf struct {
	shard  int
	bucket int64 // unix milliseconds of the minute
}

func partitionOfEntry(e DueEntry) partitionOf {
	return partitionOf{shard: e.Shard, bucket: e.Due.UnixMilli()}
}

// groupCommit groups concurrent writes of due entries by partition, one
// batch of a partition in flight at a time.
type groupCommit = groupcommit.Committer[partitionOf, DueEntry]

func newGroupCommit(window time.Duration, limit int, write func(context.Context, []DueEntry) error) *groupCommit {
	return groupcommit.New(groupcommit.Config{Window: window, Limit: limit}, partitionOfEntry, nil, write)
}
