package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/atlasmart/orderd/internal/tools/invariant"
	"github.com/atlasmart/orderd/internal/tools/loadgen"
	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

// verifyKeyspace runs `orderd verify` on this run's keyspace (with the acks,
// if any, and then that their events were delivered too) until it passes
// or within elapses, and fails the test otherwise. Every fault test ends
// with it. extra are more verify flags.
func verifyKeyspace(t *testing.T, acks []invariant.Ack, within time.Duration, extra ...string) {
	t.Helper()
	args := append([]string{"verify", "--keyspace", keyspace, "--reconcile-grace", "10s"}, extra...)
	if len(acks) > 0 {
		path := filepath.Join(t.TempDir(), "acks.jsonl")
		if err := invariant.WriteAcks(path, acks); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--acks", path, "--delivered")
	}
	var out string
	_, err := eventually(within, func() error {
		var err error
		out, err = runOrderd(context.Background(), args...)
		return err
	})
	if err != nil {
		t.Fatalf("orderd verify: %v\n%s", err, out)
	}
	t.Logf("orderd verify:\n%s", out)
}

func checkLoad(t *testing.T, rep loadgen.Report) {
	t.Helper()
	t.Logf("load:\n%s", rep.String())
	for _, code := range []string{"Internal", "InvalidArgument", "Unknown"} {
		if rep.Codes[code] > 0 {
			t.Errorf("%d calls answered %s: a well-formed retry must never get it", rep.Codes[code], code)
		}
	}
	if rep.Unacked != 0 || rep.ConflictsAccepted != 0 || rep.Disagreements != 0 || rep.NewAnswers != 0 || rep.ChangesUnacked != 0 ||
		len(rep.Problems) != 0 {
		t.Fatalf("load: %d never acknowledged, %d conflicting reuses accepted, %d disagreements, %d extra new answers, %d changes never answered, problems %v",
			rep.Unacked, rep.ConflictsAccepted, rep.Disagreements, rep.NewAnswers, rep.ChangesUnacked, rep.Problems)
	}
}

// TestLoadWithOneNodeKilled kills one of three nodes while 2,000 requests
// (20% duplicates, 5% conflicting reuses) are in flight, and a tenth of the
// orders get rounds of racing changes mixed in. Every
// acknowledged request is present exactly once; failed ones are retried
// with the same id and then present exactly once; the checker passes,
// including every order's version history (no gap, no duplicate) and the
// acknowledged changes. The reference consumer runs throughout: every
// acknowledged order's event is delivered and applied by it exactly once,
// and its view of each changed order is the order's current version
// (`orderd verify --consumer-keyspace`).
func TestLoadWithOneNodeKilled(t *testing.T) {
	if !cluster.CanControlNodes() {
		failInCIElseSkip(t, "this cluster offers no node control: "+cluster.Describe())
	}
	topic := fmt.Sprintf("e2e.%d.nodekill", time.Now().UnixNano())
	// 12 partitions: the consumer applies partitions in parallel.
	p := startOrderd(t, append(slices.Clone(fastReconciler), "ORDERD_KAFKA_TOPIC="+topic, "ORDERD_KAFKA_PARTITIONS=12")...)
	consumer, _ := runConsumer(t, topic)
	t.Cleanup(func() {
		if err := cluster.StartNode(context.Background(), 3); err != nil {
			t.Errorf("restart node 3: %v", err)
		}
	})
	var once sync.Once
	var killedAt time.Time
	rep := loadgen.Run(context.Background(), p.client, loadgen.Config{
		Intents: 2000, Concurrency: 32, DuplicateShare: 0.2, ConflictShare: 0.05, ChangeShare: 0.1, RetryFor: 90 * time.Second,
		OnCall: func(calls int) {
			if calls == 600 {
				once.Do(func() {
					killedAt = time.Now()
					if err := cluster.KillNode(context.Background(), 3); err != nil {
						t.Errorf("kill node 3: %v", err)
					}
				})
			}
		},
	})
	if killedAt.IsZero() {
		t.Fatal("node 3 was never killed")
	}
	checkLoad(t, rep)
	if rep.ChangesAccepted == 0 || rep.ChangesStale == 0 {
		t.Errorf("changes: %d accepted, %d stale; want both (two editors race every round)", rep.ChangesAccepted, rep.ChangesStale)
	}
	verifyKeyspace(t, rep.Acks, 2*time.Minute, "--consumer-keyspace", consumer.keyspace)
	t.Logf("consumer: applied %v, duplicates %v", consumer.metric(t, `orderconsumer_events_total{result="applied"}`),
		consumer.metric(t, `orderconsumer_events_total{result="duplicate"}`))
}

