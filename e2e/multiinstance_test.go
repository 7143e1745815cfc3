package e2e

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/protobuf/proto"
	"gopkg.in/inf.v0"

	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/platform/failpoint"
	"github.com/atlasmart/orderd/internal/tools/invariant"
	"github.com/atlasmart/orderd/ledger"
	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
	"github.com/atlasmart/orderd/proto/client"
)

// TestThreeInstancesBehindRoundRobinThroughKillAndDrain runs three orderd
// processes (reconciler and delivery on) behind the Go client's round robin
// (a manual resolver holding the three addresses). 800 intents go through
// it from 16 goroutines; every 8th intent is instead sent as concurrent
// copies, one per live instance over a direct connection each. Early in
// the load (a third of the way, or sooner: see below) instance a is killed
// (SIGKILL) with 20 requests claimed and unfinished on it that no client
// retries; two thirds in, instance b is drained (SIGTERM). Then:
//   - b exits 0 within its shutdown grace and has released its leases;
//   - every intent is acknowledged, all copies of one agree, and Cassandra
//     holds exactly one order per request id, the acknowledged one;
//   - the 20 requests a left unfinished are finished by the survivors'
//     reconcilers;
//   - the shards: a, b and c hold all 16 between them before the faults,
//     c holds all 16 after (a's taken over when their leases expire);
//   - `orderd verify` with the acknowledgements (and their delivery to
//     Kafka) passes.
func TestThreeInstancesBehindRoundRobinThroughKillAndDrain(t *testing.T) {
	const (
		intents       = 800
		workers       = 16
		dupEvery      = 8  // every dupEvery-th intent is sent as one copy per live instance
		orphans       = 20 // requests left claimed and unfinished on a when it dies
		customers     = 8
		shutdownGrace = 10 * time.Second
	)
	// A grace of 25 s: the orphans must still be unfinished when a is
	// killed (their due entries fall due 25 s after their claim); it must
	// exceed the request timeout (15 s) + CQL timeout (5 s) + 2 x the
	// largest clock skew (2 s).
	env := []string{
		"ORDERD_RECONCILER=true",
		"ORDERD_RECONCILE_GRACE=25s",
		"ORDERD_RECONCILE_INTERVAL=500ms",
		"ORDERD_RECONCILE_BACKOFF=300ms",
		"ORDERD_RECONCILE_BACKOFF_MAX=1s",
		"ORDERD_SHUTDOWN_GRACE=" + shutdownGrace.String(),
	}
	// a's first 20 won claims hang until it is killed: the orphans.
	names := []string{"a", "b", "c"}
	envOf := map[string][]string{
		"a": append(slices.Clone(env), fmt.Sprintf("ORDERD_FAILPOINTS=%s=sleep(10m)*%d", failpoint.AfterClaim, orphans)),
		"b": env, "c": env,
	}
	procs := startOrderds(t, names, envOf)
	a, b, c := procs["a"], procs["b"], procs["c"]
	ids := map[string]string{} // reconciler instance id -> name
	for _, n := range names {
		ids[reconcilerInstance(t, procs[n])] = n
	}
	s := freshSession(t)

	// Before the faults: the three hold all 16 shards between them, and the
	// lease table says so. The instances' own counts can add up to 16 while
	// a rebalance is under way (one above its fair share, about to release
	// a shard another will take), so both are polled until they agree.
	var before string
	if _, err := eventually(60*time.Second, func() error {
		owned, line := ownedShards(t, procs, names)
		before = line
		if owned["a"] < 1 || owned["b"] < 1 || owned["c"] < 1 || owned["a"]+owned["b"]+owned["c"] != ledger.PendingShards {
			return fmt.Errorf("owned shards %s", line)
		}
		owners := leaseOwners(t, s, ids)
		for _, n := range names {
			if countOwned(owners, n) != owned[n] {
				return fmt.Errorf("leases %v differ from the instances' own counts %s", owners, line)
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("before the faults, want all %d shards held by a, b and c, as their leases show: %v", ledger.PendingShards, err)
	}

	// The orphans: claimed on a, then hanging there (no client retries them).
	prefix := "multi-" + uuid.NewString()[:8]
	began := time.Now().UTC()
	orphanReqs := make([]*ordersv1.CreateOrderRequest, orphans)
	var orphansDone sync.WaitGroup
	orphanCtx, cancelOrphans := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancelOrphans()
	for i := range orphanReqs {
		orphanReqs[i] = &ordersv1.CreateOrderRequest{RequestId: uuid.NewString(), CustomerId: prefix + "-orphan",
			Total: fmt.Sprintf("%d.50", i+1), Currency: "EUR"}
		orphansDone.Add(1)
		go func() {
			defer orphansDone.Done()
			_, _ = a.client.CreateOrder(orphanCtx, orphanReqs[i]) // ends when a dies
		}()
	}
	for _, r := range orphanReqs {
		waitRequestState(t, c.client, r.RequestId, ordersv1.RequestState_REQUEST_STATE_PENDING, 30*time.Second)
	}
	orphansClaimed := time.Now()

	// The load.
	rr, served := roundRobinClient(t, []string{a.addr, b.addr, c.addr})
	direct := map[string]*client.Client{}
	for _, n := range names {
		direct[n] = newTestClient(t, procs[n].addr)
	}
	l := &multiLoad{rr: rr, direct: direct, live: slices.Clone(names)}
	reqs := make([]*ordersv1.CreateOrderRequest, intents)
	for i := range reqs {
		reqs[i] = &ordersv1.CreateOrderRequest{RequestId: client.NewRequestID(), CustomerId: fmt.Sprintf("%s-%d", prefix, i%customers),
			Total: fmt.Sprintf("%d.%02d", 10+i%90, i%100), Currency: "EUR"}
	}
	start := time.Now()
	loadCtx, stopLoad := context.WithCancel(context.Background())
	loadDone := make(chan struct{})
	go func() { l.run(loadCtx, reqs, dupEvery, workers); close(loadDone) }()
	t.Cleanup(func() { stopLoad(); <-loadDone }) // before the processes stop

	// a dies a third of the way in (or 8 s after the orphans' claims, so
	// that they are still unfinished: they fall due 20 s after them).
	waitProgress(t, l, loadDone, intents/3, orphansClaimed.Add(8*time.Second))
	l.drop("a")
	_ = a.cmd.Process.Kill()
	<-a.exited
	killedAt, killedAtProgress := time.Now(), l.done.Load()
	orphansDone.Wait()
	for _, r := range orphanReqs {
		if st := requestState(t, c.client, r.RequestId); st != ordersv1.RequestState_REQUEST_STATE_PENDING {
			t.Fatalf("orphan %s is %v just after a was killed, want PENDING (the test's premise: a left it unfinished)", r.RequestId, st)
		}
	}
	heldByKilled := countOwned(leaseOwners(t, s, ids), "a")
	justAfterKill := scrapeShards(t, procs, []string{"b", "c"})

	// b drains two thirds of the way in.
	waitProgress(t, l, loadDone, 2*intents/3, time.Now().Add(time.Minute))
	atDrain := scrapeShards(t, procs, []string{"b", "c"})
	finishedByB := scrape(t, b, `orderd_reconciler_finished_total`)
	l.drop("b")
	drainProgress := l.done.Load()
	drainStart := time.Now()
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code := b.waitExit(t, shutdownGrace+20*time.Second)
	drained := time.Since(drainStart)
	if code != 0 {
		t.Errorf("b exited %d after SIGTERM, want 0", code)
	}
	if drained > shutdownGrace {
		t.Errorf("b took %s to exit after SIGTERM, longer than its shutdown grace %s", drained.Round(time.Millisecond), shutdownGrace)
	}
	heldByDrained := countOwned(leaseOwners(t, s, ids), "b")
	if heldByDrained != 0 {
		t.Errorf("b still holds %d shard leases after its graceful exit, want 0 (released at once, not left to expire)", heldByDrained)
	}

	// After the faults (the load still running): c, the survivor, holds
	// all 16 (a's once their leases expire, b's at once).
	after := waitShards(t, procs, []string{"c"}, 60*time.Second, func(owned map[string]int) bool {
		return owned["c"] == ledger.PendingShards
	})
	sinceKill, sinceDrain := time.Since(killedAt), time.Since(drainStart)
	if owners := leaseOwners(t, s, ids); countOwned(owners, "c") != ledger.PendingShards {
		t.Errorf("leases after the faults: %v, want all %d held by c", owners, ledger.PendingShards)
	}
	t.Logf("shards before: %s; just after the kill of a: %s, the dead a still holding %d leases; at the drain of b (%.1f s after the kill): %s; b exited in %s holding %d leases; after: %s (%.1f s after the drain, %.1f s after the kill)",
		before, justAfterKill, heldByKilled, drainStart.Sub(killedAt).Seconds(), atDrain, drained.Round(time.Millisecond), heldByDrained,
		after, sinceDrain.Seconds(), sinceKill.Seconds())

	<-loadDone
	elapsed := time.Since(start)

	// The orphans a left unfinished are finished by the survivors'
	// reconcilers: no client retries them.
	for _, r := range orphanReqs {
		waitRequestState(t, c.client, r.RequestId, ordersv1.RequestState_REQUEST_STATE_COMPLETE, 60*time.Second)
	}
	t.Logf("the %d requests a left PENDING: COMPLETE %.1f s after the kill; reconcilers finished: b %v (before its drain), c %v",
		orphans, time.Since(killedAt).Seconds(), finishedByB, scrape(t, c, `orderd_reconciler_finished_total`))

	rep := l.report()
	t.Logf("load: %d intents, %d acked, %d retryable errors, %d errors, %.1f s; a killed at %d/%d, b drained at %d/%d; duplicates: %d intents sent as %d concurrent copies, one per live instance (%s), %d copies lost with their instance",
		intents, rep.acked, rep.retryable, len(rep.errs), elapsed.Seconds(), killedAtProgress, intents, drainProgress, intents,
		rep.dupIntents, rep.dupCopies, rep.copySpread(), rep.copiesLost)
	t.Logf("round robin: calls answered by a=%d b=%d c=%d", served.count(a.addr), served.count(b.addr), served.count(c.addr))
	for _, n := range []*orderdProcess{a, b, c} {
		if served.count(n.addr) == 0 {
			t.Errorf("round robin sent no call to %s", n.addr)
		}
	}
	for _, err := range rep.errs[:min(len(rep.errs), 10)] {
		t.Error(err)
	}
	if rep.acked != intents {
		t.Fatalf("%d of %d intents acknowledged", rep.acked, intents)
	}
	if rep.retryable != 0 {
		t.Errorf("%d intents ended in a retryable error (retried by the test with the same request id); the client's retries should ride out an instance going away", rep.retryable)
	}

	// One order per request id, the acknowledged one.
	acks := checkOneOrderEach(t, s, l, began, prefix, customers, orphanReqs)
	verifyKeyspace(t, acks, 2*time.Minute)
}

// startOrderds launches one orderd per name at once, each with envOf[name],
// stopped (SIGTERM) when the test ends.
func startOrderds(t *testing.T, names []string, envOf map[string][]string) map[string]*orderdProcess {
	t.Helper()
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		procs = map[string]*orderdProcess{}
		errs  []error
	)
	for _, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := launchOrderd(envOf[n]...)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("start %s: %w", n, err))
				return
			}
			procs[n] = p
		}()
	}
	wg.Wait()
	for _, n := range names {
		p := procs[n]
		if p == nil {
			continue
		}
		t.Cleanup(func() {
			if err := p.stop(); err != nil {
				t.Error(err)
			}
			if t.Failed() {
				t.Logf("orderd %s output:\n%s", n, p.output.String())
			}
		})
	}
	if len(errs) > 0 {
		t.Fatal(errors.Join(errs...))
	}
	return procs
}

