package main

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
)

// Every call ends by the request timeout: none or a later client deadline
// is cut to it (the reconciler's grace relies on that), an earlier one kept.
func TestDeadlineInterceptorCapsEveryCall(t *testing.T) {
	const d = time.Second
	icpt := deadlineInterceptor(d)
	for name, tc := range map[string]struct {
		client time.Duration // 0: no client deadline
		want   time.Duration
	}{
		"none":    {0, d},
		"later":   {time.Minute, d},
		"earlier": {100 * time.Millisecond, 100 * time.Millisecond},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			if tc.client > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.client)
				defer cancel()
			}
			start := time.Now()
			var left time.Duration
			_, err := icpt(ctx, nil, &grpc.UnaryServerInfo{}, func(ctx context.Context, _ any) (any, error) {
				dl, ok := ctx.Deadline()
				if !ok {
					t.Fatal("the handler's context has no deadline")
				}
				left = dl.Sub(start)
				return nil, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if diff := left - tc.want; diff > 200*time.Millisecond || diff < -200*time.Millisecond {
				t.Errorf("deadline %s after the call, want about %s", left, tc.want)
			}
		})
	}
}
