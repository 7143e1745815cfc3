// Package workflow is the retry-safe CreateOrder workflow: validate and fingerprint the command, claim the request in the ledger,
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
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/platform/failpoint"
	"github.com/atlasmart/orderd/internal/platform/lograte"
	"github.com/atlasmart/orderd/internal/platform/tracing"
	"github.com/atlasmart/orderd/ledger"
	"github.com/atlasmart/orderd/projection"
)

// Projector writes and reads an order's projections; every write must be
// safe to replay.
type Projector interface {
	// Write projects o into every read table; nil only when all are confirmed.
	Write(ctx context.Context, o order.Order) error
	// Order reads the order with id (LOCAL_QUORUM): its creation's values
	// with the version, status and note the newest projected change left;
	// an error of kind NotFound if there is none.
	Order(ctx context.Context, tenant string, id uuid.UUID) (order.Order, error)
	// WriteChange projects an accepted change of o (o as the change left
	// it); nil only when all writes are confirmed.
	WriteChange(ctx context.Context, o order.Order, c order.Change) error
	// ChangeEvents reads what the order's event rows record of its
	// accepted changes, oldest version first.
	ChangeEvents(ctx context.Context, tenant string, id uuid.UUID) ([]projection.ChangeEvent, error)
}

// Publisher publishes an order event (internal/adapters/outbox). Publish returns nil
// only once the broker acknowledged the record; any error leaves the
// event's delivery to a later attempt, which publishes the same event id
// again.
type Publisher interface {
	Publish(ctx context.Context, ev order.Event) error
}

// Admission rate-limits a tenant's calls (internal/adapters/limit). Each returns
// nil to go on, or a RATE_LIMITED fault: the call is refused before it does
// anything.
type Admission interface {
	// Attempt admits a call that will reach the database.
	Attempt(tenant string) error
	// Replay admits a duplicate answered from the replay cache.
	Replay(tenant string) error
	// Read admits a read: GetOrder, GetRequest, one call of a listing.
	Read(tenant string) error
}

// Config tunes the workflow. Zero fields take defaults.
type Config struct {
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
	// Publisher, if set, delivers every recorded order's event: a request's
	// due entry is released only after its event was acknowledged
	// (docs/outbox.md). Nil: no events; the entry goes once the order is
	// recorded.
	Publisher Publisher
	// PublishTimeout bounds one publication of an event; default 10 s.
	PublishTimeout time.Duration
	// MaxBackground bounds the deliveries and releases that run after the
	// answer at once; default 10,000 (the Kafka producer buffers as many
	// records). While a broker outage or a slow cluster keeps that many in
	// flight, a request answered meanwhile leaves its event and its entry
	// to the reconciler (which publishes it after the grace) instead of
	// starting one more: their number, and the memory they hold, stay
	// bounded however long the outage lasts.
	MaxBackground int
	// Admission, if set, rate-limits each tenant's calls; nil admits all.
	Admission Admission
	// Versions is the orders' authoritative version, which CancelOrder and
	// AmendOrder need (internal/stores/versions); nil refuses them as internal.
	Versions Versions
	// Clock, if set, says whether this process's clock is close enough to
	// the cluster's to date a claim (clockskew.Monitor.Check): a claim's
	// time and its due entry's are this clock's, and the reconciler's
	// decisions are safe only while both clocks are within the bound. An
	// error refuses the claim (it is never sent); a request already
	// recorded is still answered. Nil: always close enough.
	Clock func() error
	// Now is this process's clock; default time.Now.
	Now func() time.Time
	// Enabled, if set, says whether a change operation (CancelOrder,
	// AmendOrder) may be claimed: nil only while every live reconciler
	// finishes it (reconciler.Fleet.Finishes), since any of them may meet
	// the request's due entry. An error refuses the claim (it is never
	// sent); a change already recorded is still answered. CreateOrder, which
	// every release finishes, never asks. Nil: every operation is enabled.
	Enabled func(ctx context.Context, op string) error
}