var reconcilerInstanceRE = regexp.MustCompile(`reconciler=([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})`)

// reconcilerInstance is the id p's reconciler leases shards under, from its
// "reconciler started" log line.
func reconcilerInstance(t *testing.T, p *orderdProcess) string {
	t.Helper()
	var id string
	if _, err := eventually(10*time.Second, func() error {
		m := reconcilerInstanceRE.FindStringSubmatch(p.output.String())
		if m == nil {
			return errors.New("no reconciler instance in the log")
		}
		id = m[1]
		return nil
	}); err != nil {
		t.Fatalf("orderd at %s: %v:\n%s", p.addr, err, p.output.String())
	}
	return id
}

// scrapeShards is orderd_reconciler_owned_shards of each named process, as
// "a=6 b=5 c=5".
func scrapeShards(t *testing.T, procs map[string]*orderdProcess, names []string) string {
	t.Helper()
	_, line := ownedShards(t, procs, names)
	return line
}

func ownedShards(t *testing.T, procs map[string]*orderdProcess, names []string) (map[string]int, string) {
	t.Helper()
	owned := map[string]int{}
	var parts []string
	for _, n := range names {
		owned[n] = int(scrape(t, procs[n], `orderd_reconciler_owned_shards`))
		parts = append(parts, fmt.Sprintf("%s=%d", n, owned[n]))
	}
	return owned, strings.Join(parts, " ")
}

