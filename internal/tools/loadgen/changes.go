package loadgen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/google/uuid"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/atlasmart/orderd/internal/tools/invariant"
	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

// Changes: for a share of the orders it creates, the load runs
// rounds of two editors who each read the order and send a change based on
// the version they read, at the same time: one AmendOrder and, in the last
// round, sometimes a CancelOrder. Each change keeps its request id across
// retries; a STALE_VERSION or ORDER_CANCELLED answer is final (a real
// editor would read again and send a new change, with a new id: the next
// round). Every accepted change is recorded as an ack, and two accepted
// answers for one version of one order are a problem.

// changeRounds is how many rounds of two racing editors a changed order gets.
const changeRounds = 3

// changeStats is what the change phase saw, folded into the Report.
type changeStats struct {
	mu                    sync.Mutex
	sent, accepted, stale int
	cancelled, unacked    int
	problems              []string
	acks                  []invariant.Ack
	byVersion             map[string]string // order/version → change id
	codes                 map[string]int
}

// changeOrder runs the editors' rounds on the order o created.
func (st *changeStats) changeOrder(ctx context.Context, client ordersv1.OrderServiceClient, cfg Config, o *ordersv1.Order) {
	for round := range changeRounds {
		var wg sync.WaitGroup
		for editor := range 2 {
			cancel := round == changeRounds-1 && editor == 1 && rand.IntN(2) == 0
			wg.Go(func() { st.edit(ctx, client, cfg, o.GetOrderId(), cancel) })
		}
		wg.Wait()
	}
}

// edit reads the order and sends one change based on what it read,
// retrying it with the same request id until it is answered for good.
func (st *changeStats) edit(ctx context.Context, client ordersv1.OrderServiceClient, cfg Config, orderID string, cancel bool) {
	var version int64
	if err := retry(ctx, cfg, func(ctx context.Context) error {
		resp, err := client.GetOrder(ctx, &ordersv1.GetOrderRequest{OrderId: orderID})
		version = resp.GetOrder().GetVersion()
		return err
	}); err != nil {
		return // nothing sent
	}
	requestID := uuid.NewString()
	op := "AMEND_ORDER"
	send := func(ctx context.Context) (string, int64, error) {
		r, err := client.AmendOrder(ctx, &ordersv1.AmendOrderRequest{RequestId: requestID, OrderId: orderID, ExpectedVersion: version,
			ShippingNote: fmt.Sprintf("note %s", requestID[:8])})
		return r.GetChangeId(), r.GetVersion(), err
	}
	if cancel {
		op = "CANCEL_ORDER"
		send = func(ctx context.Context) (string, int64, error) {
			r, err := client.CancelOrder(ctx, &ordersv1.CancelOrderRequest{RequestId: requestID, OrderId: orderID, ExpectedVersion: version})
			return r.GetChangeId(), r.GetVersion(), err
		}
	}
	var (
		changeID string
		made     int64
		final    error
	)
	err := retry(ctx, cfg, func(ctx context.Context) error {
		var err error
		changeID, made, err = send(ctx)
		st.count(err)
		if code := status.Code(err); code == codes.Aborted && reasonOf(err) == "STALE_VERSION" || code == codes.FailedPrecondition {
			final = err
			return nil
		}
		return err
	})
	st.record(cfg, op, requestID, orderID, changeID, made, final, err)
}

// record notes one change's end.
func (st *changeStats) record(cfg Config, op, requestID, orderID, changeID string, made int64, final, err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.sent++
	switch {
	case err != nil:
		st.unacked++
		st.problems = append(st.problems, fmt.Sprintf("change %s of order %s never answered for good: %v", requestID, orderID, err))
	case final != nil && reasonOf(final) == "STALE_VERSION":
		st.stale++
	case final != nil:
		st.cancelled++
	default:
		st.accepted++
		k := fmt.Sprintf("%s/%d", orderID, made)
		if other, ok := st.byVersion[k]; ok && other != changeID {
			st.problems = append(st.problems, fmt.Sprintf("order %s version %d accepted for two changes: %s and %s", orderID, made, other, changeID))
		}
		st.byVersion[k] = changeID
		st.acks = append(st.acks, invariant.Ack{Tenant: cfg.Tenant, RequestID: requestID, OrderID: orderID, Operation: op,
			ChangeID: changeID, Version: made})
	}
}

func (st *changeStats) count(err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.codes[status.Code(err).String()]++
}

// retry runs call until it returns nil, a final error (not Unavailable,
// Aborted in progress, DeadlineExceeded or ResourceExhausted), or RetryFor
// passes; each call bounded by CallTimeout.
func retry(ctx context.Context, cfg Config, call func(context.Context) error) error {
	until := time.Now().Add(cfg.RetryFor)
	for {
		cctx, cancel := context.WithTimeout(ctx, cfg.CallTimeout)
		err := call(cctx)
		cancel()
		switch status.Code(err) {
		case codes.OK:
			return nil
		case codes.Unavailable, codes.Aborted, codes.DeadlineExceeded, codes.ResourceExhausted:
		default:
			return err
		}
		if time.Now().After(until) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func reasonOf(err error) string {
	return errorReason(status.Convert(err))
}

// errorReason is the ErrorInfo reason of st ("" if none).
func errorReason(st *status.Status) string {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetReason()
		}
	}
	return ""
}