func (c Config) withDefaults() Config {
	if c.Now == nil {
		c.Now = time.Now
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
	if c.PublishTimeout == 0 {
		c.PublishTimeout = 10 * time.Second
	}
	if c.MaxBackground <= 0 {
		c.MaxBackground = 10_000
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
	OutcomeLimited        Outcome = "limited"         // the tenant is over its rate; nothing done
	OutcomeStale          Outcome = "stale"           // a change's expected version was not the order's (recorded)
	OutcomeRejected       Outcome = "rejected"        // a change of a cancelled order (recorded)
	OutcomeNotFound       Outcome = "not_found"       // a change of no such order; nothing written
	OutcomeInternal       Outcome = "internal"        // anything else (a bug)
)

// Outcomes lists every Outcome.
func Outcomes() []Outcome {
	return []Outcome{OutcomeNew, OutcomeReplayed, OutcomeTakeover, OutcomeConflict, OutcomeInProgress,
		OutcomeFailedRequest, OutcomeUnavailable, OutcomeOutcomeUnknown, OutcomeInvalid, OutcomeLimited,
		OutcomeStale, OutcomeRejected, OutcomeNotFound, OutcomeInternal}
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
	case fault.Limited:
		return OutcomeLimited
	case fault.Stale:
		return OutcomeStale
	case fault.Rejected:
		return OutcomeRejected
	case fault.NotFound:
		return OutcomeNotFound
	}
	return OutcomeInternal
}

// Observer is told what the workflow decided. Implementations must be cheap
// and safe for concurrent use; the metrics package provides one.
type Observer interface {
	// CreateOutcome is called once per CreateOrder attempt.
	CreateOutcome(Outcome)
	// ChangeOutcome is called once per CancelOrder or AmendOrder attempt,
	// with its operation (order.OperationCancel, order.OperationAmend).
	ChangeOutcome(operation string, o Outcome)
	// RetryAge is called when an attempt loses the claim to an earlier
	// attempt of the same command: age is the time since that first claim
	// (how long clients keep retrying, to compare with the retention).
	RetryAge(age time.Duration)
	// ReplayCached is called when a duplicate was answered from the
	// in-process replay cache, without reading the ledger.
	ReplayCached()
	// BackgroundSkipped is called when a delivery or release after the
	// answer was not started because Config.MaxBackground were in flight:
	// the reconciler does it once the entry falls due.
	BackgroundSkipped()
}

type nopObserver struct{}

func (nopObserver) CreateOutcome(Outcome)         {}
func (nopObserver) ChangeOutcome(string, Outcome) {}
func (nopObserver) RetryAge(time.Duration)        {}
func (nopObserver) ReplayCached()                 {}
func (nopObserver) BackgroundSkipped()            {}

// Service runs the workflow.
type Service struct {
	cfg        Config
	ledger     ledger.Store
	projector  Projector
	failpoints *failpoint.Set
	replays    replayCache
	log        *slog.Logger
	warns      *lograte.Sampler[string] // per-request WARN lines, by message
	now        func() time.Time
	delivery   *delivery // every event's publication and the release of the entry that owes it
}

// New returns a Service. failpoints may be nil.
func New(cfg Config, l ledger.Store, p Projector, failpoints *failpoint.Set, log *slog.Logger) *Service {
	cfg = cfg.withDefaults()
	s := &Service{cfg: cfg, ledger: l, projector: p, failpoints: failpoints, replays: newReplayCache(cfg.ReplayCacheSize),
		log: log, warns: lograte.New[string](nil), now: cfg.Now}
	s.delivery = &delivery{publisher: cfg.Publisher, timeout: cfg.PublishTimeout, ledger: l, failpoints: failpoints, warn: s.warn,
		slots: make(chan struct{}, cfg.MaxBackground), skipped: cfg.Observer.BackgroundSkipped}
	return s
}

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
// Every attempt's outcome is reported to the Config's Observer. tenant is
// the caller's verified tenant: it scopes the request id and the order.
func (s *Service) CreateOrder(ctx context.Context, tenant string, in order.Input) (Result, error) {
	res, err := s.createOrder(ctx, tenant, in)
	outcome := res.Outcome
	if err != nil {
		outcome = OutcomeOf(err)
	}
	s.cfg.Observer.CreateOutcome(outcome)
	return res, err
}

func (s *Service) createOrder(ctx context.Context, tenant string, in order.Input) (Result, error) {
	if tenant == "" {
		return Result{}, fault.New(fault.ReasonInternal, errors.New("no tenant: the caller's identity was not established"))
	}
	requestID, cmd, err := order.Canonicalize(in)
	if err != nil {
		return Result{}, err
	}
	key := ledger.Key{Tenant: tenant, Operation: order.OperationCreate, RequestID: requestID}
	encoded := cmd.Encode() // stored and fingerprinted: encode once
	fingerprint := order.Fingerprint(encoded)
	if hit, ok := s.replays.get(key); ok {
		if err := s.admit(Admission.Replay, key.Tenant); err != nil {
			return Result{}, err
		}
		return s.cachedReplay(hit, fingerprint)
	}
	if err := s.admit(Admission.Attempt, key.Tenant); err != nil {
		return Result{}, err
	}
	if err := s.failpoints.Eval(failpoint.BeforeClaim); err != nil {
		return Result{}, err
	}
	res, err := s.answer(ctx, cmd, ledger.Record{
		Key:         key,
		EntityID:    order.ID(key.Tenant, requestID),
		Fingerprint: fingerprint,
		Command:     encoded,
		// Milliseconds: what a Cassandra timestamp keeps, so the order
		// built now equals the one rebuilt from the stored row later.
		CreatedAt:   s.now().UTC().Truncate(time.Millisecond),
		ClaimToken:  uuid.New(),
		TraceParent: tracing.TraceParent(ctx),
	})
	if err == nil {
		// Recorded: the order row exists and never changes for this request.
		s.replays.add(key, fingerprint, res.Order)
	}
	return res, err
}

// Operations are the operations whose requests Settle finishes: what this
// release's reconcilers say they finish (leases.NewCassandraCoordinator).
func Operations() []string {
	return []string{order.OperationCreate, order.OperationCancel, order.OperationAmend}
}

// mayClaim is nil while a claim of operation op may be sent: this
// process's clock may date it (Config.Clock), and, for a change, every live
// reconciler finishes its operation (Config.Enabled; CreateOrder, which
// every release finishes, never asks).
func (s *Service) mayClaim(ctx context.Context, op string) error {
	if s.cfg.Clock != nil {
		if err := s.cfg.Clock(); err != nil {
			return err
		}
	}
	if op == order.OperationCreate || s.cfg.Enabled == nil {
		return nil
	}
	return s.cfg.Enabled(ctx, op)
}

// admit asks the configured Admission (if any) to let one call of tenant
// through, before it does anything.
func (s *Service) admit(budget func(Admission, string) error, tenant string) error {
	if s.cfg.Admission == nil {
		return nil
	}
	return budget(s.cfg.Admission, tenant)
}

// cachedReplay answers a duplicate from the replay cache: the recorded
// outcome if the command is the one recorded, REQUEST_ID_REUSED if not.
func (s *Service) cachedReplay(hit cachedOutcome, fingerprint string) (Result, error) {
	if hit.fingerprint != fingerprint {
		return Result{}, fault.New(fault.ReasonRequestIDReused, nil)
	}
	s.cfg.Observer.ReplayCached()
	s.observeRetry(hit.order.CreatedAt)
	return Result{Order: hit.order, Replayed: true, Outcome: OutcomeReplayed}, nil
}

// answer runs the request's attempt past the cache: it answers from the
// recorded outcome if there is one, else claims the request with claim and
// does the work, or answers from the earlier attempt that holds it.
func (s *Service) answer(ctx context.Context, cmd order.Command, claim ledger.Record) (Result, error) {
	// The order row is the recorded outcome: a plain read, no Paxos round.
	// It runs alongside the write of the claim's due entry (one round trip
	// instead of two before the claim); if it answers, or fails, the claim
	// is never sent and the entry, if written, is released.
	var (
		prior    order.Order // the recorded order, if done
		done     bool
		checkErr error // the read's own failure
	)
	won, cur, err := s.ledger.Claim(ctx, claim, func(ctx context.Context) error {
		prior, done, checkErr = s.recorded(ctx, claim.Tenant, claim.EntityID, cmd)
		if done {
			return errRecorded
		}
		if checkErr == nil {
			checkErr = s.mayClaim(ctx, order.OperationCreate)
		}
		return checkErr
	})
	if done || checkErr != nil {
		s.delivery.releaseLater(ctx, claim) // the claim was never sent; its entry may exist
	}
	switch {
	case done:
		s.observeRetry(prior.CreatedAt)
		return Result{Order: prior, Replayed: true, Outcome: OutcomeReplayed}, nil
	case err != nil:
		return Result{}, err
	}
	if won {
		if err := s.failpoints.Eval(failpoint.AfterClaim); err != nil {
			return Result{}, err
		}
		// No order row a moment ago and the claim is ours: write it (a
		// finisher holding an expired claim is the one exception, see
		// docs/architecture.md). The order is built from the stored
		// command, decoded as every finisher decodes it: a command that
		// no finisher could read is written by nobody, so setting it aside
		// as FAILED never contradicts a row (model/README.md, finding 2).
		o, err := ownOrder(cur)
		if err == nil {
			o, err = s.project(ctx, o)
		}
		s.note(ctx, cur, err)
		if err != nil {
			return Result{}, err
		}
		s.delivery.settleLater(ctx, cur, order.CreatedEvent(o))
		return Result{Order: o, Outcome: OutcomeNew}, nil
	}
	if cur.Fingerprint != claim.Fingerprint {
		return Result{}, fault.New(fault.ReasonRequestIDReused, nil)
	}
	// A retry of an earlier attempt: how late retries come decides whether
	// the retention is long enough.
	s.cfg.Observer.RetryAge(max(0, claim.CreatedAt.Sub(cur.CreatedAt)))
	return s.duplicate(ctx, cur, cmd)
}

// errRecorded ends a claim that must not be sent: the request's outcome is
// recorded already (never seen by a client).
var errRecorded = errors.New("the request's outcome is recorded")

// recorded reads the request's recorded outcome: the order row (at
// LOCAL_QUORUM), which is written last, once the order is wholly visible,
// and never changes. done is false if there is none yet; an order with
// another command is REQUEST_ID_REUSED.
func (s *Service) recorded(ctx context.Context, tenant string, orderID uuid.UUID, cmd order.Command) (o order.Order, done bool, err error) {
	o, err = s.projector.Order(ctx, tenant, orderID)
	switch {
	case fault.KindOf(err) == fault.NotFound:
		return order.Order{}, false, nil
	case err != nil:
		return order.Order{}, false, err
	case !o.Carries(cmd):
		return order.Order{}, false, fault.New(fault.ReasonRequestIDReused, nil)
	}
	// The outcome of a CreateOrder is the order as created, whatever
	// changed it since (a later GetOrder shows its current state).
	return o.AsCreated(), true, nil
}

// observeRetry reports the age of a request a duplicate was answered for.
func (s *Service) observeRetry(created time.Time) {
	s.cfg.Observer.RetryAge(max(0, s.now().UTC().Truncate(time.Millisecond).Sub(created)))
}

// duplicate answers an attempt of a CreateOrder request that an earlier
// attempt claimed.
func (s *Service) duplicate(ctx context.Context, cur ledger.Record, cmd order.Command) (Result, error) {
	var res Result
	err := s.await(ctx, cur, pendingRequest{
		completed: func(rec ledger.Record) error { // a row completed before the one-LWT protocol
			o, err := order.DecodeOutcome(rec.Outcome)
			res = Result{Order: o, Replayed: true, Outcome: OutcomeReplayed}
			return err
		},
		takeover: func(ctx context.Context, rec ledger.Record) error {
			o, err := s.Finish(ctx, rec)
			s.note(ctx, rec, err)
			if err != nil {
				return err
			}
			s.delivery.settleLater(ctx, rec, order.CreatedEvent(o))
			res = Result{Order: o, Replayed: true, Outcome: OutcomeTakeover}
			return nil
		},
		recorded: func(ctx context.Context) (bool, error) {
			o, done, err := s.recorded(ctx, cur.Tenant, cur.EntityID, cmd)
			res = Result{Order: o, Replayed: true, Outcome: OutcomeReplayed}
			return done, err
		},
	})
	if err != nil {
		return Result{}, err
	}
	return res, nil
}

// pendingRequest is what await does with a request another attempt claimed,
// by operation.
type pendingRequest struct {
	// completed answers from a COMPLETE row.
	completed func(rec ledger.Record) error
	// takeover finishes the request itself and answers.
	takeover func(ctx context.Context, rec ledger.Record) error
	// recorded answers if the request's outcome is recorded (true).
	recorded func(ctx context.Context) (bool, error)
}

// await answers an attempt of a request that an earlier attempt claimed:
// from its COMPLETE row, REQUEST_FAILED for a FAILED one; while it is
// PENDING and young, it waits for its outcome to be recorded, reading it
// and the ledger with backoff (ABORTED REQUEST_IN_PROGRESS if the call's
// deadline nears); once the claim is TakeoverAfter old, this attempt
// finishes the work itself (the writes are deterministic, so racing the
// original attempt writes the same rows).
func (s *Service) await(ctx context.Context, cur ledger.Record, p pendingRequest) error {
	waitUntil := s.now().Add(s.cfg.MaxWait)
	if d, ok := ctx.Deadline(); ok {
		// Keep enough of the deadline to finish the work or answer.
		waitUntil = d.Add(-s.cfg.TakeoverAfter / 2)
	}
	pause := s.cfg.PollInterval
	for {
		switch cur.State {
		case ledger.Complete:
			return p.completed(cur)
		case ledger.Failed:
			return fault.New(fault.ReasonRequestFailed, nil)
		}
		if s.now().Sub(cur.CreatedAt) >= s.cfg.TakeoverAfter {
			return p.takeover(ctx, cur)
		}
		if s.now().Add(pause).After(waitUntil) {
			return fault.New(fault.ReasonRequestInProgress, nil).WithRetryAfter(s.cfg.TakeoverAfter)
		}
		select {
		case <-ctx.Done():
			return fault.New(fault.ReasonRequestInProgress, ctx.Err()).WithRetryAfter(s.cfg.TakeoverAfter)
		case <-time.After(pause):
		}
		pause = min(2*pause, 8*s.cfg.PollInterval)
		if done, err := p.recorded(ctx); err != nil || done {
			return err
		}
		next, err := ledger.Read(ctx, s.ledger, cur.Key)
		if err != nil {
			return err
		}
		cur = next
	}
}

// Finish does the work of a claimed request from its ledger row alone and
// returns its recorded outcome, the order. It is safe to run any number of
// times, concurrently, by anyone. It does not note failures on the ledger,
// publish the order's event or release the request's due entry: its
// caller does (the delivery component, through settleLater or Settle).
//
// It first reads the order row. If there is one, an earlier attempt
// recorded the outcome (or the claim that wrote it has expired since): that
// order is the outcome, and its rows are rewritten exactly as they were
// (which also completes an order whose other rows a crash, or a version
// that wrote orders_by_id first, left out). If the row carries another
// command, this claim must never run: it is withdrawn and the answer is
// REQUEST_ID_REUSED, with nothing written.
//
// Errors: a *fault.Error of kind Unavailable or OutcomeUnknown (retry;
// projections may exist), Conflict (the claim was withdrawn), InProgress or
// Failed (withdrawing found the claim replaced or set aside), or one
// wrapping ledger.ErrUnfinishable (the stored command cannot be read;
// nothing was written).
func (s *Service) Finish(ctx context.Context, rec ledger.Record) (order.Order, error) {
	if rec.State == ledger.Complete { // a row completed before the one-LWT protocol
		return order.DecodeOutcome(rec.Outcome)
	}
	// The order row first: a request whose order is recorded is done
	// whatever its stored command, so it is never set aside as FAILED
	// (that would contradict rows its client may already see).
	o, err := s.projector.Order(ctx, rec.Tenant, rec.EntityID)
	switch {
	case fault.KindOf(err) == fault.NotFound:
		if o, err = ownOrder(rec); err != nil {
			return order.Order{}, err
		}
		return s.project(ctx, o)
	case err != nil:
		return order.Order{}, err
	case isOwnOrder(rec, o):
		return s.project(ctx, o.AsCreated()) // rewritten as it was: every row, idempotently
	}
	return order.Order{}, s.withdraw(ctx, rec)
}

// ownOrder is the order rec's claim makes, built from its stored command.
// An unreadable command is ledger.ErrUnfinishable: nothing was written.
func ownOrder(rec ledger.Record) (order.Order, error) {
	cmd, err := order.DecodeCommand(rec.Command)
	if err != nil {
		return order.Order{}, fault.New(fault.ReasonCommandUnreadable,
			fmt.Errorf("request %s: %w: %w", rec.RequestID, ledger.ErrUnfinishable, err))
	}
	return order.New(rec.Tenant, rec.RequestID, cmd, rec.CreatedAt), nil
}

// isOwnOrder reports whether o, the order row of rec's request id, is the
// one rec's command makes (else the id's order carries another command,
// and rec's claim must be withdrawn). A command that cannot be read is
// compared by claim time instead: every row of an order is dated by the
// claim that made it, and no two claims of one request id share a time.
func isOwnOrder(rec ledger.Record, o order.Order) bool {
	if cmd, err := order.DecodeCommand(rec.Command); err == nil {
		return o.Carries(cmd)
	}
	return o.CreatedAt.Equal(rec.CreatedAt)
}

// project writes o's rows, orders_by_id last (the recorded outcome).
func (s *Service) project(ctx context.Context, o order.Order) (order.Order, error) {
	if err := s.projector.Write(ctx, o); err != nil {
		return order.Order{}, err
	}
	if err := s.failpoints.Eval(failpoint.BeforeRelease); err != nil {
		return order.Order{}, err
	}
	return o, nil
}

// Settle finishes rec's request and delivers its event, waiting for the
// broker's acknowledgement: what the reconciler runs for a due entry. For
// a CreateOrder that is Finish and the ORDER_CREATED event; for a change,
// finishChange and the change's event, or nothing to deliver when its
// conflict is recorded (the request is done). It says what it made of the
// request:
//   - ledger.Finished, nil error: the work is recorded and its event
//     acknowledged (or none is owed); the reconciler removes the entry;
//   - ledger.EventOwed: the work is recorded, the broker did not take the
//     event (the error, reason DELIVERY_FAILED, kind Unavailable, says
//     why); the entry must stay;
//   - ledger.Unfinished: the error says why, by its kind (Finish's
//     errors); a request of an operation this release does not know is
//     left as it is, with an error wrapping ledger.ErrUnknownOperation.
func (s *Service) Settle(ctx context.Context, rec ledger.Record) (ledger.Settled, error) {
	var ev order.Event
	switch rec.Operation {
	case order.OperationCancel, order.OperationAmend:
		res, err := s.finishChange(ctx, rec, order.Order{})
		if receipt(err) {
			return ledger.Finished, nil
		}
		if err != nil {
			return ledger.Unfinished, err
		}
		ev = order.ChangedEvent(res.Order, res.Change)
	case order.OperationCreate:
		o, err := s.Finish(ctx, rec)
		if err != nil {
			return ledger.Unfinished, err
		}
		ev = order.CreatedEvent(o)
	default:
		// A newer release's operation: its claim may be accepted and partly
		// written by that release, so acting on it as anything this release
		// knows (finishing it as a create, withdrawing it, setting it aside
		// as FAILED) could undo what a client was told succeeded.
		return ledger.Unfinished, fault.New(fault.ReasonOperationUnknown,
			fmt.Errorf("request %s: %w: %q", rec.RequestID, ledger.ErrUnknownOperation, rec.Operation))
	}
	// The event goes out in the trace of the call that claimed the request,
	// however long ago that was (its claim keeps the traceparent).
	return s.delivery.deliver(tracing.WithTraceParent(ctx, rec.TraceParent), ev)
}

// Republish publishes every event of o (an order as recorded, at its
// latest version): its ORDER_CREATED and the event of each change in its
// history, in version order, each under its stable id, so a consumer that
// deduplicates by event id applies only those it lacks. It is the way to
// deliver what no due entry owes any more: orders accepted while delivery
// was off, or whose entry outlived its retention undelivered. It returns
// how many were published; nothing is written to the database.
func (s *Service) Republish(ctx context.Context, o order.Order) (int, error) {
	if s.cfg.Publisher == nil {
		return 0, fault.New(fault.ReasonInternal, errors.New("no event publisher is configured (delivery is off)"))
	}
	events, err := s.orderEvents(ctx, o)
	if err != nil {
		return 0, err
	}
	for i, ev := range events {
		if err := s.delivery.publish(ctx, ev); err != nil {
			return i, fmt.Errorf("order %s: %s event of version %d: %w", o.ID, ev.Type, ev.Order.Version, err)
		}
	}
	return len(events), nil
}

// orderEvents are the events of o up to its version, in version order:
// its ORDER_CREATED, then each accepted change's, each as it was published
// (the order at the version the event made, the change's time).
func (s *Service) orderEvents(ctx context.Context, o order.Order) ([]order.Event, error) {
	events := []order.Event{order.CreatedEvent(o)}
	if o.Version == order.CreatedVersion {
		return events, nil
	}
	if s.cfg.Versions == nil {
		return nil, fault.New(fault.ReasonInternal, errors.New("order changes are not configured (workflow.Config.Versions)"))
	}
	hist, err := s.cfg.Versions.History(ctx, o.Tenant, o.ID, o.Version)
	if err != nil {
		return nil, err
	}
	at := o.AsCreated()
	for _, c := range hist {
		at = at.Apply(c)
		events = append(events, order.ChangedEvent(at, c))
	}
	return events, nil
}

// errDeliveryOff is why an instance without a publisher leaves an owed
// event owed.
var errDeliveryOff = errors.New("event delivery is off on this instance (ORDERD_DELIVERY=false): the event stays owed for an instance that publishes")

// Redeliver publishes the event that request key made on order orderID,
// from the order's rows alone, writing nothing: the reconciler calls it
// for a due entry that owes the event (an earlier attempt recorded the
// order and the broker did not take it), and once the request's claim is
// gone (the retention ended before the broker took it) it is the only way
// left. The event is the one every earlier attempt published (same id,
// same bytes). It says what became of it: ledger.Finished once the broker
// acknowledged it; ledger.EventOwed when the broker did not take it, or
// when this instance publishes nothing (delivery off): an event owed
// stays owed until an instance that publishes takes it, never settled by
// one that cannot (which would lose it); ledger.Unfinished when the event
// could not be made from the rows.
func (s *Service) Redeliver(ctx context.Context, key ledger.Key, orderID uuid.UUID) (ledger.Settled, error) {
	if s.cfg.Publisher == nil {
		return ledger.EventOwed, fault.New(fault.ReasonDeliveryFailed, errDeliveryOff)
	}
	ev, err := s.owedEvent(ctx, key, orderID)
	if err != nil {
		return ledger.Unfinished, err
	}
	return s.delivery.deliver(ctx, ev)
}

// owedEvent is the event request key made on order orderID, made from the
// order's rows and its history.
func (s *Service) owedEvent(ctx context.Context, key ledger.Key, orderID uuid.UUID) (order.Event, error) {
	if !slices.Contains(Operations(), key.Operation) {
		return order.Event{}, fault.New(fault.ReasonOperationUnknown,
			fmt.Errorf("request %s: %w: %q", key.RequestID, ledger.ErrUnknownOperation, key.Operation))
	}
	o, err := s.projector.Order(ctx, key.Tenant, orderID)
	if err != nil {
		return order.Event{}, fmt.Errorf("read order %s, owed the event of request %s: %w", orderID, key.RequestID, err)
	}
	events, err := s.orderEvents(ctx, o)
	if err != nil {
		return order.Event{}, err
	}
	id := order.EventID(key.Tenant, key.Operation, key.RequestID)
	for _, ev := range events {
		if ev.ID == id {
			return ev, nil
		}
	}
	return order.Event{}, fault.New(fault.ReasonInternal, fmt.Errorf("order %s at version %d has no event %s of request %s (%s)",
		orderID, o.Version, id, key.RequestID, key.Operation))
}

// warn logs one of the per-request WARN lines, at a bounded rate per
// message (lograte): an outage (the broker down, the cluster refusing
// writes) would otherwise write one per order, while the metrics (outbox
// backlog, attempts) already count every one.
func (s *Service) warn(ctx context.Context, msg string, attrs ...slog.Attr) {
	s.warns.Log(ctx, s.log, slog.LevelWarn, msg, msg, attrs...)
}

// Wait blocks until every background delivery and release has ended (each
// is bounded by a timeout). Call it on shutdown, after the last request,
// before the session closes.
func (s *Service) Wait() { s.delivery.wait() }

// withdraw removes a claim whose command differs from the order its request
// id already has, and answers REQUEST_ID_REUSED. Not applied, the claim
// changed under it: set aside (REQUEST_FAILED), or replaced by a takeover's
// claim, which withdraws itself once it reads the same order row, or
// completed by a version before the one-LWT protocol. This attempt no
// longer decides the request: REQUEST_IN_PROGRESS (the client retries, the
// reconciler reschedules the entry and drops it once the row settles).
func (s *Service) withdraw(ctx context.Context, rec ledger.Record) error {
	cur, err := s.ledger.Withdraw(ctx, rec)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		return fault.New(fault.ReasonRequestIDReused, nil)
	case err != nil:
		return err
	case cur.State == ledger.Failed:
		return fault.New(fault.ReasonRequestFailed, nil)
	}
	return fault.New(fault.ReasonRequestInProgress,
		fmt.Errorf("request %s: withdrawing a conflicting claim found it %s under claim %s", rec.RequestID, cur.State, cur.ClaimToken))
}