// waitShards polls the named processes' owned shards until ok holds, and
// returns them as scrapeShards does.
func waitShards(t *testing.T, procs map[string]*orderdProcess, names []string, within time.Duration, ok func(map[string]int) bool) string {
	t.Helper()
	var line string
	if _, err := eventually(within, func() error {
		var owned map[string]int
		owned, line = ownedShards(t, procs, names)
		if !ok(owned) {
			return fmt.Errorf("owned shards %s", line)
		}
		return nil
	}); err != nil {
		t.Fatalf("shards not settled within %s: %v", within, err)
	}
	return line
}

// leaseOwners reads every shard's lease (at LOCAL_SERIAL: leases are
// written only by LWTs) and names its owner by ids (instance id -> name;
// an unknown owner keeps its id). A shard without a lease is absent.
func leaseOwners(t *testing.T, s *gocql.Session, ids map[string]string) map[int]string {
	t.Helper()
	owners := map[int]string{}
	for shard := range ledger.PendingShards {
		var owner gocql.UUID
		err := s.Query(`SELECT owner FROM reconciler_leases WHERE shard = ?`, shard).
			Consistency(gocql.LocalSerial).ScanContext(callCtx(t), &owner)
		switch {
		case errors.Is(err, gocql.ErrNotFound):
			continue
		case err != nil:
			t.Fatalf("read the lease of shard %d: %v", shard, err)
		}
		name, ok := ids[owner.String()]
		if !ok {
			name = owner.String()
		}
		owners[shard] = name
	}
	return owners
}

