package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
	"github.com/atlasmart/orderd/proto/client"
)

// verifyConcurrency is how many requests verify checks at once.
const verifyConcurrency = 8

// The outcomes of one request's check; every one but complete is a problem.
const (
	outcomeComplete   = "complete"
	outcomePending    = "pending"
	outcomeFailed     = "failed"
	outcomeMissing    = "missing"
	outcomeMismatched = "mismatched"
)

// check is what verify found for one request.
type check struct {
	RequestID string `json:"request_id"`
	Outcome   string `json:"outcome"`
	Detail    string `json:"detail,omitempty"`
}

// verifyReport is verify's result (its --json document).
type verifyReport struct {
	Checked    int     `json:"checked"`
	Complete   int     `json:"complete"`
	Pending    int     `json:"pending"`
	Failed     int     `json:"failed"`
	Missing    int     `json:"missing"`
	Mismatched int     `json:"mismatched"`
	Problems   []check `json:"problems"`
}

func (a *app) verifyCommand() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "verify --requests FILE",
		Short: "Check that every create request in FILE is COMPLETE with its order",
		Long: `verify reads request ids from FILE (one a line, or JSON lines with a
"request_id" field, as the client example's -out writes; blank lines and
lines starting with # are skipped) and checks each, 8 at a time: GetRequest
(CREATE_ORDER) must say COMPLETE with an order id, and GetOrder of it must
find the order, created by that request. It prints the counts and every
problem, and exits 0 when all are good, 8 when any is not. An error that
leaves a request unchecked (unavailable, denied) stops it with that
error's exit code.`,
		Args: cobra.NoArgs,
		RunE: a.connected(func(ctx context.Context, c *client.Client, _ []string) error {
			ids, err := readRequestIDsFile(file)
			if err != nil {
				return usageErr(err)
			}
			rep, err := a.verify(ctx, c, ids)
			if err != nil {
				return err
			}
			if err := a.writeVerify(rep); err != nil {
				return err
			}
			if len(rep.Problems) > 0 {
				return fmt.Errorf("%w: %d of %d requests", errProblems, len(rep.Problems), rep.Checked)
			}
			return nil
		}),
	}
	cmd.Flags().StringVar(&file, "requests", "", "file of request ids (one a line, or JSON lines with \"request_id\")")
	_ = cmd.MarkFlagRequired("requests")
	return cmd
}

// verify checks ids, verifyConcurrency at a time, with a progress bar.
func (a *app) verify(ctx context.Context, c *client.Client, ids []string) (verifyReport, error) {
	checks := make([]check, len(ids))
	bar := a.newProgress(len(ids), "verify")
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(verifyConcurrency)
	for i, id := range ids {
		g.Go(func() error {
			cctx, cancel := a.perCall(gctx)
			defer cancel()
			ch, err := checkRequest(cctx, c, id)
			if err != nil {
				return fmt.Errorf("request %s: %w", id, err)
			}
			checks[i] = ch
			_ = bar.Add(1)
			return nil
		})
	}
	err := g.Wait()
	_ = bar.Finish()
	if err != nil {
		return verifyReport{}, err
	}
	return tally(checks), nil
}

// checkRequest checks one create request. An error is an answer that says
// nothing about the request (not NOT_FOUND).
func checkRequest(ctx context.Context, c *client.Client, id string) (check, error) {
	ch := check{RequestID: id}
	r, err := c.GetRequest(ctx, id, "CREATE_ORDER")
	switch {
	case errors.Is(err, client.ErrNotFound):
		ch.Outcome, ch.Detail = outcomeMissing, "no such request"
		return ch, nil
	case err != nil:
		return ch, err
	}
	switch r.GetState() {
	case ordersv1.RequestState_REQUEST_STATE_PENDING:
		ch.Outcome, ch.Detail = outcomePending, lastError(r)
		return ch, nil
	case ordersv1.RequestState_REQUEST_STATE_FAILED:
		ch.Outcome, ch.Detail = outcomeFailed, lastError(r)
		return ch, nil
	}
	if r.GetOrderId() == "" {
		ch.Outcome, ch.Detail = outcomeMismatched, "COMPLETE without an order id"
		return ch, nil
	}
	o, err := c.GetOrder(ctx, r.GetOrderId())
	switch {
	case errors.Is(err, client.ErrNotFound):
		ch.Outcome, ch.Detail = outcomeMissing, "its order "+r.GetOrderId()+" is not found"
	case err != nil:
		return ch, err
	case o.GetRequestId() != id:
		ch.Outcome, ch.Detail = outcomeMismatched, fmt.Sprintf("its order %s names request %s", o.GetOrderId(), o.GetRequestId())
	default:
		ch.Outcome = outcomeComplete
	}
	return ch, nil
}

func lastError(r *ordersv1.WriteRequest) string {
	if r.GetLastError() == "" {
		return ""
	}
	return "last_error " + r.GetLastError()
}

// tally counts checks; the problems keep the file's order.
func tally(checks []check) verifyReport {
	rep := verifyReport{Checked: len(checks), Problems: []check{}}
	for _, ch := range checks {
		switch ch.Outcome {
		case outcomeComplete:
			rep.Complete++
			continue
		case outcomePending:
			rep.Pending++
		case outcomeFailed:
			rep.Failed++
		case outcomeMissing:
			rep.Missing++
		case outcomeMismatched:
			rep.Mismatched++
		}
		rep.Problems = append(rep.Problems, ch)
	}
	return rep
}

func (a *app) writeVerify(rep verifyReport) error {
	if a.json {
		return writeJSON(a.stdout, rep)
	}
	t := newTable(a.stdout)
	for _, row := range [][2]any{{"checked", rep.Checked}, {"complete", rep.Complete}, {"pending", rep.Pending},
		{"failed", rep.Failed}, {"missing", rep.Missing}, {"mismatched", rep.Mismatched}} {
		t.row(fmt.Sprint(row[0]), fmt.Sprint(row[1]))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if len(rep.Problems) == 0 {
		return nil
	}
	fmt.Fprintln(a.stdout)
	t = newTable(a.stdout)
	t.row("REQUEST_ID", "PROBLEM", "DETAIL")
	for _, p := range rep.Problems {
		t.row(p.RequestID, p.Outcome, p.Detail)
	}
	return t.flush()
}

func readRequestIDsFile(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ids, err := readRequestIDs(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ids, nil
}

// readRequestIDs reads one request id a line, or JSON lines with a
// "request_id" field; blank lines and # comments are skipped, an id seen
// before is skipped. Every id must be a UUID in its dashed form, as the
// server wants it.
func readRequestIDs(r io.Reader) ([]string, error) {
	var ids []string
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, err := requestIDOf(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, errors.New("no request ids")
	}
	return ids, nil
}

func requestIDOf(line string) (string, error) {
	id := line
	if strings.HasPrefix(line, "{") {
		var v struct {
			RequestID string `json:"request_id"`
		}
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			return "", err
		}
		if v.RequestID == "" {
			return "", errors.New(`no "request_id" field`)
		}
		id = v.RequestID
	}
	if _, err := uuid.Parse(id); err != nil || len(id) != 36 {
		return "", fmt.Errorf("%q is not a request id (a UUID, 36 characters)", id)
	}
	return id, nil
}
