package ledger

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/cassandra"
)

// The due queue (table pending_requests) is how unfinished requests are
// found without scanning the ledger: every claim attempt first writes an
// entry, due when the request would be presumed abandoned; settling the
// request deletes it. A reader scans only the (shard, minute) partitions that
// fell due since its cursor, so its cost grows with the pending requests and
// the minutes scanned, never with the history of the ledger.

// PendingShards is the number of due-queue shards. It is part of the data
// layout (cql/0002_reconciler.cql creates one cursor per shard): changing it
// needs a migration.
const PendingShards = 16

// BucketWidth is the width of one due-queue partition in time.
const BucketWidth = time.Minute

const (
	enqueueCQL = `/* queue.enqueue */ INSERT INTO pending_requests
		(shard, due_bucket, tenant, operation, request_id, claim_token, created_at, not_before)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?) USING TTL ?`
	dequeueCQL = `/* queue.remove */ DELETE FROM pending_requests
		WHERE shard = ? AND due_bucket = ? AND tenant = ? AND operation = ? AND request_id = ? AND claim_token = ?`
	dueCQL = `/* queue.due */ SELECT tenant, operation, request_id, claim_token, created_at, not_before FROM pending_requests
		WHERE shard = ? AND due_bucket = ?`
)

// DueEntry is one entry of the due queue.
type DueEntry struct {
	Key
	Shard      int
	Due        time.Time // start of the minute it falls due
	ClaimToken uuid.UUID
	CreatedAt  time.Time
	NotBefore  time.Time // the exact time it falls due (Due is its minute)
}

// SameRow reports whether e and o are the same row of the queue.
func (e DueEntry) SameRow(o DueEntry) bool {
	return e.Key == o.Key && e.Shard == o.Shard && e.Due.Equal(o.Due) && e.ClaimToken == o.ClaimToken
}

// ClaimEntry is the entry rec's claim wrote (the one Release removes).
func (c *CassandraStore) ClaimEntry(rec Record) DueEntry { return c.entryFor(rec) }

// ShardOf is the due-queue shard of a request.
func ShardOf(requestID uuid.UUID) int {
	h := fnv.New32a()
	h.Write(requestID[:])
	return int(h.Sum32() % PendingShards)
}

// BucketOf is the due-queue bucket holding time t.
func BucketOf(t time.Time) time.Time { return t.UTC().Truncate(BucketWidth) }

// entryFor is the entry a claim attempt writes for rec.
func (c *CassandraStore) entryFor(rec Record) DueEntry {
	due := rec.CreatedAt.Add(c.cfg.DueAfter)
	return DueEntry{
		Key:        rec.Key,
		Shard:      ShardOf(rec.RequestID),
		Due:        BucketOf(due),
		ClaimToken: rec.ClaimToken,
		CreatedAt:  rec.CreatedAt,
		NotBefore:  due,
	}
}

func (c *CassandraStore) enqueue(ctx context.Context, e DueEntry) error {
	err := c.s.Query(enqueueCQL, e.Shard, e.Due, e.Tenant, e.Operation, e.RequestID.String(), e.ClaimToken.String(),
		e.CreatedAt, e.NotBefore, c.ttlFrom(e.CreatedAt)).Idempotent(true).ExecContext(ctx)
	return cassandra.WriteError("enqueue pending request", err)
}

// RemoveEntry deletes a due-queue entry.
func (c *CassandraStore) RemoveEntry(ctx context.Context, e DueEntry) error {
	err := c.s.Query(dequeueCQL, e.Shard, e.Due, e.Tenant, e.Operation, e.RequestID.String(), e.ClaimToken.String()).
		Idempotent(true).ExecContext(ctx)
	return cassandra.WriteError("remove pending entry", err)
}

// Reschedule moves an entry to fall due at due (its next attempt).
func (c *CassandraStore) Reschedule(ctx context.Context, e DueEntry, due time.Time) error {
	next := e
	next.Due, next.NotBefore = BucketOf(due), due
	// Insert first: a crash in between leaves two entries, never none. In
	// the same minute the insert just moves not_before.
	if err := c.enqueue(ctx, next); err != nil || next.Due.Equal(e.Due) {
		return err
	}
	return c.RemoveEntry(ctx, e)
}

// DueEntries lists the entries of one shard that fall due in the minute
// starting at bucket.
func (c *CassandraStore) DueEntries(ctx context.Context, shard int, bucket time.Time) ([]DueEntry, error) {
	bucket = BucketOf(bucket)
	iter := c.s.Query(dueCQL, shard, bucket).PageSize(1000).IterContext(ctx)
	var (
		out              []DueEntry
		e                = DueEntry{Shard: shard, Due: bucket}
		requestID, token gocql.UUID
	)
	for iter.Scan(&e.Tenant, &e.Operation, &requestID, &token, &e.CreatedAt, &e.NotBefore) {
		e.RequestID, e.ClaimToken, e.CreatedAt, e.NotBefore = uuid.UUID(requestID), uuid.UUID(token), e.CreatedAt.UTC(), e.NotBefore.UTC()
		out = append(out, e)
	}
	if err := iter.Close(); err != nil {
		return nil, cassandra.ReadError(fmt.Sprintf("read due entries of shard %d at %s", shard, bucket.Format(time.RFC3339)), err)
	}
	return out, nil
}