func countOwned(owners map[int]string, name string) int {
	n := 0
	for _, o := range owners {
		if o == name {
			n++
		}
	}
	return n
}

// requestState is GetRequest's state of a create request.
func requestState(t *testing.T, c ordersv1.OrderServiceClient, requestID string) ordersv1.RequestState {
	t.Helper()
	resp, err := c.GetRequest(callCtx(t), &ordersv1.GetRequestRequest{RequestId: requestID})
	if err != nil {
		t.Fatalf("GetRequest %s: %v", requestID, err)
	}
	return resp.GetRequest().GetState()
}

// newTestClient is the Go client of the orderd at target as the run's
// default caller, closed when the test ends. A pipeline that can wait: up
// to 20 attempts per call.
func newTestClient(t *testing.T, target string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(target, append([]client.Option{client.WithCredentials(sec.defaultClient()),
		client.WithPolicy(client.Policy{MaxAttempts: 20})}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// servedBy counts the calls each server address answered.
type servedBy struct {
	mu sync.Mutex
	n  map[string]int
}

func (s *servedBy) count(addr string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[addr]
}

// roundRobinClient is the Go client over addrs: a manual resolver holds
// them, and the client's service config balances round robin. The target
// names "localhost", which the run's server certificate covers. served
// counts which address answered each call.
func roundRobinClient(t *testing.T, addrs []string) (*client.Client, *servedBy) {
	t.Helper()
	r := manual.NewBuilderWithScheme("orderd-e2e")
	var state resolver.State
	for _, a := range addrs {
		state.Addresses = append(state.Addresses, resolver.Address{Addr: a})
	}
	r.InitialState(state)
	served := &servedBy{n: map[string]int{}}
	count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		var p peer.Peer
		err := invoker(ctx, method, req, reply, cc, append(opts, grpc.Peer(&p))...)
		if err == nil && p.Addr != nil {
			served.mu.Lock()
			served.n[p.Addr.String()]++
			served.mu.Unlock()
		}
		return err
	}
	c := newTestClient(t, "orderd-e2e:///localhost",
		client.WithDialOptions(grpc.WithResolvers(r), grpc.WithChainUnaryInterceptor(count)))
	return c, served
}

// multiLoad sends intents through the round-robin client, and some as
// concurrent copies straight to every live instance.
type multiLoad struct {
	rr     *client.Client
	direct map[string]*client.Client // one per instance

	mu      sync.Mutex
	live    []string // instances the copies go to
	results map[string]*intentResult
	done    atomic.Int64
}

// intentResult is what became of one intent.
type intentResult struct {
	req                 *ordersv1.CreateOrderRequest
	duplicate, answered bool
	orderID             string   // the first answer's
	answers             []string // every answer, as order id/total
	news                int      // answers with replayed=false (at most one)
	copies, copiesLost  int
	copiesFrom          []string // instances whose copy was answered
	retryable           int      // intent-level retryable errors, retried by the test
	err                 error
	copyErrs            []error
}

// drop stops sending copies to name (before it is killed or drained).
func (l *multiLoad) drop(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.live = slices.DeleteFunc(l.live, func(n string) bool { return n == name })
}

// run places every intent, workers at a time; every dupEvery-th is sent
// as copies.
func (l *multiLoad) run(ctx context.Context, reqs []*ordersv1.CreateOrderRequest, dupEvery, workers int) {
	l.results = map[string]*intentResult{}
	var g errgroup.Group
	g.SetLimit(workers)
	for i, req := range reqs {
		g.Go(func() error {
			res := l.place(ctx, req, i%dupEvery == 0)
			l.mu.Lock()
			l.results[req.RequestId] = res
			l.mu.Unlock()
			l.done.Add(1)
			return nil
		})
	}
	_ = g.Wait() // place reports its errors in its result
}

// place sends one intent until it is acknowledged (a retryable error is
// retried with the same request id, as a pipeline would) or two minutes pass.
func (l *multiLoad) place(ctx context.Context, req *ordersv1.CreateOrderRequest, duplicate bool) *intentResult {
	res := &intentResult{req: req, duplicate: duplicate}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if duplicate {
		l.sendCopies(ctx, res)
		if res.answered {
			return res
		}
	}
	for ctx.Err() == nil {
		resp, err := l.rr.CreateOrder(ctx, proto.Clone(req).(*ordersv1.CreateOrderRequest))
		if err == nil {
			res.note(resp)
			return res
		}
		if !client.IsRetryable(err) {
			res.err = fmt.Errorf("intent %s: %w", req.RequestId, err)
			return res
		}
		res.retryable++
	}
	res.err = fmt.Errorf("intent %s: not acknowledged within 2 minutes", req.RequestId)
	return res
}

// sendCopies sends req at once to every live instance, each copy over its
// own connection with the client's retries. A copy that ends in a
// retryable error was lost with its instance.
func (l *multiLoad) sendCopies(ctx context.Context, res *intentResult) {
	l.mu.Lock()
	targets := slices.Clone(l.live)
	l.mu.Unlock()
	type answer struct {
		name string
		resp *ordersv1.CreateOrderResponse
		err  error
	}
	answers := make(chan answer, len(targets))
	for _, n := range targets {
		go func() {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			resp, err := l.direct[n].CreateOrder(cctx, proto.Clone(res.req).(*ordersv1.CreateOrderRequest))
			answers <- answer{n, resp, err}
		}()
	}
	for range targets {
		a := <-answers
		res.copies++
		switch {
		case a.err == nil:
			res.note(a.resp)
			res.copiesFrom = append(res.copiesFrom, a.name)
		case client.IsRetryable(a.err):
			res.copiesLost++
		default:
			res.copyErrs = append(res.copyErrs, fmt.Errorf("intent %s, copy to %s: %w", res.req.RequestId, a.name, a.err))
		}
	}
}

func (r *intentResult) note(resp *ordersv1.CreateOrderResponse) {
	r.answered = true
	r.answers = append(r.answers, resp.GetOrder().GetOrderId()+"/"+resp.GetOrder().GetTotal())
	if r.orderID == "" {
		r.orderID = resp.GetOrder().GetOrderId()
	}
	if !resp.GetReplayed() {
		r.news++
	}
}

type multiReport struct {
	acked, retryable, dupIntents, dupCopies, copiesLost int
	byCopies                                            map[int]int // duplicated intents by their number of copies
	errs                                                []error
}

// copySpread is how many duplicated intents went to 3, 2 and 1 instances.
func (r multiReport) copySpread() string {
	return fmt.Sprintf("%d to 3 instances, %d to 2, %d to 1", r.byCopies[3], r.byCopies[2], r.byCopies[1])
}

// report checks every intent's answers: acknowledged, every copy agreeing
// on the order (its id derived from the request id, its total the one
// sent), at most one of them new.
func (l *multiLoad) report() multiReport {
	l.mu.Lock()
	defer l.mu.Unlock()
	var rep multiReport
	for _, r := range l.results {
		rep.retryable += r.retryable
		if r.duplicate {
			rep.dupIntents++
			rep.dupCopies += r.copies
			if rep.byCopies == nil {
				rep.byCopies = map[int]int{}
			}
			rep.byCopies[r.copies]++
			rep.copiesLost += r.copiesLost
		}
		rep.errs = append(rep.errs, r.copyErrs...)
		if r.err != nil {
			rep.errs = append(rep.errs, r.err)
			continue
		}
		if !r.answered {
			continue
		}
		rep.acked++
		want := order.ID(tenant, uuid.MustParse(r.req.RequestId)).String() + "/" + r.req.Total
		for _, a := range r.answers {
			if a != want {
				rep.errs = append(rep.errs, fmt.Errorf("intent %s: answers %v (copies from %v), want every one %s", r.req.RequestId, r.answers, r.copiesFrom, want))
				break
			}
		}
		if r.news > 1 {
			rep.errs = append(rep.errs, fmt.Errorf("intent %s: %d answers say the order is new, want at most one", r.req.RequestId, r.news))
		}
	}
	return rep
}

// checkOneOrderEach reads back, through a fresh session, the order of every
// acknowledged intent (orders_by_id: its request id and total) and the
// listing of the load's customers: exactly one row per acknowledged order
// plus the orphans', nothing else. It returns the acknowledgements for
// `orderd verify`.
func checkOneOrderEach(t *testing.T, s *gocql.Session, l *multiLoad, began time.Time, prefix string, customers int, orphans []*ordersv1.CreateOrderRequest) []invariant.Ack {
	t.Helper()
	var acks []invariant.Ack
	want := map[string]bool{} // order ids the listing must hold
	for _, r := range l.results {
		acks = append(acks, invariant.Ack{Tenant: tenant, RequestID: r.req.RequestId, OrderID: r.orderID,
			CustomerID: r.req.CustomerId, Total: r.req.Total, Currency: r.req.Currency})
		want[r.orderID] = true
		var requestID gocql.UUID
		var total *inf.Dec
		n := 0
		iter := s.Query(`SELECT request_id, total FROM orders_by_id WHERE tenant = ? AND order_id = ?`, tenant, r.orderID).IterContext(callCtx(t))
		for iter.Scan(&requestID, &total) {
			n++
		}
		if err := iter.Close(); err != nil {
			t.Fatalf("read orders_by_id: %v", err)
		}
		if n != 1 || requestID.String() != r.req.RequestId || total.String() != r.req.Total {
			t.Errorf("acknowledged order %s: %d rows in orders_by_id (request %s, total %v), want one of request %s, total %s",
				r.orderID, n, requestID, total, r.req.RequestId, r.req.Total)
		}
	}
	for _, o := range orphans {
		want[order.ID(tenant, uuid.MustParse(o.RequestId)).String()] = true
	}
	listed := map[string]int{}
	for _, month := range monthsBetween(began, time.Now().UTC()) {
		for _, customer := range customerIDs(prefix, customers) {
			iter := s.Query(`SELECT order_id FROM orders_by_customer_time WHERE tenant = ? AND customer_id = ? AND order_month = ?`,
				tenant, customer, month).IterContext(callCtx(t))
			var id gocql.UUID
			for iter.Scan(&id) {
				listed[id.String()]++
			}
			if err := iter.Close(); err != nil {
				t.Fatalf("read orders_by_customer_time: %v", err)
			}
		}
	}
	dups, unknown, missing := 0, 0, 0
	for id, n := range listed {
		if n > 1 {
			dups++
		}
		if !want[id] {
			unknown++
		}
	}
	for id := range want {
		if listed[id] == 0 {
			missing++
		}
	}
	if len(listed) != len(want) || dups+unknown+missing != 0 {
		t.Errorf("the customers' listing holds %d orders (%d listed more than once, %d not acknowledged, %d missing), want exactly the %d acknowledged and orphaned",
			len(listed), dups, unknown, missing, len(want))
	}
	t.Logf("read back: %d acknowledged orders, one row each in orders_by_id; the listing holds %d orders, %d duplicated", len(acks), len(listed), dups)
	return acks
}

// customerIDs are the load's customers and the orphans' one.
func customerIDs(prefix string, n int) []string {
	ids := []string{prefix + "-orphan"}
	for i := range n {
		ids = append(ids, fmt.Sprintf("%s-%d", prefix, i))
	}
	return ids
}

// waitProgress waits until the load has placed n intents or the time is
// at, and fails the test if the load ended first.
func waitProgress(t *testing.T, l *multiLoad, loadDone <-chan struct{}, n int, at time.Time) {
	t.Helper()
	for l.done.Load() < int64(n) && time.Now().Before(at) {
		select {
		case <-loadDone:
			t.Fatalf("the load ended (%d intents) before the fault at %d", l.done.Load(), n)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