// TestTwoNodesDownFailsFastThenRecovers: with two of three nodes down,
// CreateOrder fails fast with UNAVAILABLE; nothing half-written is left
// that cannot be finished; once the nodes are back, the same requests
// succeed and the checker passes.
func TestTwoNodesDownFailsFastThenRecovers(t *testing.T) {
	if !cluster.CanControlNodes() {
		failInCIElseSkip(t, "this cluster offers no node control: "+cluster.Describe())
	}
	p := startOrderd(t, fastReconciler...)
	t.Cleanup(func() {
		for _, i := range []int{2, 3} {
			if err := cluster.StartNode(context.Background(), i); err != nil {
				t.Errorf("restart node %d: %v", i, err)
			}
		}
	})
	killed := time.Now()
	for _, i := range []int{2, 3} {
		if err := cluster.KillNode(context.Background(), i); err != nil {
			t.Fatal(err)
		}
	}
	// Until the live node's failure detector convicts the dead ones, writes
	// time out (an unknown outcome); after it, they are refused at once.
	var sent []*ordersv1.CreateOrderRequest
	var detected time.Duration
	_, err := eventually(120*time.Second, func() error {
		req := newRequest("7.00")
		sent = append(sent, req)
		t0 := time.Now()
		_, _, err := create(t, p.client, req)
		took := time.Since(t0)
		st := status.Convert(err)
		if st.Code() == codes.Unavailable && reason(st) == "CLUSTER_UNAVAILABLE" && took < time.Second {
			detected = time.Since(killed)
			return nil
		}
		return err
	})
	if err != nil {
		t.Fatalf("CreateOrder never failed fast with two nodes down: %v", err)
	}
	var worst time.Duration
	for range 20 {
		req := newRequest("8.00")
		sent = append(sent, req)
		t0 := time.Now()
		_, _, err := create(t, p.client, req)
		took := time.Since(t0)
		worst = max(worst, took)
		if st := status.Convert(err); st.Code() != codes.Unavailable {
			t.Fatalf("with two nodes down: %v, want Unavailable", err)
		}
	}
	t.Logf("two nodes down: detected (first fast UNAVAILABLE) %s after the kill; then 20 calls, slowest %s",
		detected.Round(time.Millisecond), worst.Round(time.Millisecond))
	// Node 1 still answers reads at ONE, but no LOCAL_QUORUM write can
	// succeed: health says NOT_SERVING (a ping at ONE said SERVING here),
	// and stays so while the quorum is missing.
	took := waitHealth(t, p, healthpb.HealthCheckResponse_NOT_SERVING, 30*time.Second)
	for range 3 {
		time.Sleep(time.Second)
		if s, err := healthStatus(p); s != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Fatalf("health flapped to %v %v with two nodes down", s, err)
		}
	}
	t.Logf("two nodes down: health NOT_SERVING %s after the first fast UNAVAILABLE", took.Round(time.Millisecond))

	for _, i := range []int{2, 3} {
		if err := cluster.StartNode(context.Background(), i); err != nil {
			t.Fatal(err)
		}
	}
	took = waitHealth(t, p, healthpb.HealthCheckResponse_SERVING, 60*time.Second)
	t.Logf("nodes back: health SERVING %s after the restarts returned", took.Round(time.Millisecond))
	// The clients retry every request with its own id.
	for _, req := range sent {
		if _, err := eventually(60*time.Second, func() error { _, _, err := create(t, p.client, req); return err }); err != nil {
			t.Fatalf("retry of %s after recovery: %v", req.RequestId, err)
		}
	}
	verifyKeyspace(t, nil, 30*time.Second)
}

// TestAmbiguousClaimIsSettledAsApplied: the claim LWT applies but its
// response is lost (CQL fault ledger.claim=lose-response), so the handler sees an
// unknown outcome. The serial read (LOCAL_SERIAL, the default) finds this
// attempt's claim token: the request is reported as applied and completed,
// not failed, and the log line names the level that settled it.
func TestAmbiguousClaimIsSettledAsApplied(t *testing.T) {
	p := startOrderd(t, "ORDERD_CQL_FAULTS=ledger.claim=lose-response")
	req := newRequest("64.00")
	resp, replayed, err := create(t, p.client, req)
	if err != nil {
		t.Fatalf("a claim whose response was lost: %v; want it settled as applied", err)
	}
	if resp.Replayed || replayed != "false" {
		t.Errorf("the settled claim is this attempt's own: replayed=%v header=%q, want false", resp.Replayed, replayed)
	}
	assertExactlyOneOrder(t, req, resp.Order, "64.00")
	log := p.output.String()
	if !strings.Contains(log, "settled by a serial read") || !strings.Contains(log, "op=claim settled=applied") ||
		!strings.Contains(log, "serial=LOCAL_SERIAL") {
		t.Errorf("orderd did not report settling the unknown claim outcome as applied:\n%s", log)
	}
	verifyKeyspace(t, nil, 30*time.Second)
}