// note records on the ledger, best effort, a handler's attempt that failed
// in a way another attempt may cure (attempts, last_error as a stable
// reason); the request stays PENDING either way and the caller reports the
// error. A call whose own context ended is not an attempt that failed: the
// client gave up waiting, nothing was wrong with the request. (The
// reconciler notes its own attempts: it decides on dead-lettering from
// them.)
func (s *Service) note(ctx context.Context, rec ledger.Record, err error) {
	if err == nil || ctx.Err() != nil || !retryable(err) {
		return
	}
	if nerr := s.ledger.RecordAttempt(context.WithoutCancel(ctx), rec, string(fault.ReasonOf(err))); nerr != nil {
		s.warn(ctx, "could not record a failed attempt", slog.Any("request_id", rec.RequestID), slog.Any("error", nerr))
	}
}

// retryable: the request is still PENDING and another attempt may finish it.
func retryable(err error) bool {
	switch fault.KindOf(err) {
	case fault.Unavailable, fault.OutcomeUnknown:
		return true
	}
	return false
}

// Request returns a request as its client would see it: the ledger's row
// (LOCAL_SERIAL), COMPLETE with its order as the outcome when the row is
// PENDING and the order is recorded (completed_at is then the order's
// creation time, which every row of it carries). ledger.ErrNotFound (kind
// NotFound) if none is recorded for this tenant — also when another tenant
// recorded the same request id.
func (s *Service) Request(ctx context.Context, tenant, operation string, requestID uuid.UUID) (ledger.Record, error) {
	rec, err := s.ledger.Get(ctx, ledger.Key{Tenant: tenant, Operation: operation, RequestID: requestID})
	if err != nil {
		return rec, err
	}
	return s.Resolve(ctx, rec)
}

