// Package loadgen drives CreateOrder the way real clients do: one request id
// per business intent, reused on every retry, with a share of duplicate
// copies (a gateway re-sending) and of conflicting reuses (a client bug), and
// records every acknowledged outcome so they can be compared with the rows
// (internal/tools/invariant). It is bounded in count and time.
package loadgen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/atlasmart/orderd/internal/tools/invariant"
	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

// Config bounds and shapes the load. Zero fields take defaults.
type Config struct {
	Intents        int           // business intents (distinct request ids); default 2000
	Concurrency    int           // calls in flight; default 32
	DuplicateShare float64       // share of intents also sent as a second copy
	ConflictShare  float64       // share of acknowledged intents re-sent with another total
	ChangeShare    float64       // share of created orders that get rounds of racing changes (changes.go)
	Customers      int           // distinct customer ids; default 50
	Tenant         string        // recorded in acks; default "default"
	MaxDuration    time.Duration // sending stops after this; default 5 min
	RetryFor       time.Duration // unacknowledged intents are retried (same id) this long; default 60 s
	CallTimeout    time.Duration // per call; default 10 s
	// OnCall, if set, is called after every call with the number made so
	// far (tests use it to inject faults mid-load).
	OnCall func(calls int)
}

func (c Config) withDefaults() Config {
	if c.Intents == 0 {
		c.Intents = 2000
	}
	if c.Concurrency == 0 {
		c.Concurrency = 32
	}
	if c.Customers == 0 {
		c.Customers = 50
	}
	if c.Tenant == "" {
		c.Tenant = "default"
	}
	if c.MaxDuration == 0 {
		c.MaxDuration = 5 * time.Minute
	}
	if c.RetryFor == 0 {
		c.RetryFor = 60 * time.Second
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = 10 * time.Second
	}
	return c
}

// Outcome classifies one call's answer.
type Outcome string

const (
	New        Outcome = "new"      // OK, replayed=false
	Replayed   Outcome = "replayed" // OK, replayed=true
	Conflict   Outcome = "conflict" // FAILED_PRECONDITION REQUEST_ID_REUSED
	InProgress Outcome = "in_progress"
	Failed     Outcome = "error" // anything else
)

// Report is what the load saw.
type Report struct {
	Intents, Calls, DuplicateCopies, ConflictCalls int
	Acked                                          int // intents with an OK answer
	AckedAfterRetry                                int // of them, acked only in the retry phase
	Unacked                                        int // intents never acknowledged
	Refused                                        int // of them, refused for good (not retried): Unauthenticated, PermissionDenied, InvalidArgument
	ConflictsAccepted                              int // conflicting reuses answered OK (must be 0)
	Disagreements                                  int // OK answers of one intent that differ (must be 0)
	NewAnswers                                     int // replayed=false answers beyond one per intent (must be 0)
	Codes                                          map[string]int
	Latency                                        map[Outcome][]time.Duration // sorted
	Elapsed                                        time.Duration
	Acks                                           []invariant.Ack // creates and accepted changes
	Problems                                       []string
	// Changes (changes.go): sent, accepted, answered STALE_VERSION,
	// answered ORDER_CANCELLED, never answered for good (must be 0).
	ChangesSent, ChangesAccepted, ChangesStale, ChangesRejected, ChangesUnacked int
}

type intent struct {
	req     *ordersv1.CreateOrderRequest
	mu      sync.Mutex
	acked   *ordersv1.Order
	news    int
	refused bool // answered with a code no retry of the same call can change
}

// refusedForGood reports whether err is an answer that retrying the same
// request cannot change: missing or wrong credentials, or invalid input.
// Such intents are not retried: a load without a valid API key would
// otherwise spin the retry phase against the server for its whole RetryFor.
func refusedForGood(err error) bool {
	switch status.Code(err) {
	case codes.Unauthenticated, codes.PermissionDenied, codes.InvalidArgument:
		return true
	}
	return false
}

// noteAnswer marks the intent refused when err is refused for good.
func (in *intent) noteAnswer(err error) {
	if !refusedForGood(err) {
		return
	}
	in.mu.Lock()
	in.refused = true
	in.mu.Unlock()
}

func (in *intent) wasRefused() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.refused
}

