package robustness

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// Kind is what a call does.
type Kind int

const (
	Create Kind = iota + 1
	Cancel
	Amend
	Get  // GetOrder
	List // ListCustomerOrders of the order's customer
)

func (k Kind) String() string {
	switch k {
	case Create:
		return "create"
	case Cancel:
		return "cancel"
	case Amend:
		return "amend"
	case Get:
		return "get"
	case List:
		return "list"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// isChange reports whether k is CancelOrder or AmendOrder.
func (k Kind) isChange() bool { return k == Cancel || k == Amend }

// Input is one call as sent. Tenant and Order (the CreateOrder request id
// of the order the call is about) name the model partition it belongs to.
type Input struct {
	Kind   Kind
	Tenant string
	Order  string
	// RequestID is the call's idempotency key: Order for a create, the
	// change's own request id for a cancel or an amendment.
	RequestID string
	// Total is a create's payload (the customer is one per order, so the
	// total alone tells two payloads apart).
	Total string
	// Expected and Note are a change's payload (Note: amendments only).
	Expected int64
	Note     string
	// Floor is the newest version of the order that an answer returned
	// before this call was sent showed as written (0: none did): an
	// accepted create (1), an accepted change (its version), a conflict
	// (1: the order was found), a GetOrder (the version it showed; a
	// listing, written before the order row, says nothing of it). A read
	// shows at least Floor, and NOT_FOUND only while Floor is 0. It is
	// the real-time order of write answers and later calls, which the
	// sequential state cannot hold: orderd writes the order row after the
	// claim or version check that decides a write, so between the two a
	// read shows the order as it was.
	Floor int64
}

// Result is the kind of answer a call got.
type Result int

const (
	// Unknown: the answer says nothing of the outcome (UNAVAILABLE,
	// DEADLINE_EXCEEDED, a dropped connection, ...).
	Unknown Result = iota
	OK
	Reused    // REQUEST_ID_REUSED
	Stale     // STALE_VERSION, Version = current_version
	Cancelled // ORDER_CANCELLED, Version = current_version
	NotFound
)

func (r Result) String() string {
	return [...]string{"unknown", "ok", "REQUEST_ID_REUSED", "STALE_VERSION", "ORDER_CANCELLED", "NOT_FOUND"}[r]
}

// Status is an order's lifecycle state as a read shows it.
type Status int

const (
	Open Status = iota
	Closed
)

// Output is one call's answer.
type Output struct {
	Result Result
	// OrderID: the order a create answered or a read showed.
	OrderID string
	// Total: the order's total as a create answered it or a read showed it.
	Total string
	// Version: a change's new version (OK) or the order's current version
	// (Stale, Cancelled); the version a read showed.
	Version int64
	// Status and Note: what a read showed (a List shows no note).
	Status Status
	Note   string
	// Replayed: a create's replayed flag.
	Replayed bool
}

func (o Output) String() string {
	switch o.Result {
	case OK:
		return fmt.Sprintf("ok(order %.8s total %s v%d status %d note %q replayed %v)", o.OrderID, o.Total, o.Version, o.Status, o.Note, o.Replayed)
	case Stale, Cancelled:
		return fmt.Sprintf("%s(current v%d)", o.Result, o.Version)
	}
	return o.Result.String()
}

// History records calls from many goroutines. Times are nanoseconds since
// the history began, from the monotonic clock.
type History struct {
	mu    sync.Mutex
	start time.Time
	ops   []porcupine.Operation
}

// NewHistory starts an empty history.
func NewHistory() *History { return &History{start: time.Now()} }

// Call is one call in flight.
type Call struct {
	h      *History
	client int
	input  Input
	call   int64
}

// Invoke notes that client sends in now.
func (h *History) Invoke(client int, in Input) *Call {
	return &Call{h: h, client: client, input: in, call: time.Since(h.start).Nanoseconds()}
}

// Return records the call's answer. An Unknown answer to a write is
// recorded as returning at the end of time: it may take effect at any
// point after it was sent, even after the run. A read that got no answer
// says nothing and is not recorded.
func (c *Call) Return(out Output) {
	ret := time.Since(c.h.start).Nanoseconds()
	if out.Result == Unknown {
		if c.input.Kind == Get || c.input.Kind == List {
			return
		}
		ret = math.MaxInt64
	}
	c.h.add(porcupine.Operation{ClientId: c.client, Input: c.input, Call: c.call, Output: out, Return: ret})
}

func (h *History) add(op porcupine.Operation) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, op)
}

// Operations returns a copy of the recorded operations.
func (h *History) Operations() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]porcupine.Operation(nil), h.ops...)
}
