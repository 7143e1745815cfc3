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

// recordingWrites records the batches a releaseBatcher writes.
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

// removeAll removes entries at once and returns each caller's error.
func removeAll(r *releaseBatcher, entries []DueEntry) []error {
	errs := make([]error, len(entries))
	var wg sync.WaitGroup
	for i, e := range entries {
		wg.Go(func() { errs[i] = r.remove(context.Background(), e) })
	}
	wg.Wait()
	return errs
}

var minute = time.Date(2026, 11, 30, 18, 0, 0, 0, time.UTC)

func TestReleasesOfOnePartitionShareOneWrite(t *testing.T) {
	w := &recordingWrites{}
	r := newReleaseBatcher(200*time.Millisecond, w.write)
	var entries []DueEntry
	for range 5 {
		entries = append(entries, entryIn(3, minute))
	}
	entries = append(entries, entryIn(4, minute), entryIn(3, minute.Add(time.Minute)))
	for i, err := range removeAll(r, entries) {
		if err != nil {
			t.Errorf("remove %d: %v", i, err)
		}
	}
	if got := w.sizes(); !slices.Equal(got, []int{1, 1, 5}) {
		t.Errorf("batch sizes %v, want [1 1 5]: one write per partition", got)
	}
}

func TestAFullBatchIsWrittenWithoutWaitingForTheWindow(t *testing.T) {
	w := &recordingWrites{}
	r := newReleaseBatcher(time.Hour, w.write)
	var entries []DueEntry
	for range 2 * maxReleaseBatch {
		entries = append(entries, entryIn(1, minute))
	}
	done := make(chan []error)
	go func() { done <- removeAll(r, entries) }()
	select {
	case errs := <-done:
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("full batches waited for the window")
	}
	if got := w.sizes(); !slices.Equal(got, []int{maxReleaseBatch, maxReleaseBatch}) {
		t.Errorf("batch sizes %v, want two of %d", got, maxReleaseBatch)
	}
}

func TestAFailedBatchFailsEveryReleaseInIt(t *testing.T) {
	refused := errors.New("unavailable")
	w := &recordingWrites{err: refused}
	r := newReleaseBatcher(100*time.Millisecond, w.write)
	entries := []DueEntry{entryIn(2, minute), entryIn(2, minute), entryIn(2, minute)}
	for i, err := range removeAll(r, entries) {
		if !errors.Is(err, refused) {
			t.Errorf("remove %d: %v, want the batch's error", i, err)
		}
	}
}

func TestACallerThatStopsWaitingReturnsItsContextError(t *testing.T) {
	w := &recordingWrites{}
	r := newReleaseBatcher(time.Hour, w.write)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := r.remove(ctx, entryIn(0, minute)); !errors.Is(err, context.DeadlineExceeded) {
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
