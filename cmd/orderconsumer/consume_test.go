package main

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestRetryUntilSuccess(t *testing.T) {
	calls := 0
	err := retry(context.Background(), backoff{first: time.Millisecond, max: 2 * time.Millisecond}, func(context.Context) error {
		calls++
		if calls < 4 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || calls != 4 {
		t.Fatalf("retry = %v after %d calls, want nil after 4", err, calls)
	}
}

// A failing call is retried until the context ends, and the error names
// both the context's end and the last failure.
func TestRetryStopsWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	failure := errors.New("store down")
	err := retry(ctx, backoff{first: time.Millisecond, max: 10 * time.Millisecond}, func(context.Context) error { return failure })
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, failure) {
		t.Fatalf("retry = %v, want the deadline and the last failure", err)
	}
}

// The poll in hand outlives a stop signal by the grace period, no more.
func TestAfterGrace(t *testing.T) {
	parent, stop := context.WithCancel(context.Background())
	ctx, cancel := afterGrace(parent, 100*time.Millisecond)
	defer cancel()
	stop()
	stoppedAt := time.Now()
	select {
	case <-ctx.Done():
		t.Fatal("ended with its parent, before the grace period")
	case <-time.After(20 * time.Millisecond):
	}
	select {
	case <-ctx.Done():
		if waited := time.Since(stoppedAt); waited < 100*time.Millisecond {
			t.Fatalf("ended %s after its parent, want the 100ms grace", waited)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("still running 5s after its parent ended")
	}

	// cancel ends it at once, parent or not.
	ctx, cancel = afterGrace(context.Background(), time.Hour)
	cancel()
	if ctx.Err() == nil {
		t.Fatal("cancel did not end it")
	}
}
