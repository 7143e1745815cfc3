package workflow

import (
	"context"
	"slices"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/ledger"
)

// RequestState is a write request's state as its client sees it.
type RequestState string

// The states a Request can be in: the ledger's, once resolved (Resolve).
const (
	RequestPending  = RequestState(ledger.Pending)
	RequestComplete = RequestState(ledger.Complete)
	RequestFailed   = RequestState(ledger.Failed)
)

// Request is a write request as its client sees it (GetRequest,
// ListRequests, RequeueRequest): its ledger row, resolved (a PENDING row
// whose work is recorded is COMPLETE).
type Request struct {
	RequestID   uuid.UUID
	Tenant      string
	Operation   string
	State       RequestState
	OrderID     uuid.UUID
	Fingerprint string
	CreatedAt   time.Time
	CompletedAt time.Time // zero unless COMPLETE or FAILED
	// Attempts is the number of attempts that ended without finishing
	// the request.
	Attempts int
	// LastError is what the ledger recorded of the last failed attempt: a
	// stable reason (fault.Reason), or, from a version older than that
	// rule, anything; the transport decides what a client may see of it.
	LastError string
}

// requestOf is rec as its client sees it; rec is already resolved.
func requestOf(rec ledger.Record) Request {
	return Request{RequestID: rec.RequestID, Tenant: rec.Tenant, Operation: rec.Operation, State: RequestState(rec.State),
		OrderID: rec.EntityID, Fingerprint: rec.Fingerprint, CreatedAt: rec.CreatedAt, CompletedAt: rec.CompletedAt,
		Attempts: rec.Attempts, LastError: rec.LastError}
}

// RequestLedger is what the operators' calls need of the ledger beyond
// the workflow's ledger.Store: its paged scan and requeue (ledger.Ledger).
type RequestLedger interface {
	// Scan pages through the ledger: at most limit records that pass f,
	// and where the next page starts (nil when the scan is done).
	Scan(ctx context.Context, f ledger.ScanFilter, limit int, next []byte) (ledger.ScanPage, error)
	// Requeue gives a FAILED request another round of attempts.
	Requeue(ctx context.Context, key ledger.Key) (ledger.Record, error)
}

// Requests is the write requests' door for their clients and operators:
// one request's view (GetRequest), the listing of unfinished ones
// (ListRequests) and the requeue of a dead-lettered one (RequeueRequest
// and `orderd requeue` alike, so both answer the same for the same
// ledger). Every view it gives is resolved as GetRequest's is.
type Requests struct {
	svc    *Service
	ledger RequestLedger // nil: List and Requeue are not served
}

// NewRequests returns the requests' use cases over svc; l may be nil in a
// process that serves no operators' calls (Operable reports false).
func NewRequests(svc *Service, l RequestLedger) *Requests {
	return &Requests{svc: svc, ledger: l}
}

// Operable reports whether List and Requeue are served (a RequestLedger
// was given).
func (r *Requests) Operable() bool { return r != nil && r.ledger != nil }

// Get returns a request as its client would see it (Service.Request).
func (r *Requests) Get(ctx context.Context, tenant, operation string, requestID uuid.UUID) (Request, error) {
	if err := r.svc.admit(Admission.Read, tenant); err != nil {
		return Request{}, err
	}
	rec, err := r.svc.Request(ctx, tenant, operation, requestID)
	if err != nil {
		return Request{}, err
	}
	return requestOf(rec), nil
}

// RequestsPage is one slice of a listing of requests.
type RequestsPage struct {
	Requests []Request
	// Next is where the scan resumes, nil when it is done: raw and
	// unauthenticated (the transport signs it into its page token).
	Next []byte
}

// resolveConcurrency bounds the reads one List call makes at once to
// resolve PENDING rows.
const resolveConcurrency = 16

// List is one bounded slice of the ledger scan from next (nil: the
// start), keeping tenant's requests that are, once resolved, in one of
// states (PENDING, FAILED): at most size of them.
func (r *Requests) List(ctx context.Context, tenant string, states []RequestState, size int, next []byte) (RequestsPage, error) {
	if err := r.svc.admit(Admission.Read, tenant); err != nil {
		return RequestsPage{}, err
	}
	f := ledger.ScanFilter{Tenant: tenant, Resolve: r.resolveAll}
	for _, st := range states {
		f.States = append(f.States, ledger.State(st))
	}
	f.Keep = func(rec ledger.Record) bool { return slices.Contains(f.States, rec.State) }
	page, err := r.ledger.Scan(ctx, f, size, next)
	if err != nil {
		return RequestsPage{}, err
	}
	out := RequestsPage{Next: page.Next}
	for _, rec := range page.Records {
		out.Requests = append(out.Requests, requestOf(rec))
	}
	return out, nil
}

// resolveAll is List's scan step: a ledger row that says PENDING may be a
// finished request (a create's completion writes nothing to the ledger),
// so each is resolved as Get would (Resolve: one read of the order or of
// the change's version). FAILED rows are final as they stand.
func (r *Requests) resolveAll(ctx context.Context, recs []ledger.Record) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(resolveConcurrency)
	for i := range recs {
		if recs[i].State != ledger.Pending {
			continue
		}
		g.Go(func() error {
			var err error
			recs[i], err = r.svc.Resolve(gctx, recs[i])
			return err
		})
	}
	return g.Wait()
}

// Requeue gives tenant's FAILED CreateOrder request requestID another
// round of attempts by the reconciler (ledger.Ledger.Requeue: it becomes
// PENDING with attempts 0 and due entries a few seconds on; a PENDING one
// gets the entries and stays as it is; a COMPLETE one is left alone), and
// returns the request as it then is, as Get would show it: a finished
// create's ledger row still says PENDING (its completion writes nothing
// there), and its requeue answers COMPLETE, not PENDING. An error after
// the ledger's requeue (the resolving read) leaves the requeue done:
// running it again is safe.
func (r *Requests) Requeue(ctx context.Context, tenant string, requestID uuid.UUID) (Request, error) {
	rec, err := r.ledger.Requeue(ctx, ledger.Key{Tenant: tenant, Operation: order.OperationCreate, RequestID: requestID})
	if err != nil {
		return Request{}, err
	}
	if rec, err = r.svc.Resolve(ctx, rec); err != nil {
		return Request{}, err
	}
	return requestOf(rec), nil
}
