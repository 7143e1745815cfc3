package main

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/google/uuid"

	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

// changesPhase measures what a change costs against a new order (issue
// 13), through orderd, the drivers taking turns at each concurrency:
//
//   - create: CreateOrder of a new order (one Paxos round: the claim);
//   - amend: AmendOrder of an order at version 1, each order changed once
//     (two Paxos rounds: the claim and the version check, plus the
//     order and history reads before the claim);
//   - amend-replay: the same AmendOrder requests sent again, every answer a
//     replay from the change's recorded row (no Paxos round).
func (b *bench) changesPhase(ctx context.Context, levels []int, n int) ([]Result, error) {
	rounds := max(b.rounds, 1)
	per := max(n/rounds, 1)
	var out []Result
	for _, c := range levels {
		amends := make([]*ordersv1.AmendOrderRequest, 0, per*rounds+200)
		// Orders to change: one per amend of this level and of the warm-up.
		for i := range cap(amends) {
			resp, err := b.od.client.CreateOrder(ctx, newRequest(i))
			if err != nil {
				return nil, fmt.Errorf("create an order to change: %w", err)
			}
			amends = append(amends, &ordersv1.AmendOrderRequest{RequestId: uuid.NewString(), OrderId: resp.GetOrder().GetOrderId(),
				ExpectedVersion: 1, ShippingNote: "bench " + strings.Repeat("x", 40)})
		}
		var next, replayNext atomic.Int64
		amend := func(ctx context.Context, _ int) error {
			req := amends[next.Add(1)-1]
			resp, err := b.od.client.AmendOrder(ctx, req)
			if err == nil && (resp.GetReplayed() || resp.GetVersion() != 2) {
				err = fmt.Errorf("amend %s: answered version %d, replayed %v; want a new version 2", req.RequestId, resp.GetVersion(), resp.GetReplayed())
			}
			return err
		}
		replay := func(ctx context.Context, _ int) error {
			req := amends[replayNext.Add(1)-1]
			resp, err := b.od.client.AmendOrder(ctx, req)
			if err == nil && !resp.GetReplayed() {
				err = fmt.Errorf("amend %s was not replayed", req.RequestId)
			}
			return err
		}
		drivers := []driver{
			{name: "orderd", outcome: "create", do: b.viaOrderd},
			{name: "orderd", outcome: "amend", do: amend},
			{name: "orderd", outcome: "amend-replay", do: replay},
		}
		if err := b.warmUp(ctx, drivers); err != nil {
			return nil, err
		}
		rs, err := b.inFixedTurns(ctx, "changes", c, n, drivers)
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	return out, nil
}
