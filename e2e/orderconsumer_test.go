package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/atlasmart/orderd/internal/adapters/orderpb"
	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/tools/freeport"
	"github.com/atlasmart/orderd/internal/tools/localcluster"
	"github.com/atlasmart/orderd/internal/tools/orderconsumer/store"
	"github.com/atlasmart/orderd/internal/tools/orderconsumer/store/storetest"
	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

// The consumer's store contract against the real tables on the three-node
// cluster: the same suite storetest.Memory passes
// (internal/tools/orderconsumer/store/storetest/memory_test.go).
func TestOrderConsumerStoreContract(t *testing.T) {
	isolated(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ks := fmt.Sprintf("e2e_consumer_contract_%d", time.Now().UnixNano())
	admin, err := cassandra.NewSession(cassandra.Config{Hosts: cluster.ContactPoints(), Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	t.Cleanup(func() { dropKeyspace(context.Background(), ks) })
	if err := store.CreateSchema(ctx, admin, ks, "dc1", 3); err != nil {
		t.Fatal(err)
	}
	s, err := cassandra.NewSession(cassandra.Config{Hosts: cluster.ContactPoints(), Keyspace: ks})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	storetest.Run(t, func(*testing.T) storetest.Store { return store.NewCassandra(s) })
}

// The reference consumer applies each event once in effect, on the real
// broker and cluster: a duplicate, an older version after a newer one and a
// poison record are counted as such and leave the newest version; after a
// SIGKILL in the middle of a batch and a restart, every event is in the
// inbox once and every order is written, nothing lost.
func TestOrderConsumerAppliesEachEventOnceAcrossAKill(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	addr := broker.Addr()
	suffix := time.Now().UnixNano()
	topic := fmt.Sprintf("orderconsumer.e2e.%d", suffix)
	group := fmt.Sprintf("orderconsumer-e2e-%d", suffix)
	ks := fmt.Sprintf("e2e_consumer_%d", suffix)
	admin := kadm.NewClient(newKafkaClient(t, addr))
	if _, err := admin.CreateTopic(ctx, 3, 1, nil, topic); err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	t.Cleanup(func() {
		_, _ = admin.DeleteGroups(context.Background(), group)
		_, _ = admin.DeleteTopics(context.Background(), topic)
		dropKeyspace(context.Background(), ks)
	})
	bin := buildConsumer(t)
	producer := newKafkaClient(t, addr, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic))
	args := []string{"-brokers", addr, "-topic", topic, "-group", group, "-keyspace", ks, "-local-dc", "dc1", "-session-timeout", "6s",
		"-cassandra", strings.Join(cluster.ContactPoints(), ","), "-replication-factor", "3", "-log-format", "text"}

	// Phase 1: a duplicate, an older version after a newer, a poison record.
	w := newConsumerWorld()
	var records []*kgo.Record
	for range 20 {
		records = append(records, w.created(t, 1))
	}
	records = append(records, records[0]) // the same event twice
	newer := w.created(t, 2)
	older := w.versionOf(t, newer, 1)
	records = append(records, newer, older,
		&kgo.Record{Key: []byte(uuid.NewString()), Value: []byte("not an OrderEvent")})
	if err := producer.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}

	p := startConsumer(t, bin, args...)
	s := consumerSession(t, p, ks)
	w.waitInbox(t, s, 2*time.Minute)
	wantConsumerCounts(t, p, map[string]float64{"applied": 21, "duplicate": 1, "stale": 1, "undecodable": 1})
	w.checkOrders(t, s)

	// Phase 2: SIGKILL while a larger batch is being applied, then restart.
	before := len(w.events)
	records = records[:0]
	for range 500 {
		records = append(records, w.created(t, 1))
	}
	if err := producer.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	atKill := killConsumerMidway(t, p, s, before+20, len(w.events))
	t.Logf("killed the consumer with %d of %d events in the inbox", atKill, len(w.events))

	p2 := startConsumer(t, bin, args...)
	w.waitInbox(t, s, 3*time.Minute)
	w.checkOrders(t, s)
	t.Logf("after the restart: applied %v, duplicate %v (records applied before the kill but not committed)",
		p2.metric(t, `orderconsumer_events_total{result="applied"}`), p2.metric(t, `orderconsumer_events_total{result="duplicate"}`))
	t.Logf("the restarted consumer completed %d effects interrupted between the inbox and the order write",
		strings.Count(p2.output.String(), "completed the effect of an event recorded by an earlier attempt"))
	if code := p2.stop(t); code != 0 {
		t.Fatalf("consumer exited %d after SIGTERM, want 0:\n%s", code, p2.output)
	}
	if !strings.Contains(p2.output.String(), "left the consumer group") {
		t.Errorf("no graceful leave in the consumer's log:\n%s", p2.output)
	}
}

func buildConsumer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "orderconsumer")
	build := exec.Command("go", "build", "-o", bin, "./cmd/orderconsumer")
	build.Dir = repoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build orderconsumer: %v\n%s", err, out)
	}
	return bin
}

