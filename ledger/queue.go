package ledger

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/domain/fault"
)

// The due queue (table due_requests, cql/0003_due_queue.cql) is how
// unfinished requests are found without scanning the ledger: every claim
// attempt first writes an entry, due when the request would be presumed
// abandoned; settling the request marks it done. A reader scans only the
// (shard, minute) partitions that fell due since its cursor, by time range
// (not_before leads the clustering key), so its cost grows with the requests
// that fell due, never with the history of the ledger; an entry is never
// deleted on its own, so no read meets a row tombstone. The cursor's owner
// deletes a partition whole once it has passed it (DropBucket).

// PendingShards is the number of due-queue shards. It is part of the data
// layout (cql/0002_reconciler.cql creates one cursor per shard): changing it
// needs a migration.
const PendingShards = 16

// RequeueLead is how long after the cluster's now a requeued request falls
// due. The reconciler reads each minute only up to its own now and then
// goes on from there, so an entry must be written before the time it falls
// due, with room for clock skew between nodes, or only the minute's final
// sweep (docs/reconciler.md) would find it.
const RequeueLead = 5 * time.Second

// BucketWidth is the width of one due-queue partition in time.
const BucketWidth = time.Minute

// DueEntry is one entry of the due queue.
type DueEntry struct {
	Key
	Shard      int
	Due        time.Time // start of the minute it falls due
	ClaimToken uuid.UUID
	CreatedAt  time.Time
	NotBefore  time.Time // the exact time it falls due (Due is its minute)
	// Owed is the order whose event this entry owes once its claim is gone
	// (uuid.Nil: none). Such an entry has no TTL: it lives until the event
	// is acknowledged, however long after the claim's retention
	// (cql/0008_owed_deliveries.cql).
	Owed uuid.UUID
}

// SameRow reports whether e and o are the same row of the queue.
func (e DueEntry) SameRow(o DueEntry) bool {
	return e.Key == o.Key && e.Shard == o.Shard && e.Due.Equal(o.Due) && e.NotBefore.Equal(o.NotBefore) &&
		e.ClaimToken == o.ClaimToken
}

// ClaimEntry is the entry rec's claim wrote (the one Release removes).
func (c *Ledger) ClaimEntry(rec Record) DueEntry { return c.entryFor(rec) }

// ShardSlot is how long the claims of every instance put their entries in
// one shard before moving on to the next: an entry's shard is that of its
// claim's time (ShardOf). Concurrent claims therefore write to one
// partition, and their entries and releases share batches
// (groupcommit.go); over a minute every shard takes its turns, so each
// holds 1/PendingShards of the entries, as the hash of the request id
// (before) gave. A short slot keeps any one replica set from taking the
// queue's writes for long on a cluster larger than the replication factor.
const ShardSlot = 100 * time.Millisecond

// ShardOf is the due-queue shard of a claim made at claimedAt (the claim
// time a Record carries, so every finisher finds the same entry). Entries
// written when the shard was the request id's hash are matched to their
// claims by claim token, never by shard: the reconciler settles them all
// the same.
func ShardOf(claimedAt time.Time) int {
	return int(claimedAt.UnixMilli()/ShardSlot.Milliseconds()) % PendingShards
}

// BucketOf is the due-queue bucket holding time t.
func BucketOf(t time.Time) time.Time { return t.UTC().Truncate(BucketWidth) }

// entryFor is the entry a claim attempt writes for rec.
func (c *Ledger) entryFor(rec Record) DueEntry {
	due := rec.CreatedAt.Add(c.cfg.DueAfter)
	return DueEntry{
		Key:        rec.Key,
		Shard:      ShardOf(rec.CreatedAt),
		Due:        BucketOf(due),
		ClaimToken: rec.ClaimToken,
		CreatedAt:  rec.CreatedAt,
		NotBefore:  due.Truncate(time.Millisecond), // as stored: part of the key
	}
}

// Alongside runs check (if any) and enqueue at once and waits for both: the
// step before every claim, shared by every Store (the fakes too). check's
// error wins: it is the caller's answer whatever became of the entry. A
// failed enqueue is Unavailable: whatever became of the entry, the claim is
// never sent, so for the request it is definitely not applied.
func Alongside(ctx context.Context, check func(context.Context) error, enqueue func() error) error {
	checked := make(chan error, 1)
	if check == nil {
		checked <- nil
	} else {
		go func() { checked <- check(ctx) }()
	}
	qerr := enqueue()
	if err := <-checked; err != nil {
		return err
	}
	if qerr != nil {
		return fault.New(fault.ReasonClusterUnavailable, qerr)
	}
	return nil
}

func (c *Ledger) enqueue(ctx context.Context, e DueEntry) error {
	return c.enqueueEntries(ctx, []DueEntry{e})
}

// enqueueEntries writes entries of one partition in one write.
func (c *Ledger) enqueueEntries(ctx context.Context, entries []DueEntry) error {
	return c.t.WriteEntries(ctx, entries, c.entryTTL)
}

// RemoveEntry takes an entry out of the queue: it is marked done, and no
// read lists it again. Removing an entry that was never written leaves a
// done row that no read lists either. Removals of one partition that meet
// share a write, as entries do (groupcommit.go): the reconciler finishes
// a minute's entries of a shard many at once.
func (c *Ledger) RemoveEntry(ctx context.Context, e DueEntry) error {
	return c.removals.Add(ctx, e)
}

// removeEntries removes entries of one partition in one write.
func (c *Ledger) removeEntries(ctx context.Context, entries []DueEntry) error {
	return c.t.RemoveEntries(ctx, entries, c.entryTTL)
}

// entryTTL is the TTL of e's cells: its claim's, or none (0) for an entry
// that owes an event (it outlives the claim).
func (c *Ledger) entryTTL(e DueEntry) int {
	if e.Owed != uuid.Nil {
		return 0
	}
	return c.ttlFrom(e.CreatedAt)
}

// Reschedule moves an entry to fall due at due (its next attempt): the new
// entry first, so that a crash in between leaves two entries, never none.
func (c *Ledger) Reschedule(ctx context.Context, e DueEntry, due time.Time) error {
	next := e
	next.Due, next.NotBefore = BucketOf(due), due.UTC().Truncate(time.Millisecond)
	if err := c.enqueue(ctx, next); err != nil || next.SameRow(e) {
		return err
	}
	return c.RemoveEntry(ctx, e)
}

// DueEntries lists the entries of one shard's minute starting at bucket
// that are still queued and fall due in (after, through], by due time. A
// zero after reads from the start of the minute. Done entries are read but
// not listed (filtering them in the query would need ALLOW FILTERING).
func (c *Ledger) DueEntries(ctx context.Context, shard int, bucket, after, through time.Time) ([]DueEntry, error) {
	bucket = BucketOf(bucket)
	if after.IsZero() || after.Before(bucket) {
		after = bucket.Add(-time.Millisecond)
	}
	return c.t.ListDue(ctx, shard, bucket, after, through)
}

// DropBucket deletes one shard's minute whole (a single partition
// tombstone). Only the owner of the shard's cursor calls it, when the
// cursor passes the minute: no reader reads behind the cursor, so no read
// ever meets the tombstone. The tombstone is dated by the cluster's clock:
// dated by a reconciler whose clock leads, it would also delete every entry
// written into the partition until that clock's time came, for as long as
// the tombstone lives.
func (c *Ledger) DropBucket(ctx context.Context, shard int, bucket time.Time) error {
	return c.t.DropBucket(ctx, shard, BucketOf(bucket))
}
