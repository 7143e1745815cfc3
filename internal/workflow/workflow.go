// Package workflow is the retry-safe CreateOrder workflow of design doc 000
// §4: validate and fingerprint the command, claim the request in the ledger,
// project the order with deterministic writes, mark the request COMPLETE with
// its recorded outcome, and answer duplicates from that record.
//
// Finish is the one way work gets done, whether by the attempt that claimed
// the request, by a retry that finds it PENDING, or by the reconciler: it
// rebuilds everything from the ledger row, so whoever runs it writes the
// same rows.
package workflow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/failpoint"
	"github.com/atlasmart/orderd/internal/fault"
	"github.com/atlasmart/orderd/internal/order"
	"github.com/atlasmart/orderd/ledger"
)

// Projector writes and reads an order's projections; every write must be
// safe to replay.
type Projector interface {
	// Write projects o into every read table; nil only when all are confirmed.
	Write(ctx context.Context, o order.Order) error
	// Order reads the order with id as its first write left it (LOCAL_QUORUM);
	// an error of kind NotFound if there is none.
	Order(ctx context.Context, tenant string, id uuid.UUID) (order.Order, error)
}

// Config tunes the workflow. Zero fields take defaults.
type Config struct {
	// Tenant scopes every request id and order; default "default".
	Tenant string
	// TakeoverAfter is how old a PENDING request must be before a duplicate
	// stops waiting for the attempt that claimed it and finishes the work
	// itself; default 1 s. Younger ones are presumed in flight.
	TakeoverAfter time.Duration
	// MaxWait bounds how long a duplicate waits for a PENDING request when its
	// context has no deadline; default 5 s.
	MaxWait time.Duration
	// PollInterval is the first pause between reads while waiting; it doubles
	// up to 8 times that; default 25 ms.
	PollInterval time.Duration
	// Observer is told how every CreateOrder attempt ended (for metrics);
	// nil observes nothing.
	Observer Observer
	// ReplayCacheSize bounds the in-process cache of recent recorded
	// outcomes that answers duplicates without a ledger read; default
	// 10,000 (a few MB); negative disables it.
	ReplayCacheSize int
}

func (c Config) withDefaults() Config {
	if c.Tenant == "" {
		c.Tenant = "default"
	}
	if c.TakeoverAfter == 0 {
		c.TakeoverAfter = time.Second
	}
	if c.MaxWait == 0 {
		c.MaxWait = 5 * time.Second
	}
	if c.PollInterval == 0 {
		c.PollInterval = 25 * time.Millisecond
	}
	if c.Observer == nil {
		c.Observer = nopObserver{}
	}
	if c.ReplayCacheSize == 0 {
		c.ReplayCacheSize = 10_000
	}
	return c
}

// Outcome names how one CreateOrder attempt ended, for metrics and logs.
type Outcome string

const (
	OutcomeNew            Outcome = "new"             // this attempt claimed the request and created the order
	OutcomeReplayed       Outcome = "replayed"        // answered with the outcome an earlier attempt recorded
	OutcomeTakeover       Outcome = "takeover"        // a duplicate found the request PENDING and finished it itself
	OutcomeConflict       Outcome = "conflict"        // the request id is bound to another command (REQUEST_ID_REUSED)
	OutcomeInProgress     Outcome = "in_progress"     // another attempt holds the request
	OutcomeFailedRequest  Outcome = "failed_request"  // the request is dead-lettered (REQUEST_FAILED)
	OutcomeUnavailable    Outcome = "unavailable"     // not done (yet): the cluster refused or a write failed
	OutcomeOutcomeUnknown Outcome = "outcome_unknown" // a write may have applied and could not be settled
	OutcomeInvalid        Outcome = "invalid"         // bad input; nothing written
	OutcomeInternal       Outcome = "internal"        // anything else (a bug)
)

// Outcomes lists every Outcome.
func Outcomes() []Outcome {
	return []Outcome{OutcomeNew, OutcomeReplayed, OutcomeTakeover, OutcomeConflict, OutcomeInProgress,
		OutcomeFailedRequest, OutcomeUnavailable, OutcomeOutcomeUnknown, OutcomeInvalid, OutcomeInternal}
}

