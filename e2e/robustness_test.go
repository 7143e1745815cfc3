package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/atlasmart/orderd/internal/adapters/outbox"
	rb "github.com/atlasmart/orderd/internal/tools/robustness"
	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

// The settings of a robustness run.
const (
	robustWorkers   = 8
	robustInstances = 3
	// robustDefaultTraffic keeps the whole test at 2-3 minutes;
	// ROBUSTNESS_DURATION (make robustness DURATION=30m) runs longer.
	robustDefaultTraffic = 2 * time.Minute
	// robustEventsWithin bounds the wait for every acknowledged write's
	// event after the traffic: the reconcilers deliver what a killed
	// instance or a stopped broker left undelivered.
	robustEventsWithin = 3 * time.Minute
	robustCheckTimeout = time.Minute // per order
	maxProblemsShown   = 20
)

// robustEnv is every instance's settings: reconcilers on and quick, so
// what a fault leaves unfinished is finished within the run. The grace
// exceeds request timeout + CQL timeout + 2 x max clock skew (4 + 4 + 1 s),
// as orderd requires.
var robustEnv = []string{
	"ORDERD_RECONCILER=true",
	"ORDERD_RECONCILE_GRACE=10s",
	"ORDERD_REQUEST_TIMEOUT=4s",
	"ORDERD_CQL_TIMEOUT=4s",
	"ORDERD_MAX_CLOCK_SKEW=500ms",
	"ORDERD_RECONCILE_INTERVAL=500ms",
	"ORDERD_RECONCILE_BACKOFF=300ms",
	"ORDERD_RECONCILE_BACKOFF_MAX=2s",
	"ORDERD_PUBLISH_TIMEOUT=2s",
}

// TestRobustness is the robustness suite, after etcd's tests/robustness:
// workers of two tenants that share request ids send randomised traffic
// (creates, duplicates, conflicting reuses, late retries, racing cancels
// and amendments, their retries, gets, listings) to three orderd
// instances, while a nemesis kills and restarts instances, pauses a
// Cassandra node, partitions one off (iptables), kills the broker (and,
// in long runs, a node). Every call's invoke and return time and answer
// form a history, checked for linearizability against the sequential
// model of internal/tools/robustness; then the run's events topic is read from
// its start and checked: every acknowledged order and change has its
// event, and an event id names one event. How many versions were first
// delivered after a later one is reported, not failed: publication order
// is not version order (docs/outbox.md, "Ordering per order").
//
// ROBUSTNESS_SEED replays a run's calls and faults (their interleaving is
// the machine's); ROBUSTNESS_DURATION sets how long the traffic runs. The
// seed and a one-line verdict are printed.
func TestRobustness(t *testing.T) {
	if !cluster.CanControlNodes() || !broker.CanControl() {
		failInCIElseSkip(t, "the robustness run needs node and broker control: "+cluster.Describe()+"; "+broker.Describe())
	}
	seed, traffic := robustSettings(t)
	fmt.Fprintf(os.Stderr, "e2e: robustness: seed %d (ROBUSTNESS_SEED), %s of traffic (ROBUSTNESS_DURATION)\n", seed, traffic)
	kinds := faultKinds(t, traffic)
	if slices.Contains(kinds, faultPartition) {
		if err := healIptables(); err != nil { // a rule a killed run left behind
			t.Fatal(err)
		}
	}
	topic := fmt.Sprintf("robustness.%d.events", time.Now().UnixNano()/1e6)
	procs := startRobustInstances(t, topic)
	tenants := []string{"robust-a", "robust-b"}
	clients := dialTenants(t, tenants, procs.addrs())

	nem := &nemesis{t: t, rng: rand.New(rand.NewPCG(uint64(seed), 0)), kinds: kinds, procs: procs, counts: map[string]int{}}
	// However the test ends, the fault in force is healed: registered
	// after the instances' cleanup, so it runs before it.
	t.Cleanup(func() {
		if err := nem.healNow(); err != nil {
			t.Errorf("heal the fault in force: %v", err)
		}
	})
	history, gen := rb.NewHistory(), newTraffic(tenants)
	runTraffic(seed, traffic, nem, gen, history, clients)
	if err := nem.healNow(); err != nil {
		t.Errorf("heal the last fault: %v", err)
	}
	t.Logf("faults:\n%s", nem.record())

	ops := history.Operations()
	acks := rb.Acknowledged(ops)
	ev := rb.CheckEvents(readEvents(t, topic, tenants, acks, robustEventsWithin), acks)
	lin := rb.Check(ops, robustCheckTimeout)
	if !reportRobustness(t, seed, traffic, gen, nem, ops, lin, ev) {
		// Outside the test's temporary folder, so that they outlive the run.
		dir := filepath.Join(os.TempDir(), fmt.Sprintf("robustness-%d-logs", seed))
		if err := procs.saveLogs(dir); err != nil {
			t.Errorf("save the instances' logs: %v", err)
		} else {
			t.Logf("every orderd instance's log: %s", dir)
		}
	}
}

// startRobustInstances starts the run's orderd instances, publishing to
// topic; they are stopped when the test ends.
func startRobustInstances(t *testing.T, topic string) *instances {
	procs := &instances{env: append(slices.Clone(robustEnv), "ORDERD_KAFKA_TOPIC="+topic)}
	t.Cleanup(func() {
		if err := procs.stopAll(); err != nil {
			t.Error(err)
		}
	})
	for range robustInstances {
		p, err := launchOrderd(procs.env...)
		if err != nil {
			t.Fatal(err)
		}
		procs.procs = append(procs.procs, p)
	}
	return procs
}

