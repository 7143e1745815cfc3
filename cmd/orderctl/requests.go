package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
	"github.com/atlasmart/orderd/proto/client"
)

// The ledger's commands: request (one request), requests (the unfinished
// ones, admin) and requeue (admin).

var operations = []string{"CREATE_ORDER", "CANCEL_ORDER", "AMEND_ORDER"}

func (a *app) requestCommand() *cobra.Command {
	var operation string
	cmd := &cobra.Command{
		Use:   "request REQUEST_ID [--operation CREATE_ORDER|CANCEL_ORDER|AMEND_ORDER]",
		Short: "Show the ledger's record of a write request: state, attempts, last error, order, age",
		Args:  cobra.ExactArgs(1),
		RunE: a.once(func(ctx context.Context, c *client.Client, args []string) error {
			r, err := c.GetRequest(ctx, args[0], strings.ToUpper(operation))
			if err != nil {
				return err
			}
			if a.json {
				return writeProto(a.stdout, &ordersv1.GetRequestResponse{Request: r})
			}
			return writeRequest(a.stdout, r, time.Now())
		}),
	}
	cmd.Flags().StringVar(&operation, "operation", "CREATE_ORDER", "the request's operation: "+strings.Join(operations, ", "))
	_ = cmd.RegisterFlagCompletionFunc("operation", cobra.FixedCompletions(operations, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func (a *app) requestsCommand() *cobra.Command {
	var (
		req   ordersv1.ListRequestsRequest
		state string
		all   bool
	)
	cmd := &cobra.Command{
		Use:   "requests [--state pending|failed] [--all] [--page-size N] [--page-token T]",
		Short: "List the tenant's PENDING and FAILED write requests with their ages (admin)",
		Long: `requests lists the write requests of the caller's tenant that are not
COMPLETE, oldest first (ListRequests, which needs the admin permission). It
is a scan of the whole ledger in bounded slices: a page may be empty and
still have a next page. One page by default (its next_page_token on
stderr, in the document with --json); --all scans to the end.`,
		Args: cobra.NoArgs,
		RunE: a.connected(func(ctx context.Context, c *client.Client, _ []string) error {
			var err error
			if req.States, err = parseStates(state); err != nil {
				return usageErr(err)
			}
			rs, next, err := walk(ctx, a, all, req.GetPageToken(), "ledger scan",
				func(ctx context.Context, token string) ([]*ordersv1.WriteRequest, string, error) {
					req.PageToken = token
					resp, err := c.ListRequests(ctx, &req)
					return resp.GetRequests(), resp.GetNextPageToken(), err
				})
			if err != nil {
				return err
			}
			if a.json {
				return writeProto(a.stdout, &ordersv1.ListRequestsResponse{Requests: rs, NextPageToken: next})
			}
			if err := writeRequests(a.stdout, rs, time.Now()); err != nil {
				return err
			}
			a.nextPage(next)
			return nil
		}),
	}
	f := cmd.Flags()
	f.StringVar(&state, "state", "", "pending or failed (default: both)")
	f.BoolVar(&all, "all", false, "scan the whole ledger (a progress bar on a terminal)")
	f.Int32Var(&req.PageSize, "page-size", 0, "requests per page (0: the server's default, 50; at most 500)")
	f.StringVar(&req.PageToken, "page-token", "", "continue from this next_page_token")
	_ = cmd.RegisterFlagCompletionFunc("state", cobra.FixedCompletions([]string{"pending", "failed"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// parseStates reads --state: "" is both.
func parseStates(s string) ([]ordersv1.RequestState, error) {
	switch strings.ToLower(s) {
	case "":
		return nil, nil
	case "pending":
		return []ordersv1.RequestState{ordersv1.RequestState_REQUEST_STATE_PENDING}, nil
	case "failed":
		return []ordersv1.RequestState{ordersv1.RequestState_REQUEST_STATE_FAILED}, nil
	}
	return nil, fmt.Errorf("--state %q: want pending or failed", s)
}

func (a *app) requeueCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "requeue REQUEST_ID",
		Short: "Give a FAILED create request another round of attempts (admin)",
		Long: `requeue makes a FAILED CreateOrder request PENDING again, for the
reconciler to finish (RequeueRequest, which needs the admin permission),
and shows it. A PENDING or COMPLETE request is left as it is (for a
COMPLETE one requeue says so on stderr); either way it exits 0.`,
		Args: cobra.ExactArgs(1),
		RunE: a.once(func(ctx context.Context, c *client.Client, args []string) error {
			r, err := c.RequeueRequest(ctx, args[0])
			if err != nil {
				return err
			}
			if r.GetState() == ordersv1.RequestState_REQUEST_STATE_COMPLETE {
				fmt.Fprintf(a.stderr, "request %s is COMPLETE: nothing to requeue\n", r.GetRequestId())
			}
			if a.json {
				return writeProto(a.stdout, &ordersv1.RequeueRequestResponse{Request: r})
			}
			return writeRequest(a.stdout, r, time.Now())
		}),
	}
}