// OutcomeOf names the outcome of an attempt that ended with err.
func OutcomeOf(err error) Outcome {
	switch fault.KindOf(err) {
	case fault.Invalid:
		return OutcomeInvalid
	case fault.Conflict:
		return OutcomeConflict
	case fault.InProgress:
		return OutcomeInProgress
	case fault.Failed:
		return OutcomeFailedRequest
	case fault.Unavailable:
		return OutcomeUnavailable
	case fault.OutcomeUnknown:
		return OutcomeOutcomeUnknown
	}
	return OutcomeInternal
}

// Observer is told what the workflow decided. Implementations must be cheap
// and safe for concurrent use; the metrics package provides one.
type Observer interface {
	// CreateOutcome is called once per CreateOrder attempt.
	CreateOutcome(Outcome)
	// RetryAge is called when an attempt loses the claim to an earlier
	// attempt of the same command: age is the time since that first claim
	// (how long clients keep retrying, to compare with the retention).
	RetryAge(age time.Duration)
	// ReplayCached is called when a duplicate was answered from the
	// in-process replay cache, without reading the ledger.
	ReplayCached()
}

type nopObserver struct{}

func (nopObserver) CreateOutcome(Outcome)  {}
func (nopObserver) RetryAge(time.Duration) {}
func (nopObserver) ReplayCached()          {}

// Service runs the workflow.
type Service struct {
	cfg        Config
	ledger     ledger.Store
	projector  Projector
	failpoints *failpoint.Set
	replays    replayCache
	log        *slog.Logger
	now        func() time.Time
}

// New returns a Service. failpoints may be nil.
func New(cfg Config, l ledger.Store, p Projector, failpoints *failpoint.Set, log *slog.Logger) *Service {
	cfg = cfg.withDefaults()
	return &Service{cfg: cfg, ledger: l, projector: p, failpoints: failpoints, replays: newReplayCache(cfg.ReplayCacheSize),
		log: log, now: time.Now}
}

// Tenant is the tenant this service acts for.
func (s *Service) Tenant() string { return s.cfg.Tenant }

// Result is the answer to one CreateOrder attempt.
type Result struct {
	Order order.Order
	// Replayed: the order was created by an earlier attempt of the same
	// request; this answer is its recorded outcome.
	Replayed bool
	// Outcome is OutcomeNew, OutcomeReplayed or OutcomeTakeover; a failed
	// attempt's is OutcomeOf(err).
	Outcome Outcome
}

// CreateOrder runs one attempt of a CreateOrder command. Errors are
// *fault.Error: Invalid (nothing written), Conflict (request id bound to
// another command), InProgress (another attempt holds it), Failed (dead
// letter), Unavailable or OutcomeUnknown (retry with the same request id).
// Every attempt's outcome is reported to the Config's Observer.
func (s *Service) CreateOrder(ctx context.Context, in order.Input) (Result, error) {
	res, err := s.createOrder(ctx, in)
	outcome := res.Outcome
	if err != nil {
		outcome = OutcomeOf(err)
	}
	s.cfg.Observer.CreateOutcome(outcome)
	return res, err
}

func (s *Service) createOrder(ctx context.Context, in order.Input) (Result, error) {
	requestID, cmd, err := order.Canonicalize(in)
	if err != nil {
		return Result{}, err
	}
	key := s.key(requestID)
	encoded := cmd.Encode() // stored and fingerprinted: encode once
	fingerprint := order.Fingerprint(encoded)
	if hit, ok := s.replays.get(key); ok {
		return s.cachedReplay(hit, fingerprint)
	}
	res, err := s.claimAndAnswer(ctx, ledger.Record{
		Key:         key,
		EntityID:    order.ID(key.Tenant, requestID),
		Fingerprint: fingerprint,
		Command:     encoded,
		// Milliseconds: what a Cassandra timestamp keeps, so the order
		// built now equals the one rebuilt from the stored row later.
		CreatedAt:  s.now().UTC().Truncate(time.Millisecond),
		ClaimToken: uuid.New(),
	})
	if err == nil {
		// Recorded: the ledger holds this outcome as COMPLETE for good.
		s.replays.add(key, fingerprint, res.Order)
	}
	return res, err
}

