package outboxtest

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestMemoryMeetsThePublisherContract(t *testing.T) {
	Suite(t, func(t *testing.T) Subject {
		m := NewMemory()
		return Subject{
			Publisher: m,
			Published: func(ctx context.Context, n int) []*kgo.Record {
				deadline := time.Now().Add(time.Second)
				for len(m.Records()) < n && time.Now().Before(deadline) {
					time.Sleep(time.Millisecond)
				}
				return m.Records()
			},
			SetDown: func(_ *testing.T, down bool) { m.SetDown(down) },
		}
	})
}
