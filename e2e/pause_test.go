package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atlasmart/orderd/internal/tools/invariant"
	"github.com/atlasmart/orderd/internal/tools/loadgen"
)

// TestLoadWithOneNodePaused freezes one of three Cassandra nodes (SIGSTOP;
// docker pause) in the middle of a load with duplicates (20%) and
// conflicting reuses (5%), keeps the load going for pausedFor, resumes the
// node and lets the load run on. Unlike a killed node, a paused one keeps
// its sockets open: requests it coordinates, and replica messages sent to
// it, hang instead of failing, and no connection error tells the driver.
// Every acknowledged intent is then present exactly once (`orderd verify
// --acks`): nothing lost, nothing duplicated.
//
// The load runs in back-to-back rounds of loadgen.Run (each bounded, each
// retrying its own unacknowledged intents with their ids) until the node has
// been back for a few seconds, so its length does not depend on this
// machine's speed.
func TestLoadWithOneNodePaused(t *testing.T) {
	if !cluster.CanControlNodes() {
		failInCIElseSkip(t, "this cluster offers no node control: "+cluster.Describe())
	}
	const (
		node        = 3
		pauseAfter  = 100 // calls of the first round
		pausedFor   = 18 * time.Second
		afterResume = 5 * time.Second
		budget      = 70 * time.Second // rounds start no later than this
	)
	p := startOrderd(t, fastReconciler...)
	// Registered after startOrderd's cleanup, so it runs first: the node is
	// resumed before orderd stops, on every exit path.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := cluster.ResumeNode(ctx, node); err != nil {
			t.Errorf("resume node %d: %v", node, err)
		}
	})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The fault schedule runs beside the load, never inside a call. Its
	// times and error are read only after done is closed.
	var (
		once                      sync.Once
		paused                    atomic.Bool
		callsWhilePaused          atomic.Int64
		pausedAt, resumedAt, upAt time.Time
		faultErr                  error
		done                      = make(chan struct{})
	)
	fault := func() {
		defer close(done)
		pausedAt = time.Now()
		if err := cluster.PauseNode(ctx, node); err != nil {
			faultErr = fmt.Errorf("pause node %d: %w", node, err)
			return
		}
		paused.Store(true)
		select {
		case <-ctx.Done():
			faultErr = ctx.Err()
			return
		case <-time.After(pausedFor):
		}
		paused.Store(false)
		resumedAt = time.Now()
		if err := cluster.ResumeNode(ctx, node); err != nil {
			faultErr = fmt.Errorf("resume node %d: %w", node, err)
			return
		}
		upAt = time.Now()
	}

	start := time.Now()
	var (
		acks   []invariant.Ack
		codes  = map[string]int{}
		rounds int
	)
	// The load is over once the fault schedule has ended (or failed) and the
	// node has been back for afterResume.
	over := func() bool {
		select {
		case <-done:
			return faultErr != nil || time.Since(resumedAt) >= afterResume
		default:
			return false
		}
	}
	for !over() {
		if time.Since(start) > budget {
			t.Fatalf("the load has run %s and node %d has not been back for %s yet (paused: %v): giving up",
				time.Since(start).Round(time.Second), node, afterResume, paused.Load())
		}
		rounds++
		first := rounds == 1
		rep := loadgen.Run(ctx, p.client, loadgen.Config{
			Intents: 200, Concurrency: 16, DuplicateShare: 0.2, ConflictShare: 0.05, RetryFor: 60 * time.Second,
			OnCall: func(calls int) {
				if paused.Load() {
					callsWhilePaused.Add(1)
				}
				if first && calls == pauseAfter {
					once.Do(func() { go fault() })
				}
			},
		})
		t.Logf("round %d (from %s):", rounds, time.Since(start).Round(time.Millisecond))
		checkLoad(t, rep)
		acks = append(acks, rep.Acks...)
		for c, n := range rep.Codes {
			codes[c] += n
		}
	}
	if faultErr != nil {
		t.Fatal(faultErr)
	}
	var summary []string
	for c, n := range codes {
		summary = append(summary, fmt.Sprintf("%s=%d", c, n))
	}
	sort.Strings(summary)
	t.Logf("node %d paused %s into the load for %s, Up/Normal again %s after it was resumed; %d rounds in %s, %d acknowledged intents, %d calls answered while it was paused; codes: %s",
		node, pausedAt.Sub(start).Round(time.Millisecond), pausedFor, upAt.Sub(resumedAt).Round(time.Millisecond),
		rounds, time.Since(start).Round(time.Millisecond), len(acks), callsWhilePaused.Load(), strings.Join(summary, " "))
	if callsWhilePaused.Load() == 0 {
		t.Errorf("no call was answered while node %d was paused: the load did not run through the fault", node)
	}
	verifyKeyspace(t, acks, 30*time.Second)
}