// cachedReplay answers a duplicate from the replay cache: the recorded
// outcome if the command is the one recorded, REQUEST_ID_REUSED if not.
func (s *Service) cachedReplay(hit cachedOutcome, fingerprint string) (Result, error) {
	if hit.fingerprint != fingerprint {
		return Result{}, fault.New(fault.ReasonRequestIDReused, nil)
	}
	s.cfg.Observer.ReplayCached()
	s.cfg.Observer.RetryAge(max(0, s.now().UTC().Truncate(time.Millisecond).Sub(hit.order.CreatedAt)))
	return Result{Order: hit.order, Replayed: true, Outcome: OutcomeReplayed}, nil
}

// claimAndAnswer claims the request with claim, then does the work or
// answers from the earlier attempt that holds it.
func (s *Service) claimAndAnswer(ctx context.Context, claim ledger.Record) (Result, error) {
	won, cur, err := s.ledger.Claim(ctx, claim)
	if err != nil {
		return Result{}, err
	}
	if won {
		if err := s.failpoints.Eval(failpoint.AfterClaim); err != nil {
			return Result{}, err
		}
		o, err := s.finishNoting(ctx, cur)
		if err != nil {
			return Result{}, err
		}
		if !o.CreatedAt.Equal(cur.CreatedAt) {
			// The order predates this claim: an earlier claim of the same
			// request id wrote it and its ledger row has expired since.
			// This answer is that order's replay.
			return Result{Order: o, Replayed: true, Outcome: OutcomeReplayed}, nil
		}
		return Result{Order: o, Outcome: OutcomeNew}, nil
	}
	if cur.Fingerprint != claim.Fingerprint {
		return Result{}, fault.New(fault.ReasonRequestIDReused, nil)
	}
	// A retry of an earlier attempt: how late retries come decides whether
	// the retention is long enough.
	s.cfg.Observer.RetryAge(max(0, claim.CreatedAt.Sub(cur.CreatedAt)))
	return s.duplicate(ctx, cur)
}

// duplicate answers an attempt of a request that an earlier attempt claimed.
func (s *Service) duplicate(ctx context.Context, cur ledger.Record) (Result, error) {
	waitUntil := s.now().Add(s.cfg.MaxWait)
	if d, ok := ctx.Deadline(); ok {
		// Keep enough of the deadline to finish the work or answer.
		waitUntil = d.Add(-s.cfg.TakeoverAfter / 2)
	}
	pause := s.cfg.PollInterval
	for {
		switch cur.State {
		case ledger.Complete:
			o, err := order.DecodeOutcome(cur.Outcome)
			if err != nil {
				return Result{}, err
			}
			return Result{Order: o, Replayed: true, Outcome: OutcomeReplayed}, nil
		case ledger.Failed:
			return Result{}, fault.New(fault.ReasonRequestFailed, nil)
		}
		// PENDING: an attempt is in flight or died. The writes are
		// deterministic, so once it is old enough this attempt finishes it.
		if s.now().Sub(cur.CreatedAt) >= s.cfg.TakeoverAfter {
			o, err := s.finishNoting(ctx, cur)
			if err != nil {
				return Result{}, err
			}
			return Result{Order: o, Replayed: true, Outcome: OutcomeTakeover}, nil
		}
		if s.now().Add(pause).After(waitUntil) {
			return Result{}, fault.New(fault.ReasonRequestInProgress, nil).WithRetryAfter(s.cfg.TakeoverAfter)
		}
		select {
		case <-ctx.Done():
			return Result{}, fault.New(fault.ReasonRequestInProgress, ctx.Err()).WithRetryAfter(s.cfg.TakeoverAfter)
		case <-time.After(pause):
		}
		pause = min(2*pause, 8*s.cfg.PollInterval)
		next, err := s.ledger.Peek(ctx, cur.Key)
		if err != nil {
			return Result{}, err
		}
		cur = next
	}
}

