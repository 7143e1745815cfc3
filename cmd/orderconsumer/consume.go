package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kotel"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"

	"github.com/atlasmart/orderd/internal/tools/orderconsumer/store"
)

// consumer polls the topic, applies every record of a poll, then commits
// the poll's offsets. The client must be a group consumer with
// DisableAutoCommit and BlockRebalanceOnPoll (newKafkaClient): offsets move
// only past applied records, and partitions cannot move to another member
// between our apply and our commit.
//
// A rebalance waits for the poll in hand, but only for the group's
// rebalance timeout: a member still applying then is put out of the group,
// its commit refused and its whole poll applied again by the partitions'
// next owner, which can be put out the same way by the next rebalance. So
// when a rebalance is waiting (the client's OnPartitionsCallbackBlocked,
// wired to rebalance), the poll in hand stops: the records applied so far
// are committed, each partition is rewound to its first record not
// applied, and the rebalance goes ahead; those records are fetched again by
// whoever owns their partition next. (A rebalance that only gives this
// member partitions waits for the poll in hand too, since the client logs
// assignments from a callback, and cuts it the same way: a refetch, no
// more.)
type consumer struct {
	client  *kgo.Client
	apply   func(context.Context, *kgo.Record) (outcome, error)
	tracer  *kotel.Tracer // each record's apply is a "process" span of its trace
	metrics *metrics
	log     *slog.Logger
	// rebalance says a rebalance waits for the poll in hand.
	rebalance rebalanceWaiting

	maxPoll    int           // records per poll
	tryTimeout time.Duration // bounds one attempt to apply one record
	backoff    backoff       // between attempts
	grace      time.Duration // how long the poll in hand may finish after ctx ends
}

// Run consumes until ctx ends, finishes the poll in hand (within c.grace),
// and leaves the group. It returns an error when it stopped with a poll it
// could not finish (its records come again, to whoever takes the
// partitions) or when the client was closed under it.
func (c *consumer) Run(ctx context.Context) error {
	defer c.leave()
	for ctx.Err() == nil {
		// A signal still here was for the last poll. (Dropped before the
		// poll, not after: the client counts a poll as in hand, and may
		// signal once for it, before PollRecords returns.)
		c.rebalance.forget()
		fetches := c.client.PollRecords(ctx, c.maxPoll)
		err := c.handle(ctx, fetches)
		// After the commit (or the failure): only now may partitions move.
		c.client.AllowRebalance()
		if err != nil {
			return err
		}
	}
	return nil
}

// handle applies and commits one poll's records.
func (c *consumer) handle(ctx context.Context, fetches kgo.Fetches) error {
	if fetches.IsClientClosed() {
		return errors.New("kafka client closed")
	}
	fetches.EachError(func(topic string, partition int32, err error) {
		if !errors.Is(err, context.Canceled) {
			c.log.Warn("fetch failed; the client retries", "topic", topic, "partition", partition, "err", err)
		}
	})
	records := fetches.Records()
	if len(records) == 0 || ctx.Err() != nil {
		return nil // a poll that ends with the context is not started: its records come again
	}
	work, cancel := afterGrace(ctx, c.grace)
	defer cancel()
	applying, stop := c.rebalance.cuts(work)
	defer stop()
	applied, rest, err := c.applyAll(applying, fetches)
	if err != nil && work.Err() == nil && errors.Is(context.Cause(applying), errRebalanceWaiting) {
		c.commit(work, applied)
		c.client.SetOffsets(rest)
		c.metrics.pollsCut.Inc()
		c.log.Info("a rebalance is waiting: committed the records applied and left the rest of the poll to be fetched again",
			"applied", len(applied), "records", len(records))
		return nil
	}
	if err != nil {
		return fmt.Errorf("stopped before applying a poll of %d records (they will be delivered again): %w", len(records), err)
	}
	c.commit(work, applied)
	return nil
}

// commit commits the offsets of applied records. A failure is not fatal:
// the records are applied. A later commit on the same partitions covers
// these offsets; until then, a restart or a new owner of the partitions
// gets the records again, and the inbox calls them duplicates.
func (c *consumer) commit(ctx context.Context, applied []*kgo.Record) {
	if len(applied) == 0 {
		return
	}
	if err := c.client.CommitRecords(ctx, applied...); err != nil {
		c.metrics.commitErrors.Inc()
		c.log.Error("commit failed", "records", len(applied), "err", err)
	}
}

