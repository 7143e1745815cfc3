package main

import (
	"context"

	"github.com/spf13/cobra"

	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
	"github.com/atlasmart/orderd/proto/client"
)

func (a *app) listCommand() *cobra.Command {
	var (
		req ordersv1.ListCustomerOrdersRequest
		all bool
	)
	cmd := &cobra.Command{
		Use:   "list --customer C [--from YYYY-MM] [--to YYYY-MM] [--page-size N] [--page-token T] [--all]",
		Short: "List a customer's orders over a range of months, newest first",
		Long: `list shows one page of a customer's orders accepted from --from to --to
(UTC months, inclusive; default: the year up to the current month), newest
first, without their lines (use get). The next page's token is printed on
stderr (in the document with --json); --all reads every page.`,
		Args: cobra.NoArgs,
		RunE: a.connected(func(ctx context.Context, c *client.Client, _ []string) error {
			orders, next, err := walk(ctx, a, all, req.GetPageToken(), "orders",
				func(ctx context.Context, token string) ([]*ordersv1.Order, string, error) {
					req.PageToken = token
					resp, err := c.ListCustomerOrders(ctx, &req)
					return resp.GetOrders(), resp.GetNextPageToken(), err
				})
			if err != nil {
				return err
			}
			if a.json {
				return writeProto(a.stdout, &ordersv1.ListCustomerOrdersResponse{Orders: orders, NextPageToken: next})
			}
			if err := writeOrders(a.stdout, orders); err != nil {
				return err
			}
			a.nextPage(next)
			return nil
		}),
	}
	f := cmd.Flags()
	f.StringVar(&req.CustomerId, "customer", "", "customer id")
	f.StringVar(&req.StartMonth, "from", "", "oldest month, YYYY-MM (default: 11 months before --to)")
	f.StringVar(&req.EndMonth, "to", "", "newest month, YYYY-MM (default: the current month)")
	f.Int32Var(&req.PageSize, "page-size", 0, "orders per page (0: the server's default, 50; at most 500)")
	f.StringVar(&req.PageToken, "page-token", "", "continue from this next_page_token")
	f.BoolVar(&all, "all", false, "read every page (a progress bar on a terminal)")
	_ = cmd.MarkFlagRequired("customer")
	return cmd
}