// settled reports whether the intent needs no more retries.
func (in *intent) settled() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.acked != nil || in.refused
}

type call struct {
	in       *intent
	req      *ordersv1.CreateOrderRequest
	conflict bool
}

// Run sends the load through client and returns what it saw: every intent
// once (and a share twice), then conflicting reuses of a share of the
// acknowledged ones, then the unacknowledged ones again with the same
// request id until they settle or RetryFor runs out.
func Run(ctx context.Context, client ordersv1.OrderServiceClient, cfg Config) Report {
	cfg = cfg.withDefaults()
	start := time.Now()
	l := &load{client: client, cfg: cfg,
		rep: Report{Intents: cfg.Intents, Codes: map[string]int{}, Latency: map[Outcome][]time.Duration{}}}
	intents, calls := newIntents(cfg, &l.rep)

	sendCtx, cancel := context.WithTimeout(ctx, cfg.MaxDuration)
	defer cancel()
	l.changes = &changeStats{byVersion: map[string]string{}, codes: map[string]int{}}
	send := func(c call) { l.send(sendCtx, c) }
	runAll(sendCtx, calls, cfg.Concurrency, send)
	runAll(sendCtx, conflictingReuses(intents, cfg.ConflictShare), cfg.Concurrency, send)
	l.retryUnsettled(ctx, intents)

	l.tally(intents)
	l.foldChanges()
	for k := range l.rep.Latency {
		sort.Slice(l.rep.Latency[k], func(i, j int) bool { return l.rep.Latency[k][i] < l.rep.Latency[k][j] })
	}
	l.rep.Elapsed = time.Since(start)
	return l.rep
}

// load is one Run under way.
type load struct {
	client  ordersv1.OrderServiceClient
	cfg     Config
	changes *changeStats

	mu  sync.Mutex // guards rep and sent
	rep Report
	// sent counts the calls of the first pass and of the conflicting
	// reuses, the number OnCall is given; retries are not counted.
	sent int
}

// newIntents makes cfg.Intents intents, each with a random customer and
// total, and decides which of them are also sent as a second copy (a
// gateway re-sending): the calls of the first pass, shuffled. It counts the
// copies into rep.
func newIntents(cfg Config, rep *Report) ([]*intent, []call) {
	intents := make([]*intent, cfg.Intents)
	var calls []call
	for i := range intents {
		in := &intent{req: &ordersv1.CreateOrderRequest{
			RequestId:  uuid.NewString(),
			CustomerId: fmt.Sprintf("load-cust-%03d", rand.IntN(cfg.Customers)),
			Total:      fmt.Sprintf("%d.%02d", 1+rand.IntN(500), rand.IntN(100)),
			Currency:   "EUR",
		}}
		intents[i] = in
		calls = append(calls, call{in: in, req: in.req})
		if rand.Float64() < cfg.DuplicateShare {
			calls = append(calls, call{in: in, req: in.req})
			rep.DuplicateCopies++
		}
	}
	rand.Shuffle(len(calls), func(i, j int) { calls[i], calls[j] = calls[j], calls[i] })
	return intents, calls
}

// conflictingReuses decides which acknowledged intents are re-sent with
// the same request id and another valid total (a leading digit added): a
// share of them, each of which must be refused.
func conflictingReuses(intents []*intent, share float64) []call {
	var conflicts []call
	for _, in := range intents {
		if in.ack() != nil && rand.Float64() < share {
			other := &ordersv1.CreateOrderRequest{RequestId: in.req.RequestId, CustomerId: in.req.CustomerId,
				Total: "1" + in.req.Total, Currency: in.req.Currency}
			conflicts = append(conflicts, call{in: in, req: other, conflict: true})
		}
	}
	return conflicts
}

// send makes one call of the first pass or of the conflicting reuses,
// counts it, and judges its answer; then it tells OnCall.
func (l *load) send(ctx context.Context, c call) {
	callCtx, cancel := context.WithTimeout(ctx, l.cfg.CallTimeout)
	t0 := time.Now()
	resp, err := l.client.CreateOrder(callCtx, c.req)
	d := time.Since(t0)
	cancel()
	out := classify(resp, err)
	l.mu.Lock()
	l.sent++
	l.rep.Calls++
	if c.conflict {
		l.rep.ConflictCalls++
	}
	l.rep.Codes[status.Code(err).String()]++
	l.rep.Latency[out] = append(l.rep.Latency[out], d)
	calls := l.sent
	l.mu.Unlock()
	if c.conflict {
		l.judgeConflict(c, resp, err)
	} else {
		l.judgeAnswer(ctx, c, resp, err)
	}
	if l.cfg.OnCall != nil {
		l.cfg.OnCall(calls)
	}
}