// errRebalanceWaiting is the cause of a poll's apply stopped for a
// rebalance.
var errRebalanceWaiting = errors.New("a rebalance is waiting for this poll")

// rebalanceWaiting carries the client's signal that a rebalance waits for
// the poll in hand. Make it with make(rebalanceWaiting, 1).
type rebalanceWaiting chan struct{}

// signal is the client's OnPartitionsCallbackBlocked.
func (r rebalanceWaiting) signal(context.Context, *kgo.Client) {
	select {
	case r <- struct{}{}:
	default:
	}
}

// forget drops a signal not yet taken.
func (r rebalanceWaiting) forget() {
	select {
	case <-r:
	default:
	}
}

// cuts returns ctx cancelled with errRebalanceWaiting at the next signal;
// stop ends the watch, and returns once it has ended, so that it cannot
// take a signal meant for the next poll.
func (r rebalanceWaiting) cuts(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		select {
		case <-r:
			cancel(errRebalanceWaiting)
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		cancel(nil)
		<-ended
	}
}

// applyAll applies a poll's records: partitions at once, each partition's
// records in order (one order's events share a partition, and order
// matters to the version check). It returns the records applied and, when
// it stopped early, where each partition it did not finish resumes: its
// first record not applied.
func (c *consumer) applyAll(ctx context.Context, fetches kgo.Fetches) (applied []*kgo.Record, rest map[string]map[int32]kgo.EpochOffset, _ error) {
	g, ctx := errgroup.WithContext(ctx)
	var parts []kgo.FetchTopicPartition
	fetches.EachPartition(func(p kgo.FetchTopicPartition) { parts = append(parts, p) })
	done := make([]int, len(parts)) // records applied, by partition
	for i, p := range parts {
		g.Go(func() error {
			for _, r := range p.Records {
				if err := c.applyRetrying(ctx, r); err != nil {
					return err
				}
				done[i]++
			}
			return nil
		})
	}
	err := g.Wait()
	rest = map[string]map[int32]kgo.EpochOffset{}
	for i, p := range parts {
		applied = append(applied, p.Records[:done[i]]...)
		if done[i] < len(p.Records) {
			next := p.Records[done[i]]
			if rest[p.Topic] == nil {
				rest[p.Topic] = map[int32]kgo.EpochOffset{}
			}
			rest[p.Topic][p.Partition] = kgo.EpochOffset{Epoch: next.LeaderEpoch, Offset: next.Offset}
		}
	}
	return applied, rest, err
}

// applyRetrying applies r until it succeeds or ctx ends. A record is never
// skipped for a store failure: skipping would commit past an event whose
// effect may be missing. Every attempt runs in the record's "process"
// span, which continues the trace of the request that published it (the
// traceparent header), so its log lines carry that trace.
func (c *consumer) applyRetrying(ctx context.Context, r *kgo.Record) error {
	_, span := c.tracer.WithProcessSpan(r)
	defer span.End()
	ctx = trace.ContextWithSpan(ctx, span)
	return retry(ctx, c.backoff, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, c.tryTimeout)
		defer cancel()
		_, err := c.apply(ctx, r)
		if err != nil && ctx.Err() == nil {
			c.log.WarnContext(ctx, "applying a record failed; retrying it", "topic", r.Topic, "partition", r.Partition,
				"offset", r.Offset, "outcome_unknown", errors.Is(err, store.ErrOutcomeUnknown), "err", err)
		}
		return err
	})
}

// leave leaves the group, so that its partitions move to another member
// now rather than after the session timeout. Bounded: a broker that does
// not answer must not hold up the exit.
func (c *consumer) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.client.LeaveGroupContext(ctx); err != nil {
		c.log.Warn("leaving the consumer group", "err", err)
		return
	}
	c.log.Info("left the consumer group")
}

// backoff is the wait between attempts: first, doubling up to max.
type backoff struct{ first, max time.Duration }

// retry calls f until it returns nil or ctx ends, waiting between calls.
func retry(ctx context.Context, b backoff, f func(context.Context) error) error {
	wait := b.first
	for {
		err := f(ctx)
		if err == nil {
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (last attempt: %w)", ctx.Err(), err)
		case <-t.C:
		}
		wait = min(2*wait, b.max)
	}
}

// afterGrace returns a context that ends grace after parent ends (or when
// cancel is called): the poll in hand may finish after a stop signal, but
// not for ever.
func afterGrace(parent context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	stop := context.AfterFunc(parent, func() {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-ctx.Done():
		}
	})
	return ctx, func() {
		stop()
		cancel()
	}
}
