// Package groupcommit lets concurrent writes share one database request.
//
// On the clusters orderd runs on, the cluster's CPU per order bounds
// throughput, and a good part of it is spent per request (the native
// protocol, the statement, the response), not per row. Writes that meet
// while one of their kind is being written go together in the next request
// (an unlogged batch), so under load the cluster gets one request for many
// rows, while a write that meets none goes at once and waits for nothing.
//
// Items are grouped by key (a due-queue partition, a projection table):
// items of one key go in one batch, batches of one key are written at most
// Config.InFlight at a time, and a batch that may not go yet stays open
// and takes the items that arrive. A failed batch fails every item in it;
// every write put through a Committer must be safe to replay.
package groupcommit

import (
	"context"
	"sync"
	"time"
)

// Config shapes the batches of a Committer.
type Config struct {
	// Window is how long a batch stays open after its first item before it
	// is written (0: no window; a batch goes as soon as InFlight allows).
	Window time.Duration
	// Limit is the most items in one batch (1 or less: every item alone).
	Limit int
	// InFlight is the most batches of one key written at once (default 1).
	InFlight int
	// MaxWeight bounds the summed weight of a batch's items (0: no bound).
	// An item that would take a batch past it starts the next batch; an
	// item heavier than MaxWeight alone is written alone.
	MaxWeight int
}

// Committer groups concurrent writes of items of type T by key K.
type Committer[K comparable, T any] struct {
	cfg    Config
	key    func(T) K
	weight func(T) int
	write  func(ctx context.Context, items []T) error // one batch, all of one key

	mu   sync.Mutex
	keys map[K]*keyState[T]
}

// keyState is what a key has going: the batch still taking items, the
// batches being written, and every batch not yet done (the state goes with
// the last).
type keyState[T any] struct {
	open     *batch[T]
	inFlight int
	freed    chan struct{} // closed (and replaced) when a batch in flight ends
	batches  int
}

type batch[T any] struct {
	items  []T
	weight int
	sealed bool
	full   chan struct{} // closed when sealed: it takes no more items
	done   chan struct{} // closed once written (or failed)
	err    error
}

// New returns a Committer that writes each batch with write. key names the
// group an item belongs to; weight (nil: every item weighs 0) is what
// Config.MaxWeight bounds.
func New[K comparable, T any](cfg Config, key func(T) K, weight func(T) int, write func(ctx context.Context, items []T) error) *Committer[K, T] {
	cfg.Limit = max(cfg.Limit, 1)
	cfg.InFlight = max(cfg.InFlight, 1)
	if weight == nil {
		weight = func(T) int { return 0 }
	}
	return &Committer[K, T]{cfg: cfg, key: key, weight: weight, write: write, keys: map[K]*keyState[T]{}}
}

// Add writes item with whatever else of its key meets it, and returns once
// that batch is written: nil when it was, its error when it failed, and
// ctx's error when the caller stopped waiting first (the batch may still be
// written). The first caller of a batch starts its leader, a goroutine
// that waits for the window, a sealed batch or a free slot, writes the
// batch and ends. The write runs with the first caller's context values but
// not its cancellation, so a caller that gives up fails nobody else in its
// batch; the write function's own timeout (the driver's) bounds it.
func (c *Committer[K, T]) Add(ctx context.Context, item T) error {
	k := c.key(item)
	b, leads := c.join(k, item)
	if leads {
		runLeader(func() { c.lead(ctx, k, b) })
	}
	select {
	case <-b.done:
		return b.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Tracked is how many keys have batches not yet done (for tests: 0 once
// every write has ended).
func (c *Committer[K, T]) Tracked() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.keys)
}

// Open is how many items the open batch of k holds (for tests).
func (c *Committer[K, T]) Open(k K) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ks := c.keys[k]; ks != nil && ks.open != nil {
		return len(ks.open.items)
	}
	return 0
}

func (c *Committer[K, T]) join(k K, item T) (*batch[T], bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ks := c.keys[k]
	if ks == nil {
		ks = &keyState[T]{freed: make(chan struct{})}
		c.keys[k] = ks
	}
	w := c.weight(item)
	if b := ks.open; b != nil && c.cfg.MaxWeight > 0 && b.weight+w > c.cfg.MaxWeight {
		ks.seal()
	}
	b, leads := ks.open, ks.open == nil
	if leads {
		b = &batch[T]{full: make(chan struct{}), done: make(chan struct{})}
		ks.open = b
		ks.batches++
	}
	b.items = append(b.items, item)
	b.weight += w
	if len(b.items) >= c.cfg.Limit || (c.cfg.MaxWeight > 0 && b.weight >= c.cfg.MaxWeight) {
		ks.seal()
	}
	return b, leads
}

// seal closes the open batch to further items: later ones start the next.
func (ks *keyState[T]) seal() {
	b := ks.open
	ks.open = nil
	b.sealed = true
	close(b.full)
}

func (c *Committer[K, T]) lead(ctx context.Context, k K, b *batch[T]) {
	if c.cfg.Window > 0 {
		t := time.NewTimer(c.cfg.Window)
		select {
		case <-t.C:
		case <-b.full:
		case <-ctx.Done():
		}
		t.Stop()
	}
	items := c.await(ctx, k, b)
	b.err = c.write(context.WithoutCancel(ctx), items)
	c.mu.Lock()
	ks := c.keys[k]
	ks.inFlight--
	close(ks.freed)
	ks.freed = make(chan struct{})
	if ks.batches--; ks.batches == 0 {
		delete(c.keys, k)
	}
	c.mu.Unlock()
	close(b.done)
}

// await waits until b may be written — a free slot, or b sealed, or the
// leader's context done (it no longer waits, and the others must not wait
// for it) — closes it to further items and counts it in flight.
func (c *Committer[K, T]) await(ctx context.Context, k K, b *batch[T]) []T {
	for {
		c.mu.Lock()
		ks := c.keys[k]
		if ks.inFlight < c.cfg.InFlight || b.sealed || ctx.Err() != nil {
			if ks.open == b {
				ks.seal()
			}
			ks.inFlight++
			items := b.items
			c.mu.Unlock()
			return items
		}
		freed := ks.freed
		c.mu.Unlock()
		select {
		case <-freed:
		case <-b.full:
		case <-ctx.Done():
		}
	}
}