// consumerWorld is the events the test produced, and what they should leave.
type consumerWorld struct {
	events map[uuid.UUID]bool                 // every distinct event id
	orders map[uuid.UUID]*ordersv1.OrderEvent // the newest event of each order
}

func newConsumerWorld() *consumerWorld {
	return &consumerWorld{events: map[uuid.UUID]bool{}, orders: map[uuid.UUID]*ordersv1.OrderEvent{}}
}

// created is the ORDER_CREATED record of a new order, as orderd publishes
// it (internal/adapters/orderpb), at version v.
func (w *consumerWorld) created(t *testing.T, v int64) *kgo.Record {
	o := order.New("acme", uuid.New(), order.Command{CustomerID: "cust-" + uuid.NewString()[:8], Total: "12.30", Currency: "EUR"}, time.Now())
	ev := orderpb.Created(o)
	ev.OrderVersion = v
	return w.record(t, ev)
}

// versionOf is another event (its own id) of ev's order at version v.
func (w *consumerWorld) versionOf(t *testing.T, ev *kgo.Record, v int64) *kgo.Record {
	var pb ordersv1.OrderEvent
	if err := proto.Unmarshal(ev.Value, &pb); err != nil {
		t.Fatal(err)
	}
	pb.EventId, pb.OrderVersion = uuid.NewString(), v
	return w.record(t, &pb)
}

func (w *consumerWorld) record(t *testing.T, ev *ordersv1.OrderEvent) *kgo.Record {
	t.Helper()
	value, err := proto.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	w.events[uuid.MustParse(ev.GetEventId())] = true
	id := uuid.MustParse(ev.GetOrder().GetOrderId())
	if cur := w.orders[id]; cur == nil || cur.GetOrderVersion() < ev.GetOrderVersion() {
		w.orders[id] = ev
	}
	return &kgo.Record{Key: []byte(id.String()), Value: value, Headers: []kgo.RecordHeader{
		{Key: "event-id", Value: []byte(ev.GetEventId())},
		{Key: "event-type", Value: []byte("ORDER_CREATED")},
		{Key: "content-type", Value: []byte("application/x-protobuf; messageType=atlasmart.orders.v1.OrderEvent")},
	}}
}

// consumerInbox reads every event id in the inbox.
func consumerInbox(s *gocql.Session) (map[uuid.UUID]int, error) {
	rows := map[uuid.UUID]int{}
	iter := s.Query(`SELECT event_id FROM inbox`).Iter()
	var id gocql.UUID
	for iter.Scan(&id) {
		rows[uuid.UUID(id)]++
	}
	return rows, iter.Close()
}

