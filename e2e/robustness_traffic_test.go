package e2e

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/atlasmart/orderd/internal/domain/order"
	rb "github.com/atlasmart/orderd/internal/tools/robustness"
	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
	"github.com/atlasmart/orderd/proto/client"
)

// The robustness traffic: workers of two tenants that share request ids
// send creates, duplicates, conflicting reuses, late retries, racing
// cancels and amendments, retries and reuses of them, gets and listings,
// each to an instance picked at random, and record every call in the
// history. Each worker draws its calls from its own generator seeded from
// the run's seed, so a seed replays the same calls; how they interleave
// with each other and with the faults is the machine's.

// robustCallTimeout bounds one call: longer than the servers' request
// timeout, so a server usually answers before the client gives up.
const robustCallTimeout = 6 * time.Second

// trafficKey is one tenant's order: the request id both tenants may use,
// its payload, and what the workers learned of it.
type trafficKey struct {
	tenant    string
	requestID string
	orderID   string
	customer  string
	total     string
	version   int64 // the newest version an answer showed (1 until then)
	floor     int64 // the newest version an answer showed written (rb.Input.Floor)
	changes   []*trafficChange
}

// trafficChange is one change request sent to an order.
type trafficChange struct {
	kind     rb.Kind
	id       string
	expected int64
	note     string
	// answered: some call of it got an answer that says what was decided.
	// Only then is its request id reused with another payload: the check
	// needs the first payload decided before another is refused.
	answered bool
}

// traffic is the state the workers share.
type traffic struct {
	mu      sync.Mutex
	tenants []string
	shared  []string                  // request ids, in the order they were first used
	keys    map[[2]string]*trafficKey // (tenant, request id)
	ordered []*trafficKey             // in the order they were made
	calls   map[string]int            // by kind of call, for the report
	codes   map[string]int            // unexpected answers by code and reason
}

func newTraffic(tenants []string) *traffic {
	return &traffic{tenants: tenants, keys: map[[2]string]*trafficKey{}, calls: map[string]int{}, codes: map[string]int{}}
}

// key returns the tenant's order of requestID, making it if new.
func (tr *traffic) key(rng *rand.Rand, tenant, requestID string) *trafficKey {
	k := tr.keys[[2]string{tenant, requestID}]
	if k == nil {
		k = &trafficKey{tenant: tenant, requestID: requestID, orderID: order.ID(tenant, uuid.MustParse(requestID)).String(),
			customer: "rb-" + requestID[:8], total: fmt.Sprintf("%d.%02d", 1+rng.IntN(500), rng.IntN(100)), version: 1}
		tr.keys[[2]string{tenant, requestID}] = k
		tr.ordered = append(tr.ordered, k)
	}
	return k
}

// call is one call the generator chose: its history input and how to send it.
type call struct {
	in   rb.Input
	name string // what kind of traffic it is, for the report
	key  *trafficKey
	chg  *trafficChange
}

// next chooses a worker's next call.
func (tr *traffic) next(rng *rand.Rand) call {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	c := tr.choose(rng)
	c.in.Floor = c.key.floor
	return c
}