// judgeAnswer decides what an answer to an intent's own request means: an
// answer retrying cannot change marks the intent refused; an OK answer is
// recorded, is a problem if it disagrees with an earlier one and, when it
// is the intent's first, sends the order's changes with a share's chance.
func (l *load) judgeAnswer(ctx context.Context, c call, resp *ordersv1.CreateOrderResponse, err error) {
	c.in.noteAnswer(err)
	if err != nil {
		return
	}
	first, disagree := c.in.record(resp)
	if disagree {
		l.mu.Lock()
		l.rep.Disagreements++
		l.rep.Problems = append(l.rep.Problems, fmt.Sprintf("answers for %s disagree: %v", c.req.RequestId, resp.Order))
		l.mu.Unlock()
	}
	if first && rand.Float64() < l.cfg.ChangeShare {
		l.changes.changeOrder(ctx, l.client, l.cfg, resp.GetOrder())
	}
}

// judgeConflict: a conflicting reuse answered OK is a problem.
func (l *load) judgeConflict(c call, resp *ordersv1.CreateOrderResponse, err error) {
	if err != nil {
		return
	}
	l.mu.Lock()
	l.rep.ConflictsAccepted++
	l.rep.Problems = append(l.rep.Problems, fmt.Sprintf("conflicting reuse of %s was accepted: %v", c.req.RequestId, resp))
	l.mu.Unlock()
}