// waitInbox waits until the inbox holds every event, and checks it holds
// nothing else.
func (w *consumerWorld) waitInbox(t *testing.T, s *gocql.Session, within time.Duration) {
	t.Helper()
	var rows map[uuid.UUID]int
	took, err := eventually(within, func() error {
		var err error
		if rows, err = consumerInbox(s); err != nil {
			return err
		}
		if len(rows) < len(w.events) {
			return fmt.Errorf("%d of %d events in the inbox", len(rows), len(w.events))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for id, n := range rows {
		if !w.events[id] || n != 1 {
			t.Errorf("inbox: event %s: %d rows, produced: %v", id, n, w.events[id])
		}
	}
	t.Logf("all %d events in the inbox after %s", len(w.events), took.Round(time.Millisecond))
}

// checkOrders checks every order holds its newest version, written by that
// version's event.
func (w *consumerWorld) checkOrders(t *testing.T, s *gocql.Session) {
	t.Helper()
	got := map[uuid.UUID][2]string{}
	iter := s.Query(`SELECT order_id, version, last_event_id, total FROM orders`).Iter()
	var id, last gocql.UUID
	var version int64
	var total string
	for iter.Scan(&id, &version, &last, &total) {
		got[uuid.UUID(id)] = [2]string{fmt.Sprint(version), last.String()}
	}
	if err := iter.Close(); err != nil {
		t.Fatal(err)
	}
	for id, ev := range w.orders {
		if want := [2]string{fmt.Sprint(ev.GetOrderVersion()), ev.GetEventId()}; got[id] != want {
			t.Errorf("order %s: version and event %v, want %v", id, got[id], want)
		}
	}
	if len(got) != len(w.orders) {
		t.Errorf("%d orders, want %d", len(got), len(w.orders))
	}
}

// killConsumerMidway SIGKILLs the consumer once the inbox holds at least from
// events (or, if it got there first, all of them) and returns how many it held.
func killConsumerMidway(t *testing.T, p *consumerProcess, s *gocql.Session, from, all int) int {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		rows, err := consumerInbox(s)
		if err == nil && len(rows) >= from {
			p.kill(t)
			if len(rows) >= all {
				t.Logf("the consumer applied every event before the kill; the restart only re-reads")
			}
			return len(rows)
		}
		if time.Now().After(deadline) {
			t.Fatalf("inbox at %d of %d events after 2 minutes (last error %v):\n%s", len(rows), from, err, p.output)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// wantConsumerCounts waits until the consumer's events_total counters are want.
func wantConsumerCounts(t *testing.T, p *consumerProcess, want map[string]float64) {
	t.Helper()
	_, err := eventually(time.Minute, func() error {
		for result, n := range want {
			if got := p.metric(t, fmt.Sprintf(`orderconsumer_events_total{result=%q}`, result)); got != n {
				return fmt.Errorf("events_total{result=%q} = %v, want %v", result, got, n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// consumerProcess is one running orderconsumer binary.
type consumerProcess struct {
	keyspace    string // its tables' keyspace, when started by runConsumer
	cmd         *exec.Cmd
	metricsAddr string
	output      *syncBuffer
	exited      chan struct{}
}

// startConsumer starts the binary with args and a metrics listener; the
// test's end stops it (SIGKILL if SIGTERM does not within 30 s).
func startConsumer(t *testing.T, bin string, args ...string) *consumerProcess {
	t.Helper()
	metricsAddr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	p := &consumerProcess{metricsAddr: metricsAddr, output: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, append(args, "-metrics-addr", metricsAddr)...)
	p.cmd.Env = append(os.Environ(), kafkaEnv("ORDERCONSUMER_", localcluster.ConsumerUser)...)
	p.cmd.Stdout, p.cmd.Stderr = p.output, p.output
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start orderconsumer: %v", err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			t.Logf("orderconsumer (pid %d) output:\n%s", p.cmd.Process.Pid, p.output)
		}
	})
	return p
}

// consumerSession waits until p has created its keyspace and started
// consuming, and opens a session on that keyspace.
func consumerSession(t *testing.T, p *consumerProcess, ks string) *gocql.Session {
	t.Helper()
	if _, err := eventually(2*time.Minute, func() error {
		select {
		case <-p.exited:
			t.Fatalf("orderconsumer exited during start:\n%s", p.output)
		default:
		}
		if !strings.Contains(p.output.String(), "msg=consuming") {
			return fmt.Errorf("orderconsumer has not started consuming:\n%s", p.output)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s, err := cassandra.NewSession(cassandra.Config{Hosts: cluster.ContactPoints(), Keyspace: ks})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func (p *consumerProcess) kill(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// stop sends SIGTERM and returns the exit code.
func (p *consumerProcess) stop(t *testing.T) int {
	t.Helper()
	select {
	case <-p.exited:
		return p.cmd.ProcessState.ExitCode()
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Errorf("orderconsumer still running 30s after SIGTERM; killing it")
		p.kill(t)
	}
	return p.cmd.ProcessState.ExitCode()
}

// metric is one sample of the consumer's /metrics.
func (p *consumerProcess) metric(t *testing.T, series string) float64 {
	t.Helper()
	v, ok := scrapeAt(t, p.metricsAddr, series)
	if !ok {
		t.Fatalf("no series %s in orderconsumer /metrics", series)
	}
	return v
}