func (tr *traffic) choose(rng *rand.Rand) call {
	tenant := tr.tenants[rng.IntN(len(tr.tenants))]
	p := rng.IntN(100)
	if len(tr.shared) == 0 || p < 15 {
		// A new intent; half the time with a request id the other tenant
		// already used.
		rid := ""
		if len(tr.shared) > 0 && rng.IntN(2) == 0 {
			rid = tr.shared[rng.IntN(len(tr.shared))]
			if tr.keys[[2]string{tenant, rid}] != nil {
				rid = ""
			}
		}
		if rid == "" {
			rid = uuid.Must(uuid.NewRandomFromReader(rngReader{rng})).String()
			tr.shared = append(tr.shared, rid)
		}
		k := tr.key(rng, tenant, rid)
		return tr.createCall("create", k, k.total)
	}
	// The recent orders see most of the traffic, so calls race on them.
	recent := tr.ordered[max(0, len(tr.ordered)-16):]
	k := recent[rng.IntN(len(recent))]
	switch {
	case p < 30:
		return tr.createCall("duplicate", k, k.total)
	case p < 35:
		return tr.createCall("conflicting-reuse", k, "1"+k.total)
	case p < 40:
		old := tr.ordered[rng.IntN(max(1, len(tr.ordered)/4))]
		return tr.createCall("late-retry", old, old.total)
	case p < 47:
		return tr.newChange(rng, k, rb.Cancel)
	case p < 65:
		return tr.newChange(rng, k, rb.Amend)
	case p < 75 && len(k.changes) > 0:
		c := k.changes[rng.IntN(len(k.changes))]
		return tr.changeCall("change-retry", k, c, c.expected, c.note)
	case p < 78 && len(k.changes) > 0:
		c := k.changes[rng.IntN(len(k.changes))]
		if c.answered {
			note := c.note
			if c.kind == rb.Amend {
				note += "!"
			}
			return tr.changeCall("change-reuse", k, c, c.expected+1, note)
		}
		return tr.changeCall("change-retry", k, c, c.expected, c.note)
	case p < 90:
		return call{in: rb.Input{Kind: rb.Get, Tenant: k.tenant, Order: k.requestID}, name: "get", key: k}
	default:
		return call{in: rb.Input{Kind: rb.List, Tenant: k.tenant, Order: k.requestID}, name: "list", key: k}
	}
}

func (tr *traffic) createCall(name string, k *trafficKey, total string) call {
	return call{in: rb.Input{Kind: rb.Create, Tenant: k.tenant, Order: k.requestID, RequestID: k.requestID, Total: total}, name: name, key: k}
}

// newChange is a new change of k based on the version the workers know,
// or now and then on the one before or after it (a client with an old
// view, or a guess).
func (tr *traffic) newChange(rng *rand.Rand, k *trafficKey, kind rb.Kind) call {
	expected := k.version
	switch rng.IntN(8) {
	case 0:
		expected = max(1, expected-1)
	case 1:
		expected++
	}
	c := &trafficChange{kind: kind, id: uuid.Must(uuid.NewRandomFromReader(rngReader{rng})).String(), expected: expected}
	if kind == rb.Amend {
		c.note = fmt.Sprintf("note %d", rng.IntN(1000))
	}
	k.changes = append(k.changes, c)
	return tr.changeCall(kind.String(), k, c, c.expected, c.note)
}

func (tr *traffic) changeCall(name string, k *trafficKey, c *trafficChange, expected int64, note string) call {
	return call{in: rb.Input{Kind: c.kind, Tenant: k.tenant, Order: k.requestID, RequestID: c.id, Expected: expected, Note: note},
		name: name, key: k, chg: c}
}

// learn records what an answer says about the order and the change.
func (tr *traffic) learn(c call, out rb.Output, unexpected string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.calls[c.name]++
	if unexpected != "" {
		tr.codes[c.name+": "+unexpected]++
	}
	decided := out.Result == rb.OK || out.Result == rb.Stale || out.Result == rb.Cancelled
	if decided && c.chg != nil && c.in.Expected == c.chg.expected && c.in.Note == c.chg.note {
		c.chg.answered = true
	}
	switch {
	case out.Result == rb.OK && c.in.Kind == rb.Create:
		c.key.floor = max(c.key.floor, 1)
	case out.Result == rb.OK && c.in.Kind == rb.List:
		c.key.version = max(c.key.version, out.Version)
	case out.Result == rb.OK:
		c.key.version = max(c.key.version, out.Version)
		c.key.floor = max(c.key.floor, out.Version)
	case out.Result == rb.Stale, out.Result == rb.Cancelled:
		c.key.version = max(c.key.version, out.Version)
		c.key.floor = max(c.key.floor, 1)
	}
}

// summary counts the calls sent by kind of traffic.
func (tr *traffic) summary() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var parts []string
	for _, name := range []string{"create", "duplicate", "conflicting-reuse", "late-retry", "cancel", "amend", "change-retry", "change-reuse", "get", "list"} {
		parts = append(parts, fmt.Sprintf("%s=%d", name, tr.calls[name]))
	}
	return strings.Join(parts, ",")
}

// unexpected is a copy of the unexpected answers counted so far.
func (tr *traffic) unexpected() map[string]int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return maps.Clone(tr.codes)
}

// rngReader reads random bytes from a seeded generator (for UUIDs).
type rngReader struct{ rng *rand.Rand }