// retryUnsettled re-sends every intent not yet settled, with the same
// request id, in rounds half a second apart, until none is left, RetryFor
// has passed since the phase began, or ctx ends.
func (l *load) retryUnsettled(ctx context.Context, intents []*intent) {
	retryUntil := time.Now().Add(l.cfg.RetryFor)
	for {
		var pending []call
		for _, in := range intents {
			if !in.settled() {
				pending = append(pending, call{in: in, req: in.req})
			}
		}
		if len(pending) == 0 || time.Now().After(retryUntil) || ctx.Err() != nil {
			break
		}
		retryCtx, cancel := context.WithDeadline(ctx, retryUntil)
		runAll(retryCtx, pending, l.cfg.Concurrency, func(c call) { l.resend(retryCtx, c) })
		cancel()
		if slices.ContainsFunc(intents, func(in *intent) bool { return !in.settled() }) {
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
}

// resend makes one retry call and counts it; an answer retrying cannot
// change marks the intent refused, an OK answer is recorded (acknowledged
// after retry if it is the first) and is a problem if it disagrees with an
// earlier one. A retry never starts changes.
func (l *load) resend(ctx context.Context, c call) {
	callCtx, cancel := context.WithTimeout(ctx, l.cfg.CallTimeout)
	defer cancel()
	t0 := time.Now()
	resp, err := l.client.CreateOrder(callCtx, c.req)
	l.mu.Lock()
	l.rep.Calls++
	l.rep.Codes[status.Code(err).String()]++
	l.rep.Latency[classify(resp, err)] = append(l.rep.Latency[classify(resp, err)], time.Since(t0))
	l.mu.Unlock()
	c.in.noteAnswer(err)
	if err != nil {
		return
	}
	first, disagree := c.in.record(resp)
	l.mu.Lock()
	if first {
		l.rep.AckedAfterRetry++
	}
	if disagree {
		l.rep.Disagreements++
		l.rep.Problems = append(l.rep.Problems, fmt.Sprintf("answers for %s disagree: %v", c.req.RequestId, resp.Order))
	}
	l.mu.Unlock()
}

// tally decides what each intent counts as once the sending is over:
// acknowledged (an ack, and a problem if it was answered replayed=false
// more than once) or not (and of those, refused for good).
func (l *load) tally(intents []*intent) {
	for _, in := range intents {
		o := in.ack()
		if o == nil {
			l.rep.Unacked++
			if in.wasRefused() {
				l.rep.Refused++
			}
			continue
		}
		l.rep.Acked++
		in.mu.Lock()
		if in.news > 1 {
			l.rep.NewAnswers += in.news - 1
			l.rep.Problems = append(l.rep.Problems, fmt.Sprintf("request %s answered replayed=false %d times", in.req.RequestId, in.news))
		}
		in.mu.Unlock()
		l.rep.Acks = append(l.rep.Acks, invariant.Ack{Tenant: l.cfg.Tenant, RequestID: in.req.RequestId, OrderID: o.OrderId,
			CustomerID: o.CustomerId, Total: o.Total, Currency: o.Currency})
	}
}

// foldChanges adds what the change phase saw to the report, after the
// creates' acks and problems.
func (l *load) foldChanges() {
	ch := l.changes
	l.rep.ChangesSent, l.rep.ChangesAccepted, l.rep.ChangesStale = ch.sent, ch.accepted, ch.stale
	l.rep.ChangesRejected, l.rep.ChangesUnacked = ch.cancelled, ch.unacked
	l.rep.Acks = append(l.rep.Acks, ch.acks...)
	l.rep.Problems = append(l.rep.Problems, ch.problems...)
	for code, n := range ch.codes {
		l.rep.Codes[code] += n
	}
}

// record keeps the first OK answer; it reports whether this answer was the
// intent's first, and whether it disagrees with the first.
func (in *intent) record(resp *ordersv1.CreateOrderResponse) (first, disagree bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if !resp.Replayed {
		in.news++
	}
	if in.acked == nil {
		in.acked = resp.Order
		return true, false
	}
	return false, !proto.Equal(in.acked, resp.Order)
}

func (in *intent) ack() *ordersv1.Order {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.acked
}

func classify(resp *ordersv1.CreateOrderResponse, err error) Outcome {
	switch {
	case err == nil && resp.Replayed:
		return Replayed
	case err == nil:
		return New
	case status.Code(err) == codes.FailedPrecondition:
		return Conflict
	case status.Code(err) == codes.Aborted:
		return InProgress
	}
	return Failed
}

func runAll(ctx context.Context, calls []call, concurrency int, do func(call)) {
	work := make(chan call)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range work {
				do(c)
			}
		}()
	}
	for _, c := range calls {
		select {
		case work <- c:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(work)
	wg.Wait()
}

// Percentile returns the p-th percentile (0-100) of sorted durations.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p / 100)
	return sorted[i]
}

// String summarises the report.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "intents %d, calls %d (duplicate copies %d, conflicting reuses %d) in %s\n",
		r.Intents, r.Calls, r.DuplicateCopies, r.ConflictCalls, r.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(&b, "acknowledged %d (%d only after retries), never acknowledged %d (%d refused for good, not retried), conflicting reuses accepted %d, extra replayed=false answers %d\n",
		r.Acked, r.AckedAfterRetry, r.Unacked, r.Refused, r.ConflictsAccepted, r.NewAnswers)
	var codes []string
	for c, n := range r.Codes {
		codes = append(codes, fmt.Sprintf("%s=%d", c, n))
	}
	sort.Strings(codes)
	if r.ChangesSent > 0 {
		fmt.Fprintf(&b, "changes %d: accepted %d, stale %d, rejected (cancelled) %d, never answered %d\n",
			r.ChangesSent, r.ChangesAccepted, r.ChangesStale, r.ChangesRejected, r.ChangesUnacked)
	}
	fmt.Fprintf(&b, "codes: %s\n", strings.Join(codes, " "))
	for _, o := range []Outcome{New, Replayed, Conflict, InProgress, Failed} {
		l := r.Latency[o]
		if len(l) == 0 {
			continue
		}
		fmt.Fprintf(&b, "  %-11s n=%-6d p50=%-9s p95=%-9s p99=%s\n", o, len(l),
			Percentile(l, 50).Round(10*time.Microsecond), Percentile(l, 95).Round(10*time.Microsecond), Percentile(l, 99).Round(10*time.Microsecond))
	}
	for _, p := range r.Problems {
		fmt.Fprintf(&b, "PROBLEM: %s\n", p)
	}
	return b.String()
}
