package groupcommit

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// item is a write of key k; its weight is w.
type item struct {
	k, id, w int
}

func keyOf(it item) int    { return it.k }
func weightOf(it item) int { return it.w }

// recordingWrites records the batches a Committer writes.
type recordingWrites struct {
	mu      sync.Mutex
	batches [][]item
	err     error
}

func (w *recordingWrites) write(ctx context.Context, items []item) error {
	if err := ctx.Err(); err != nil {
		return err // as the driver does
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.batches = append(w.batches, slices.Clone(items))
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

// gatedWrites holds every write until the test lets it end.
type gatedWrites struct {
	recordingWrites
	started chan int      // the size of each batch whose write started
	release chan struct{} // one value lets one write end
}

func newGatedWrites() *gatedWrites {
	return &gatedWrites{started: make(chan int, 8), release: make(chan struct{})}
}

func (w *gatedWrites) write(ctx context.Context, items []item) error {
	w.started <- len(items)
	<-w.release
	return w.recordingWrites.write(ctx, items)
}

func items(k, n int) []item {
	out := make([]item, n)
	for i := range out {
		out[i] = item{k: k, id: i}
	}
	return out
}

// addAll adds items at once and returns each caller's error.
func addAll(c *Committer[int, item], items []item) []error {
	errs := make([]error, len(items))
	var wg sync.WaitGroup
	for i, it := range items {
		wg.Go(func() { errs[i] = c.Add(context.Background(), it) })
	}
	wg.Wait()
	return errs
}

// waitOpen waits until the open batch of k holds n items: the test cannot
// see callers join, only what they joined.
func waitOpen(t *testing.T, c *Committer[int, item], k, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for c.Open(k) != n {
		if time.Now().After(deadline) {
			t.Fatalf("open batch of key %d holds %d items, want %d", k, c.Open(k), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func noWriteStarted(t *testing.T, w *gatedWrites) {
	t.Helper()
	select {
	case n := <-w.started:
		t.Fatalf("a write of %d items started while every slot was in flight", n)
	case <-time.After(20 * time.Millisecond):
	}
}

func TestItemsOfOneKeyWithinTheWindowShareOneWrite(t *testing.T) {
	w := &recordingWrites{}
	c := New(Config{Window: 200 * time.Millisecond, Limit: 32}, keyOf, nil, w.write)
	batch := append(items(1, 5), items(2, 2)...)
	if err := errors.Join(addAll(c, batch)...); err != nil {
		t.Fatal(err)
	}
	if got := w.sizes(); !slices.Equal(got, []int{2, 5}) {
		t.Errorf("batch sizes %v, want one of 5 (key 1) and one of 2 (key 2)", got)
	}
	if n := c.Tracked(); n != 0 {
		t.Errorf("%d keys still tracked after every write ended", n)
	}
}

// Without a window the first write of a key goes at once; those that
// arrive while it is in flight wait for it and then share the next write.
func TestItemsArrivingWhileOneIsInFlightShareTheNextWrite(t *testing.T) {
	w := newGatedWrites()
	c := New(Config{Limit: 32}, keyOf, nil, w.write)
	first := make(chan error, 1)
	go func() { first <- c.Add(context.Background(), item{k: 5}) }()
	if n := <-w.started; n != 1 {
		t.Fatalf("first write holds %d items, want 1 (sent at once)", n)
	}
	rest := items(5, 5)
	others := make(chan []error, 1)
	go func() { others <- addAll(c, rest) }()
	waitOpen(t, c, 5, len(rest))
	noWriteStarted(t, w)
	w.release <- struct{}{}
	if err := <-first; err != nil {
		t.Fatalf("first write: %v", err)
	}
	if n := <-w.started; n != len(rest) {
		t.Errorf("second write holds %d items, want %d", n, len(rest))
	}
	w.release <- struct{}{}
	if err := errors.Join(<-others...); err != nil {
		t.Fatal(err)
	}
	if n := c.Tracked(); n != 0 {
		t.Errorf("%d keys still tracked after every write ended", n)
	}
}

// With InFlight 2, two writes of a key go at once, each alone; the third
// waits for one of them, with whatever arrived meanwhile.
func TestInFlightWritesOfAKeyAreBounded(t *testing.T) {
	w := newGatedWrites()
	c := New(Config{Limit: 32, InFlight: 2}, keyOf, nil, w.write)
	errs := make(chan error, 5)
	for i := range 2 {
		go func() { errs <- c.Add(context.Background(), item{k: 3, id: i}) }()
		if n := <-w.started; n != 1 {
			t.Fatalf("write %d holds %d items, want 1 (a slot was free)", i, n)
		}
	}
	for i := range 3 {
		go func() { errs <- c.Add(context.Background(), item{k: 3, id: 10 + i}) }()
	}
	waitOpen(t, c, 3, 3)
	noWriteStarted(t, w)
	w.release <- struct{}{}
	if n := <-w.started; n != 3 {
		t.Errorf("third write holds %d items, want the 3 that waited", n)
	}
	w.release <- struct{}{}
	w.release <- struct{}{}
	for range 5 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// A full batch does not wait for the key's write in flight.
func TestAFullBatchDoesNotWaitForTheWriteInFlight(t *testing.T) {
	w := newGatedWrites()
	c := New(Config{Limit: 8}, keyOf, nil, w.write)
	first := make(chan error, 1)
	go func() { first <- c.Add(context.Background(), item{k: 6}) }()
	<-w.started
	others := make(chan []error, 1)
	go func() { others <- addAll(c, items(6, 8)) }()
	if n := <-w.started; n != 8 {
		t.Errorf("write started with %d items while the first was in flight, want a full batch of 8", n)
	}
	w.release <- struct{}{}
	w.release <- struct{}{}
	if err := errors.Join(append(<-others, <-first)...); err != nil {
		t.Fatal(err)
	}
}

func TestAFullBatchIsWrittenWithoutWaitingForTheWindow(t *testing.T) {
	w := &recordingWrites{}
	c := New(Config{Window: time.Hour, Limit: 8}, keyOf, nil, w.write)
	done := make(chan []error)
	go func() { done <- addAll(c, items(1, 16)) }()
	select {
	case errs := <-done:
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("full batches waited for the window")
	}
	if got := w.sizes(); !slices.Equal(got, []int{8, 8}) {
		t.Errorf("batch sizes %v, want two of 8", got)
	}
}

// Weight bounds a batch: an item that would take it past MaxWeight starts
// the next, and one heavier than MaxWeight goes alone.
func TestABatchStaysWithinItsWeight(t *testing.T) {
	w := &recordingWrites{}
	c := New(Config{Window: 200 * time.Millisecond, Limit: 32, MaxWeight: 10}, keyOf, weightOf, w.write)
	if err := c.Add(context.Background(), item{k: 1, w: 25}); err != nil {
		t.Fatal(err)
	}
	batch := []item{{k: 1, id: 1, w: 4}, {k: 1, id: 2, w: 4}, {k: 1, id: 3, w: 4}, {k: 1, id: 4, w: 4}, {k: 1, id: 5, w: 4}}
	if err := errors.Join(addAll(c, batch)...); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, b := range w.batches {
		sum := 0
		for _, it := range b {
			sum += it.w
		}
		if sum > 10 && len(b) > 1 {
			t.Errorf("batch %v weighs %d, over 10", b, sum)
		}
	}
	if len(w.batches) != 4 {
		t.Errorf("%d batches (%v), want 4: the heavy item alone, then 8, 8 and 4", len(w.batches), w.batches)
	}
}

func TestAFailedBatchFailsEveryItemInIt(t *testing.T) {
	refused := errors.New("unavailable")
	w := &recordingWrites{err: refused}
	c := New(Config{Window: 100 * time.Millisecond, Limit: 8}, keyOf, nil, w.write)
	for i, err := range addAll(c, items(2, 3)) {
		if !errors.Is(err, refused) {
			t.Errorf("item %d: %v, want the batch's error", i, err)
		}
	}
}

func TestACallerThatStopsWaitingReturnsItsContextError(t *testing.T) {
	w := &recordingWrites{}
	c := New(Config{Window: time.Hour, Limit: 8}, keyOf, nil, w.write)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := c.Add(ctx, item{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Add = %v, want the deadline", err)
	}
}

// A leader whose caller gives up still writes its batch: the others in it
// are answered by the write, not by the leader's context.
func TestALeaderThatGivesUpDoesNotFailTheOthersInItsBatch(t *testing.T) {
	w := &recordingWrites{}
	c := New(Config{Window: time.Hour, Limit: 8}, keyOf, nil, w.write)
	ctx, cancel := context.WithCancel(context.Background())
	leader := make(chan error, 1)
	go func() { leader <- c.Add(ctx, item{k: 4}) }()
	waitOpen(t, c, 4, 1)
	other := make(chan error, 1)
	go func() { other <- c.Add(context.Background(), item{k: 4, id: 1}) }()
	waitOpen(t, c, 4, 2)
	cancel()
	if err := <-leader; !errors.Is(err, context.Canceled) {
		t.Errorf("leader: %v, want its own cancellation", err)
	}
	if err := <-other; err != nil {
		t.Errorf("the other item of the batch: %v, want it written", err)
	}
	if got := w.sizes(); !slices.Equal(got, []int{2}) {
		t.Errorf("batch sizes %v, want one of 2", got)
	}
}