// TestOrderdKilledMidLoadRecovers SIGKILLs orderd in the middle of a load
// and starts a new one behind the same address: the clients' retries and
// the reconciler finish everything, and the checker passes.
func TestOrderdKilledMidLoadRecovers(t *testing.T) {
	first := startOrderd(t, fastReconciler...)
	addr := first.addr
	client := dialClient(t, addr)
	var (
		once      sync.Once
		second    *orderdProcess
		secondErr error
	)
	rep := loadgen.Run(context.Background(), client, loadgen.Config{
		Intents: 1000, Concurrency: 32, DuplicateShare: 0.2, RetryFor: 90 * time.Second,
		OnCall: func(calls int) {
			if calls == 400 {
				once.Do(func() {
					_ = first.cmd.Process.Kill()
					<-first.exited
					second, secondErr = launchOrderdAt(addr, fastReconciler...)
				})
			}
		},
	})
	if secondErr != nil {
		t.Fatal(secondErr)
	}
	if second == nil {
		t.Fatal("orderd was never killed")
	}
	t.Cleanup(func() {
		if err := second.stop(); err != nil {
			t.Error(err)
		}
	})
	checkLoad(t, rep)
	if rep.Codes["Unavailable"] == 0 {
		t.Errorf("no call failed although orderd was killed mid-load: %v", rep.Codes)
	}
	verifyKeyspace(t, rep.Acks, 30*time.Second)
}

// TestHealthNotServingWhileClusterDown: with every node down the health
// service says NOT_SERVING and CreateOrder answers UNAVAILABLE; once the
// nodes are back orderd reconnects by itself and serves again.
func TestHealthNotServingWhileClusterDown(t *testing.T) {
	if !cluster.CanControlNodes() {
		failInCIElseSkip(t, "this cluster offers no node control: "+cluster.Describe())
	}
	p := startOrderd(t)
	health := healthpb.NewHealthClient(p.conn)
	check := func() healthpb.HealthCheckResponse_ServingStatus {
		resp, err := health.Check(callCtx(t), &healthpb.HealthCheckRequest{Service: ordersv1.OrderService_ServiceDesc.ServiceName})
		if err != nil {
			return healthpb.HealthCheckResponse_UNKNOWN
		}
		return resp.Status
	}
	if s := check(); s != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health before the outage: %v", s)
	}
	t.Cleanup(func() {
		for i := 1; i <= cluster.Nodes(); i++ {
			if err := cluster.StartNode(context.Background(), i); err != nil {
				t.Errorf("restart node %d: %v", i, err)
			}
		}
	})
	for i := 1; i <= cluster.Nodes(); i++ {
		if err := cluster.KillNode(context.Background(), i); err != nil {
			t.Fatal(err)
		}
	}
	took, err := eventually(30*time.Second, func() error {
		if s := check(); s != healthpb.HealthCheckResponse_NOT_SERVING {
			return fmt.Errorf("health %v", s)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("health with every node down: %v, want NOT_SERVING", err)
	}
	t.Logf("every node down: NOT_SERVING after %s", took.Round(time.Millisecond))
	if _, _, err := create(t, p.client, newRequest("1.00")); status.Code(err) != codes.Unavailable {
		t.Errorf("CreateOrder with every node down: %v, want Unavailable", err)
	}

	for i := 1; i <= cluster.Nodes(); i++ {
		if err := cluster.StartNode(context.Background(), i); err != nil {
			t.Fatal(err)
		}
	}
	took, err = eventually(90*time.Second, func() error {
		if s := check(); s != healthpb.HealthCheckResponse_SERVING {
			return fmt.Errorf("health %v", s)
		}
		_, _, err := create(t, p.client, newRequest("2.00"))
		return err
	})
	if err != nil {
		t.Fatalf("after the nodes came back: %v", err)
	}
	t.Logf("nodes back: SERVING and creating orders again after %s", took.Round(time.Millisecond))
}