// Finish does the work of a claimed request from its ledger row alone:
// project the order, then mark the request COMPLETE with the order as its
// recorded outcome. It is safe to run any number of times, concurrently, by
// anyone; it returns the recorded outcome. It does not note failures on the
// ledger: its caller does.
//
// The first write of an order is authoritative. The order id derives from
// the request id, so before writing, Finish reads the order's row
// (orders_by_id, always written first): if an earlier claim of this request
// id (whose ledger row has expired since) wrote it, that order is the
// outcome — its projections are rewritten as they were, never with this
// claim's time — and a command that differs from it is rejected
// (REQUEST_ID_REUSED): the claim is withdrawn and nothing is written.
//
// Errors: a *fault.Error of kind Unavailable or OutcomeUnknown (retry;
// projections may exist), Conflict (the claim was withdrawn), Failed (the
// request was set aside), or one wrapping ledger.ErrUnfinishable (the stored
// command cannot be read; nothing was written).
func (s *Service) Finish(ctx context.Context, rec ledger.Record) (order.Order, error) {
	if rec.State == ledger.Complete {
		return order.DecodeOutcome(rec.Outcome)
	}
	cmd, err := order.DecodeCommand(rec.Command)
	if err != nil {
		return order.Order{}, fault.New(fault.ReasonCommandUnreadable,
			fmt.Errorf("request %s: %w: %w", rec.RequestID, ledger.ErrUnfinishable, err))
	}
	o := order.New(rec.Tenant, rec.RequestID, cmd, rec.CreatedAt)
	first, err := s.projector.Order(ctx, rec.Tenant, o.ID)
	switch {
	case err == nil && !first.Carries(cmd):
		return order.Order{}, s.withdraw(ctx, rec)
	case err == nil:
		o = first
	case fault.KindOf(err) != fault.NotFound:
		return order.Order{}, err
	}
	if err := s.projector.Write(ctx, o); err != nil {
		return order.Order{}, err
	}
	if err := s.failpoints.Eval(failpoint.BeforeComplete); err != nil {
		return order.Order{}, err
	}
	done, err := s.ledger.Complete(ctx, rec, o.EncodeOutcome(), s.now().UTC().Truncate(time.Millisecond))
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		return order.Order{}, fault.New(fault.ReasonClusterUnavailable, fmt.Errorf("request %s: claim gone before completion", rec.RequestID))
	case err != nil:
		return order.Order{}, err
	}
	switch done.State {
	case ledger.Complete:
		return order.DecodeOutcome(done.Outcome)
	case ledger.Failed:
		return order.Order{}, fault.New(fault.ReasonRequestFailed, nil)
	default:
		return order.Order{}, fmt.Errorf("request %s: state %s after completing it", rec.RequestID, done.State)
	}
}

// withdraw removes a claim whose command differs from the order its request
// id already has, and answers REQUEST_ID_REUSED.
func (s *Service) withdraw(ctx context.Context, rec ledger.Record) error {
	cur, err := s.ledger.Withdraw(ctx, rec)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		return fault.New(fault.ReasonRequestIDReused, nil)
	case err != nil:
		return err
	}
	return fmt.Errorf("request %s: withdrawing a conflicting claim found it %s", rec.RequestID, cur.State)
}

// finishNoting is Finish for a handler's attempt: a failure that may be
// cured by another attempt is also noted on the ledger (attempts,
// last_error as a stable reason), best effort — the request stays PENDING
// either way and the caller reports the first error. A call whose own
// context ended is not an attempt that failed: the client gave up waiting,
// nothing was wrong with the request. (The reconciler notes its own
// attempts: it decides on dead-lettering from them.)
func (s *Service) finishNoting(ctx context.Context, rec ledger.Record) (order.Order, error) {
	o, err := s.Finish(ctx, rec)
	if err != nil && ctx.Err() == nil && retryable(err) {
		s.noteFailure(ctx, rec, err)
	}
	return o, err
}

// retryable: the request is still PENDING and another attempt may finish it.
func retryable(err error) bool {
	switch fault.KindOf(err) {
	case fault.Unavailable, fault.OutcomeUnknown:
		return true
	}
	return false
}

func (s *Service) noteFailure(ctx context.Context, rec ledger.Record, cause error) {
	if err := s.ledger.RecordAttempt(context.WithoutCancel(ctx), rec, string(fault.ReasonOf(cause))); err != nil {
		s.log.Warn("could not record a failed attempt", "request_id", rec.RequestID, "error", err)
	}
}

// Request returns the ledger's view of a request (LOCAL_SERIAL);
// ledger.ErrNotFound (kind NotFound) if none is recorded.
func (s *Service) Request(ctx context.Context, operation string, requestID uuid.UUID) (ledger.Record, error) {
	return s.ledger.Get(ctx, ledger.Key{Tenant: s.cfg.Tenant, Operation: operation, RequestID: requestID})
}

func (s *Service) key(requestID uuid.UUID) ledger.Key {
	return ledger.Key{Tenant: s.cfg.Tenant, Operation: order.Operation, RequestID: requestID}
}
