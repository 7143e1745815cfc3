package ledger

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
)

// recordingWrites records the batches a groupCommit writes.
type recordingWrites struct {
	mu      sync.Mutex
	batches [][]DueEntry
	err     error
}

func (w *recordingWrites) write(ctx context.Context, entries []DueEntry) error {
	if err := ctx.Err(); err != nil {
		return err // as the driver does
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.batches = append(w.batches, slices.Clone(entries))
	return w.err
}

func (w *recordingWrites) sizes() []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []int
	for _, b := range w.batches {
		out = append(out, len(b))
	}
	slices.Sort(out)
	return out
}

func entryIn(shard int, bucket time.Time) DueEntry {
	return DueEntry{Key: Key{Tenant: "t", Operation: "CreateOrder", RequestID: uuid.New()}, Shard: shard, Due: bucket,
		ClaimToken: uuid.New(), NotBefore: bucket.Add(time.Second)}
}

// addAll writes entries at once and returns each caller's error.
func addAll(g *groupCommit, entries []DueEntry) []error {
	errs := make([]error, len(entries))
	var wg sync.WaitGroup
	for i, e := range entries {
		wg.Go(func() { errs[i] = g.add(context.Background(), e) })
	}
	wg.Wait()
	return errs
}

var minute = time.Date(2026, 11, 30, 18, 0, 0, 0, time.UTC)

func TestWritesOfOnePartitionWithinTheWindowShareOneWrite(t *testing.T) {
	w := &recordingWrites{}
	r := newGroupCommit(200*time.Millisecond, maxBatch, w.write)
	var entries []DueEntry
	for range 5 {
		entries = append(entries, entryIn(3, minute))
	}
	entries = append(entries, entryIn(4, minute), entryIn(3, minute.Add(time.Minute)))
	for i, err := range addAll(r, entries) {
		if err != nil {
			t.Errorf("remove %d: %v", i, err)
		}
	}
	if got := w.sizes(); !slices.Equal(got, []int{1, 1, 5}) {
		t.Errorf("batch sizes %v, want [1 1 5]: one write per partition", got)
	}
	if n := len(r.parts); n != 0 {
		t.Errorf("%d partitions still tracked after every write ended", n)
	}
}

// gatedWrites records batches like recordingWrites, but holds each write
// until the test lets it end, and tells the test when one starts.
type gatedWrites struct {
	recordingWrites
	started chan int      // the size of each batch whose write started
	release chan struct{} // one value lets one write end
}

func newGatedWrites() *gatedWrites {
	return &gatedWrites{started: make(chan int, 8), release: make(chan struct{})}
}

func (w *gatedWrites) write(ctx context.Context, entries []DueEntry) error {
	w.started <- len(entries)
	<-w.release
	return w.recordingWrites.write(ctx, entries)
}

// Without a window the first write of a partition goes at once; those that
// arrive while it is in flight wait for it and then share the next write.
func TestWritesArrivingWhileOneIsInFlightShareTheNextWrite(t *testing.T) {
	w := newGatedWrites()
	g := newGroupCommit(0, maxBatch, w.write)
	first := make(chan error, 1)
	go func() { first <- g.add(context.Background(), entryIn(5, minute)) }()
	if n := <-w.started; n != 1 {
		t.Fatalf("first write holds %d entries, want 1 (sent at once)", n)
	}
	var rest []DueEntry
	for range 5 {
		rest = append(rest, entryIn(5, minute))
	}
	others := make(chan []error, 1)
	go func() { others <- addAll(g, rest) }()
	// The five join the open batch while the first is in flight; the test
	// cannot see them join, so it waits until the batch holds them all.
	for {
		g.mu.Lock()
		open := g.parts[partitionOf{shard: 5, bucket: minute.UnixMilli()}].open
		n := 0
		if open != nil {
			n = len(open.entries)
		}
		g.mu.Unlock()
		if n == len(rest) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case n := <-w.started:
		t.Fatalf("a write of %d entries started while the partition's first was in flight", n)
	default:
	}
	w.release <- struct{}{}
	if err := <-first; err != nil {
		t.Fatalf("first write: %v", err)
	}
	if n := <-w.started; n != len(rest) {
		t.Errorf("second write holds %d entries, want %d", n, len(rest))
	}
	w.release <- struct{}{}
	if err := errors.Join(<-others...); err != nil {
		t.Fatal(err)
	}
	if n := len(g.parts); n != 0 {
		t.Errorf("%d partitions still tracked after every write ended", n)
	}
}

// A full batch does not wait for the partition's write in flight.
func TestAFullBatchDoesNotWaitForTheWriteInFlight(t *testing.T) {
	w := newGatedWrites()
	g := newGroupCommit(0, maxBatch, w.write)
	first := make(chan error, 1)
	go func() { first <- g.add(context.Background(), entryIn(6, minute)) }()
	<-w.started
	var full []DueEntry
	for range maxBatch {
		full = append(full, entryIn(6, minute))
	}
	others := make(chan []error, 1)
	go func() { others <- addAll(g, full) }()
	if n := <-w.started; n != maxBatch {
		t.Errorf("write started with %d entries while the first was in flight, want a full batch of %d", n, maxBatch)
	}
	w.release <- struct{}{}
	w.release <- struct{}{}
	if err := errors.Join(append(<-others, <-first)...); err != nil {
		t.Fatal(err)
	}
}

func TestAFullBatchIsWrittenWithoutWaitingForTheWindow(t *testing.T) {
	w := &recordingWrites{}
	r := newGroupCommit(time.Hour, maxBatch, w.write)
	var entries []DueEntry
	for range 2 * maxBatch {
		entries = append(entries, entryIn(1, minute))
	}
	done := make(chan []error)
	go func() { done <- addAll(r, entries) }()
	select {
	case errs := <-done:
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("full batches waited for the window")
	}
	if got := w.sizes(); !slices.Equal(got, []int{maxBatch, maxBatch}) {
		t.Errorf("batch sizes %v, want two of %d", got, maxBatch)
	}
}

func TestAFailedBatchFailsEveryWriteInIt(t *testing.T) {
	refused := errors.New("unavailable")
	w := &recordingWrites{err: refused}
	r := newGroupCommit(100*time.Millisecond, maxBatch, w.write)
	entries := []DueEntry{entryIn(2, minute), entryIn(2, minute), entryIn(2, minute)}
	for i, err := range addAll(r, entries) {
		if !errors.Is(err, refused) {
			t.Errorf("remove %d: %v, want the batch's error", i, err)
		}
	}
}

func TestACallerThatStopsWaitingReturnsItsContextError(t *testing.T) {
	w := &recordingWrites{}
	r := newGroupCommit(time.Hour, maxBatch, w.write)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := r.add(ctx, entryIn(0, minute)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("remove = %v, want the deadline", err)
	}
}

// A scan position round-trips, and a skip past a chunk is refused.
func TestScanPosition(t *testing.T) {
	for _, p := range []scanPosition{{}, {chunk: []byte("state"), skip: 7}, {chunk: []byte{0, 1, 2}, skip: scanChunk - 1}} {
		got, err := decodeScanPosition(p.encode())
		if err != nil || got.skip != p.skip || string(got.chunk) != string(p.chunk) {
			t.Errorf("%+v: decoded %+v, %v", p, got, err)
		}
	}
	if _, err := decodeScanPosition(scanPosition{chunk: []byte("s"), skip: scanChunk}.encode()); err == nil {
		t.Error("a skip of a whole chunk accepted")
	}
}
