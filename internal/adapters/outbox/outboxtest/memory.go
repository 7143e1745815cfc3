// Package outboxtest holds an in-memory Publisher for unit tests and the
// contract every Publisher must meet (Suite), which the e2e tests run
// against the Kafka publisher and a real broker, so that the fake cannot
// behave unlike the real thing.
package outboxtest

import (
	"context"
	"errors"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/atlasmart/orderd/internal/adapters/outbox"
	"github.com/atlasmart/orderd/internal/domain/order"
)

// ErrBrokerDown is what Memory's Publish returns while it is down.
var ErrBrokerDown = errors.New("outboxtest: broker down")

// Memory is a Publisher that keeps every acknowledged record in memory.
// While down, Publish waits for its context to end (a broker that does
// not answer), then fails, and keeps nothing.
type Memory struct {
	mu      sync.Mutex
	records []*kgo.Record
	down    bool
	// before, if set, runs at the start of every Publish (outside the lock).
	before func(order.Event)
}

// NewMemory returns an empty publisher that is up.
func NewMemory() *Memory { return &Memory{} }

// Publish implements workflow.Publisher.
func (m *Memory) Publish(ctx context.Context, ev order.Event) error {
	m.mu.Lock()
	before, down := m.before, m.down
	m.mu.Unlock()
	if before != nil {
		before(ev)
	}
	rec, err := outbox.Record(ev)
	if err != nil {
		return err
	}
	if down {
		<-ctx.Done()
		return errors.Join(ErrBrokerDown, ctx.Err())
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.records = append(m.records, rec)
	return nil
}

// SetDown makes Publish fail (true) or succeed (false).
func (m *Memory) SetDown(down bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.down = down
}

// OnPublish runs f at the start of every Publish.
func (m *Memory) OnPublish(f func(order.Event)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.before = f
}

// Records returns every acknowledged record, in publication order.
func (m *Memory) Records() []*kgo.Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*kgo.Record(nil), m.records...)
}