func (r rngReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r.rng.Uint32())
	}
	return len(p), nil
}

// send makes the call on c and turns its answer into the history's output,
// and names an answer no call of this traffic should ever get.
func send(ctx context.Context, cl ordersv1.OrderServiceClient, c call) (rb.Output, string) {
	ctx, cancel := context.WithTimeout(ctx, robustCallTimeout)
	defer cancel()
	in := c.in
	switch in.Kind {
	case rb.Create:
		resp, err := cl.CreateOrder(ctx, &ordersv1.CreateOrderRequest{RequestId: in.RequestID, CustomerId: c.key.customer, Total: in.Total, Currency: "EUR"})
		if err != nil {
			return failed(err)
		}
		o := resp.GetOrder()
		return rb.Output{Result: rb.OK, OrderID: o.GetOrderId(), Total: o.GetTotal(), Replayed: resp.GetReplayed()}, ""
	case rb.Cancel:
		resp, err := cl.CancelOrder(ctx, &ordersv1.CancelOrderRequest{RequestId: in.RequestID, OrderId: c.key.orderID, ExpectedVersion: in.Expected})
		if err != nil {
			return failed(err)
		}
		return rb.Output{Result: rb.OK, OrderID: resp.GetOrder().GetOrderId(), Version: resp.GetVersion()}, ""
	case rb.Amend:
		resp, err := cl.AmendOrder(ctx, &ordersv1.AmendOrderRequest{RequestId: in.RequestID, OrderId: c.key.orderID,
			ExpectedVersion: in.Expected, ShippingNote: in.Note})
		if err != nil {
			return failed(err)
		}
		return rb.Output{Result: rb.OK, OrderID: resp.GetOrder().GetOrderId(), Version: resp.GetVersion()}, ""
	case rb.Get:
		resp, err := cl.GetOrder(ctx, &ordersv1.GetOrderRequest{OrderId: c.key.orderID})
		if err != nil {
			return failed(err)
		}
		return shownOrder(resp.GetOrder(), true), ""
	default:
		resp, err := cl.ListCustomerOrders(ctx, &ordersv1.ListCustomerOrdersRequest{CustomerId: c.key.customer})
		if err != nil {
			return failed(err)
		}
		for _, o := range resp.GetOrders() {
			if o.GetOrderId() == c.key.orderID {
				return shownOrder(o, false), ""
			}
		}
		return rb.Output{Result: rb.NotFound}, ""
	}
}

func shownOrder(o *ordersv1.Order, withNote bool) rb.Output {
	out := rb.Output{Result: rb.OK, OrderID: o.GetOrderId(), Total: o.GetTotal(), Version: o.GetVersion(), Status: rb.Open}
	if o.GetStatus() == ordersv1.OrderStatus_ORDER_STATUS_CANCELLED {
		out.Status = rb.Closed
	}
	if withNote {
		out.Note = o.GetShippingNote()
	}
	return out
}

// failed classifies a failed call: a decided answer the model knows, or
// Unknown. Answers this traffic must never get (a refused credential, an
// invalid request, an internal error) are Unknown too, and named.
func failed(err error) (rb.Output, string) {
	st := status.Convert(err)
	var reason string
	var meta map[string]string
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == client.ErrorDomain {
			reason, meta = info.GetReason(), info.GetMetadata()
		}
	}
	current, _ := strconv.ParseInt(meta["current_version"], 10, 64)
	switch {
	case reason == "REQUEST_ID_REUSED":
		return rb.Output{Result: rb.Reused}, ""
	case reason == "STALE_VERSION":
		return rb.Output{Result: rb.Stale, Version: current}, ""
	case reason == "ORDER_CANCELLED":
		return rb.Output{Result: rb.Cancelled, Version: current}, ""
	case st.Code() == codes.NotFound:
		return rb.Output{Result: rb.NotFound}, ""
	case st.Code() == codes.Unavailable, st.Code() == codes.DeadlineExceeded, st.Code() == codes.Aborted,
		st.Code() == codes.ResourceExhausted, st.Code() == codes.Canceled:
		return rb.Output{}, ""
	}
	return rb.Output{}, fmt.Sprintf("%s %s", st.Code(), reason)
}