// dialTenants is, for each tenant, one client per address, acting for it
// with a JWT (create and read).
func dialTenants(t *testing.T, tenants, addrs []string) map[string][]ordersv1.OrderServiceClient {
	clients := map[string][]ordersv1.OrderServiceClient{}
	for _, tn := range tenants {
		creds := sec.files.Client(sec.jwtFor(t, tn, []string{"create", "read"}, time.Now().Add(24*time.Hour)))
		for _, addr := range addrs {
			clients[tn] = append(clients[tn], dialAs(t, addr, creds))
		}
	}
	return clients
}

// runTraffic runs the workers and the nemesis for the traffic's duration
// and waits for all of them.
func runTraffic(seed int64, traffic time.Duration, nem *nemesis, gen *traffic, history *rb.History,
	clients map[string][]ordersv1.OrderServiceClient) {
	ctx, stop := context.WithTimeout(context.Background(), traffic)
	defer stop()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		nem.run(ctx)
	}()
	for w := range robustWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(seed), uint64(w+1)))
			for ctx.Err() == nil {
				c := gen.next(rng)
				cl := clients[c.in.Tenant][rng.IntN(len(clients[c.in.Tenant]))]
				call := history.Invoke(w, c.in)
				out, unexpected := send(ctx, cl, c)
				call.Return(out)
				gen.learn(c, out, unexpected)
			}
		}()
	}
	wg.Wait()
}

// reportRobustness prints the one-line verdict and fails the test with
// what the checks found; it reports whether they passed.
func reportRobustness(t *testing.T, seed int64, traffic time.Duration, gen *traffic, nem *nemesis,
	ops []porcupine.Operation, lin rb.Verdict, ev rb.EventVerdict) bool {
	unexpected := gen.unexpected()
	verdict := "PASS"
	if !lin.OK() || !ev.OK() || len(unexpected) > 0 {
		verdict = "FAIL"
	}
	line := fmt.Sprintf("robustness: %s seed=%d traffic=%s calls=%s faults=%s unexpected=%v | history: %v | events: %v",
		verdict, seed, traffic, gen.summary(), nem.summary(), unexpected, lin, ev)
	fmt.Fprintf(os.Stderr, "e2e: %s\n", line)
	t.Log(line)
	if len(lin.Illegal) > 0 {
		// Outside the test's temporary folder, so that it outlives the run.
		path := filepath.Join(os.TempDir(), fmt.Sprintf("robustness-%d.html", seed))
		if err := rb.Visualize(ops, lin.Illegal, path); err != nil {
			t.Errorf("visualize the history: %v", err)
		} else {
			t.Logf("porcupine's view of the orders not linearizable: %s", path)
		}
	}
	reportSome(t, "not linearizable: ", append(lin.Illegal, lin.TimedOut...))
	reportSome(t, "events: ", ev.Problems)
	if len(unexpected) > 0 {
		t.Errorf("answers no call of this traffic may get: %v", unexpected)
	}
	return verdict == "PASS"
}

// reportSome fails the test with the first maxProblemsShown problems.
func reportSome(t *testing.T, prefix string, problems []string) {
	for i, p := range problems {
		if i == maxProblemsShown {
			t.Errorf("%s... and %d more", prefix, len(problems)-i)
			return
		}
		t.Errorf("%s%s", prefix, p)
	}
}

// robustSettings reads ROBUSTNESS_SEED (default: the clock) and
// ROBUSTNESS_DURATION (default robustDefaultTraffic).
func robustSettings(t *testing.T) (int64, time.Duration) {
	seed := time.Now().UnixNano()
	if s := os.Getenv("ROBUSTNESS_SEED"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("ROBUSTNESS_SEED=%q: %v", s, err)
		}
		seed = v
	}
	traffic := robustDefaultTraffic
	if s := os.Getenv("ROBUSTNESS_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			t.Fatalf("ROBUSTNESS_DURATION=%q: want a positive duration like 30m (%v)", s, err)
		}
		traffic = d
	}
	return seed, traffic
}

// readEvents reads topic from its start until every acknowledged write has
// an event or within elapses, then a little longer for late copies, and
// returns the records of tenants' orders.
func readEvents(t *testing.T, topic string, tenants []string, acks []rb.Ack, within time.Duration) []rb.Event {
	t.Helper()
	c := newKafkaClient(t, broker.Addr(), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	want := map[rb.Ack]bool{}
	for _, a := range acks {
		want[a] = true
	}
	var events []rb.Event
	deadline := time.Now().Add(within)
	var settleUntil time.Time
	for {
		now := time.Now()
		if len(want) == 0 && settleUntil.IsZero() {
			settleUntil = now.Add(3 * time.Second)
		}
		if !settleUntil.IsZero() && now.After(settleUntil) || now.After(deadline) {
			return events
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fetches := c.PollFetches(ctx)
		cancel()
		fetches.EachRecord(func(r *kgo.Record) {
			e, err := outbox.Decode(r)
			if err != nil {
				t.Errorf("record %d@%d: %v", r.Partition, r.Offset, err)
				return
			}
			if !slices.Contains(tenants, e.GetTenant()) {
				return // another test's order, finished by this run's reconcilers
			}
			ev := rb.Event{ID: outbox.Header(r, outbox.HeaderEventID), Type: outbox.Header(r, outbox.HeaderEventType),
				Tenant: e.GetTenant(), OrderID: e.GetOrder().GetOrderId(), Version: e.GetOrderVersion(), Partition: r.Partition, Offset: r.Offset}
			events = append(events, ev)
			delete(want, rb.Ack{Tenant: ev.Tenant, OrderID: ev.OrderID, Version: ev.Version})
		})
	}
}