// Resolve is rec, a ledger row read by any means (Request reads one; a
// ListRequests scan reads many), as its client would see it: a PENDING row
// whose work is recorded is COMPLETE. The ledger alone cannot say so: a
// create's completion writes nothing to it (orders_by_id is the record).
func (s *Service) Resolve(ctx context.Context, rec ledger.Record) (ledger.Record, error) {
	if rec.State != ledger.Pending {
		return rec, nil
	}
	if rec.Operation != order.OperationCreate {
		return s.changeRequest(ctx, rec)
	}
	cmd, err := order.DecodeCommand(rec.Command)
	if err != nil {
		return rec, nil // it can never be recorded; the reconciler sets it aside
	}
	o, done, err := s.recorded(ctx, rec.Tenant, rec.EntityID, cmd)
	switch {
	case fault.KindOf(err) == fault.Conflict:
		return rec, nil // a claim about to be withdrawn
	case err != nil:
		return ledger.Record{}, err
	case done:
		rec.State, rec.Outcome, rec.CompletedAt = ledger.Complete, o.EncodeOutcome(), o.CreatedAt
	}
	return rec, nil
}

// changeRequest is Request for a PENDING change request: COMPLETE once its
// accepted change is recorded and projected (completed_at is the change's
// claim time).
func (s *Service) changeRequest(ctx context.Context, rec ledger.Record) (ledger.Record, error) {
	cmd, err := order.DecodeChangeCommand(rec.Command)
	if err != nil || s.cfg.Versions == nil {
		return rec, nil // it can never be finished; the reconciler sets it aside
	}
	res, _, done, err := s.changeRecorded(ctx, rec.Key, rec.Fingerprint, cmd)
	switch {
	case receipt(err) || fault.KindOf(err) == fault.Conflict || fault.KindOf(err) == fault.NotFound:
		// A refusal recorded with the order (or a request id reused) whose
		// receipt is not in the ledger yet, or a change of no order: the
		// request stays as the ledger has it until an attempt or the
		// reconciler writes the receipt. The change's answer is not the
		// request's: it is no error here.
		return rec, nil
	case err != nil:
		return ledger.Record{}, err
	case done:
		rec.State, rec.CompletedAt = ledger.Complete, res.Change.At
	}
	return rec, nil
}
