package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
	"github.com/atlasmart/orderd/proto/client"
)

// The write commands: create, cancel, amend. Each names one intent by its
// request_id: given with --request-id, or made here and printed on stderr
// before the first call, so that the intent can be retried whatever
// happens to this process.

func (a *app) createCommand() *cobra.Command {
	var (
		req   ordersv1.CreateOrderRequest
		lines []string
	)
	cmd := &cobra.Command{
		Use:   "create --customer C --total 77.70 --currency EUR [--line SKU:QTY:PRICE ...] [--request-id ID]",
		Short: "Place an order (a retry with the same --request-id gets the recorded outcome)",
		Args:  cobra.NoArgs,
		RunE: a.once(func(ctx context.Context, c *client.Client, _ []string) error {
			var err error
			if req.Lines, err = parseLines(lines); err != nil {
				return usageErr(err)
			}
			req.RequestId = a.requestID(req.RequestId)
			resp, err := c.CreateOrder(ctx, &req)
			if err != nil {
				return err
			}
			if a.json {
				return writeProto(a.stdout, resp)
			}
			return writeOrder(a.stdout, resp.GetOrder(), [2]string{"REPLAYED", strconv.FormatBool(resp.GetReplayed())})
		}),
	}
	f := cmd.Flags()
	f.StringVar(&req.CustomerId, "customer", "", "customer id")
	f.StringVar(&req.Total, "total", "", "order total, a decimal such as 77.70")
	f.StringVar(&req.Currency, "currency", "", "ISO 4217 currency code, e.g. EUR")
	f.StringArrayVar(&lines, "line", nil, "an order line SKU:QUANTITY:UNIT_PRICE (repeat for more; their sum must be --total)")
	f.StringVar(&req.RequestId, "request-id", "", "the intent's idempotency key (a UUID); default: a new one, printed on stderr")
	for _, name := range []string{"customer", "total", "currency"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

func (a *app) cancelCommand() *cobra.Command {
	req := ordersv1.CancelOrderRequest{}
	cmd := &cobra.Command{
		Use:   "cancel ORDER_ID --expected-version N [--request-id ID]",
		Short: "Cancel an order that is at the expected version",
		Args:  cobra.ExactArgs(1),
		RunE: a.once(func(ctx context.Context, c *client.Client, args []string) error {
			req.OrderId, req.RequestId = args[0], a.requestID(req.RequestId)
			resp, err := c.CancelOrder(ctx, &req)
			if err != nil {
				return err
			}
			return a.writeChange(resp, resp.GetChangeId(), resp.GetVersion(), resp.GetReplayed(), resp.GetOrder())
		}),
	}
	changeFlags(cmd, &req.ExpectedVersion, &req.RequestId)
	return cmd
}

func (a *app) amendCommand() *cobra.Command {
	req := ordersv1.AmendOrderRequest{}
	cmd := &cobra.Command{
		Use:   "amend ORDER_ID --expected-version N --note TEXT [--request-id ID]",
		Short: "Set the shipping note of an order that is at the expected version",
		Args:  cobra.ExactArgs(1),
		RunE: a.once(func(ctx context.Context, c *client.Client, args []string) error {
			req.OrderId, req.RequestId = args[0], a.requestID(req.RequestId)
			resp, err := c.AmendOrder(ctx, &req)
			if err != nil {
				return err
			}
			return a.writeChange(resp, resp.GetChangeId(), resp.GetVersion(), resp.GetReplayed(), resp.GetOrder())
		}),
	}
	changeFlags(cmd, &req.ExpectedVersion, &req.RequestId)
	cmd.Flags().StringVar(&req.ShippingNote, "note", "", "the new shipping note (empty clears it)")
	_ = cmd.MarkFlagRequired("note")
	return cmd
}

func changeFlags(cmd *cobra.Command, version *int64, requestID *string) {
	cmd.Flags().Int64Var(version, "expected-version", 0, "the order version the change is based on (as get shows it)")
	cmd.Flags().StringVar(requestID, "request-id", "", "the change's idempotency key (a UUID); default: a new one, printed on stderr")
	_ = cmd.MarkFlagRequired("expected-version")
}

// requestID is id, or a new one announced on stderr before any call.
func (a *app) requestID(id string) string {
	if id != "" {
		return id
	}
	id = client.NewRequestID()
	fmt.Fprintf(a.stderr, "request_id: %s; to retry this intent use --request-id %s\n", id, id)
	return id
}

// writeChange prints an accepted change (resp for --json).
func (a *app) writeChange(resp proto.Message, changeID string, version int64, replayed bool, o *ordersv1.Order) error {
	if a.json {
		return writeProto(a.stdout, resp)
	}
	return writeOrder(a.stdout, o,
		[2]string{"CHANGE_ID", changeID},
		[2]string{"NEW_VERSION", strconv.FormatInt(version, 10)},
		[2]string{"REPLAYED", strconv.FormatBool(replayed)})
}

// parseLines reads --line values, SKU:QUANTITY:UNIT_PRICE each. The SKU
// may itself hold colons: the last two separate quantity and price. Only
// the shape is checked here; the server checks the values.
func parseLines(specs []string) ([]*ordersv1.OrderLine, error) {
	var out []*ordersv1.OrderLine
	for _, s := range specs {
		l, err := parseLine(s)
		if err != nil {
			return nil, fmt.Errorf("--line %q: %w", s, err)
		}
		out = append(out, l)
	}
	return out, nil
}

func parseLine(s string) (*ordersv1.OrderLine, error) {
	i := strings.LastIndex(s, ":")
	if i < 0 {
		return nil, errors.New("want SKU:QUANTITY:UNIT_PRICE")
	}
	j := strings.LastIndex(s[:i], ":")
	if j < 0 {
		return nil, errors.New("want SKU:QUANTITY:UNIT_PRICE")
	}
	sku, qty, price := s[:j], s[j+1:i], s[i+1:]
	if sku == "" || price == "" {
		return nil, errors.New("want SKU:QUANTITY:UNIT_PRICE, none of them empty")
	}
	n, err := strconv.ParseInt(qty, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("quantity %q is not a whole number", qty)
	}
	return &ordersv1.OrderLine{Sku: sku, Quantity: n, UnitPrice: price}, nil
}
