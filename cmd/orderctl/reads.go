package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
	"github.com/atlasmart/orderd/proto/client"
)

// The reads of one thing: get (an order) and replay (what a retry of a
// create would be answered).

func (a *app) getCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "get ORDER_ID",
		Short: "Show one order, lines included",
		Args:  cobra.ExactArgs(1),
		RunE: a.once(func(ctx context.Context, c *client.Client, args []string) error {
			o, err := c.GetOrder(ctx, args[0])
			if err != nil {
				return err
			}
			if a.json {
				return writeProto(a.stdout, &ordersv1.GetOrderResponse{Order: o})
			}
			return writeOrder(a.stdout, o)
		}),
	}
}

// replayDoc is replay's --json document: a create's answer (order,
// replayed) with the ledger's record of the request; order is null unless
// the request is COMPLETE.
type replayDoc struct {
	Request  json.RawMessage `json:"request"`
	Order    json.RawMessage `json:"order"`
	Replayed bool            `json:"replayed"`
}

func (a *app) replayCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "replay REQUEST_ID",
		Short: "Show what a retry of a create would be answered, without sending it",
		Long: `replay asks the ledger about a CreateOrder request (GetRequest) and,
if it is COMPLETE, reads its order (GetOrder): the recorded outcome that a
retry with the same request_id is answered with (the order as it is now,
replayed). A PENDING request exits 6 (retry later with the same
request_id), a FAILED one 5, an unknown one 4.`,
		Args: cobra.ExactArgs(1),
		RunE: a.once(func(ctx context.Context, c *client.Client, args []string) error {
			r, err := c.GetRequest(ctx, args[0], "CREATE_ORDER")
			if err != nil {
				return err
			}
			var o *ordersv1.Order
			if r.GetState() == ordersv1.RequestState_REQUEST_STATE_COMPLETE {
				if r.GetOrderId() == "" {
					return fmt.Errorf("request %s is COMPLETE without an order id", r.GetRequestId())
				}
				if o, err = c.GetOrder(ctx, r.GetOrderId()); err != nil {
					return err
				}
			}
			if err := a.writeReplay(r, o); err != nil {
				return err
			}
			return notComplete(r)
		}),
	}
}

func (a *app) writeReplay(r *ordersv1.WriteRequest, o *ordersv1.Order) error {
	if a.json {
		doc := replayDoc{Order: json.RawMessage("null"), Replayed: o != nil}
		var err error
		if doc.Request, err = protoJSON(r); err != nil {
			return err
		}
		if o != nil {
			if doc.Order, err = protoJSON(o); err != nil {
				return err
			}
		}
		return writeJSON(a.stdout, doc)
	}
	if o == nil {
		return writeRequest(a.stdout, r, time.Now())
	}
	return writeOrder(a.stdout, o, [2]string{"REPLAYED", "true"})
}

// notComplete is the error of a request that is not COMPLETE (nil if it is).
func notComplete(r *ordersv1.WriteRequest) error {
	switch r.GetState() {
	case ordersv1.RequestState_REQUEST_STATE_COMPLETE:
		return nil
	case ordersv1.RequestState_REQUEST_STATE_PENDING:
		return &stateError{kind: errPending, requestID: r.GetRequestId()}
	case ordersv1.RequestState_REQUEST_STATE_FAILED:
		return &stateError{kind: client.ErrFailed, requestID: r.GetRequestId(), lastError: r.GetLastError()}
	}
	return fmt.Errorf("request %s in state %v", r.GetRequestId(), r.GetState())
}
