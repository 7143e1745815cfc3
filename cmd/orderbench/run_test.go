package main

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/atlasmart/orderd/internal/domain/fault"
)

// Ops that fail with errors of different concrete types must be counted, and
// the first error kept, without a panic. (Keeping the first error with
// atomic.Value.CompareAndSwap panicked here: "compare and swap of
// inconsistently typed value".)
func TestRunOpsKeepsFirstErrorOfMixedTypes(t *testing.T) {
	errs := []error{
		errors.New("plain"),
		status.Error(codes.Unavailable, "down"),
		fault.New(fault.ReasonClusterUnavailable, errors.New("down")),
		fmt.Errorf("wrapped: %w", errors.New("cause")),
	}
	const n = 400
	lat, failed, first := runOps(context.Background(), 16, n, func(_ context.Context, i int) error {
		if i%5 == 4 {
			return nil
		}
		return errs[i%len(errs)]
	})
	if len(lat) != n {
		t.Errorf("%d latencies, want %d", len(lat), n)
	}
	if want := n - n/5; failed != want {
		t.Errorf("failed = %d, want %d", failed, want)
	}
	found := false
	for _, e := range errs {
		if first == e {
			found = true
		}
	}
	if !found {
		t.Errorf("first error %v is none of the errors returned", first)
	}
}

func TestRunOpsNoErrors(t *testing.T) {
	lat, failed, first := runOps(context.Background(), 4, 10, func(context.Context, int) error { return nil })
	if len(lat) != 10 || failed != 0 || first != nil {
		t.Errorf("runOps = %d latencies, %d failed, first %v; want 10, 0, nil", len(lat), failed, first)
	}
}
