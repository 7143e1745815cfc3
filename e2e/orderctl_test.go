package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// orderctlRun is one finished orderctl process.
type orderctlRun struct {
	code           int
	stdout, stderr string
}

// orderctlTool runs the orderctl binary as the run's default caller (the
// tenant "default" API key, which has create, read and admin).
type orderctlTool struct {
	t     *testing.T
	bin   string
	token string
}

func buildOrderctl(t *testing.T) orderctlTool {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "orderctl")
	build := exec.Command("go", "build", "-o", bin, "./cmd/orderctl")
	build.Dir = repoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build orderctl: %v\n%s", err, out)
	}
	return orderctlTool{t: t, bin: bin, token: sec.defaultClient().Token}
}

// run runs orderctl against addr with the default caller's credentials
// flags, its API key in $ORDERD_API_KEY.
func (o orderctlTool) run(addr string, args ...string) orderctlRun {
	o.t.Helper()
	creds := sec.defaultClient()
	full := []string{"--addr", addr}
	if creds.CAFile != "" {
		full = append(full, "--ca-file", creds.CAFile)
	}
	if creds.CertFile != "" {
		full = append(full, "--cert-file", creds.CertFile, "--key-file", creds.KeyFile)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, o.bin, append(full, args...)...)
	cmd.Env = append(os.Environ(), "ORDERD_API_KEY="+o.token)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		o.t.Fatalf("orderctl %v: %v", args, err)
	}
	r := orderctlRun{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
	o.t.Logf("orderctl %s\n  exit %d\n  stdout: %s\n  stderr: %s", strings.Join(args, " "), r.code, indent(r.stdout), indent(r.stderr))
	return r
}

// indent is output for the test log: indented, the first 40 lines.
func indent(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > 40 {
		lines = append(lines[:40], "...")
	}
	return strings.Join(lines, "\n          ")
}

// want fails the test unless r exited with code and its stdout and stderr
// hold the given strings.
func (r orderctlRun) want(t *testing.T, code int, stdout, stderr []string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit code %d, want %d (stderr %q)", r.code, code, r.stderr)
	}
	for _, s := range stdout {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("stdout lacks %q:\n%s", s, r.stdout)
		}
	}
	for _, s := range stderr {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("stderr lacks %q:\n%s", s, r.stderr)
		}
	}
}

// decode parses r's stdout as one JSON document.
func (r orderctlRun) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		t.Fatalf("stdout is not one JSON document: %v\n%s", err, r.stdout)
	}
}

// The --json documents, as a script reads them (.proto field names).
type (
	ctlOrder struct {
		OrderID   string `json:"order_id"`
		RequestID string `json:"request_id"`
		Total     string `json:"total"`
		Status    string `json:"status"`
		Version   string `json:"version"` // int64: a string in protojson
		Lines     []struct {
			SKU string `json:"sku"`
		} `json:"lines"`
	}
	ctlRequest struct {
		RequestID string `json:"request_id"`
		State     string `json:"state"`
		OrderID   string `json:"order_id"`
		LastError string `json:"last_error"`
	}
	ctlCreated struct {
		Order    ctlOrder `json:"order"`
		Replayed bool     `json:"replayed"`
	}
)

// TestOrderctl drives every orderctl command against real orderd
// processes: the answers, the exit codes a script relies on, and the
// --json documents.
func TestOrderctl(t *testing.T) {
	ctl := buildOrderctl(t)
	addr := shared.addr
	customer := "ctl-" + uuid.NewString()[:8]
	month := time.Now().UTC().Format("2006-01")
	from := time.Now().UTC().AddDate(0, -2, 0).Format("2006-01")

	// create without --request-id: one is made and announced on stderr
	// before the call, with how to retry the intent.
	first := ctl.run(addr, "create", "--customer", customer, "--total", "10.00", "--currency", "EUR",
		"--line", "SKU-A:1:4.00", "--line", "SKU-B:2:3.00")
	first.want(t, 0, []string{"REPLAYED", "false", "SKU-A", "SKU-B", "10.00 EUR"}, []string{"request_id: ", "to retry this intent use --request-id "})
	firstID := strings.Fields(strings.TrimPrefix(first.stderr, "request_id: "))[0]
	firstID = strings.TrimSuffix(firstID, ";")
	if _, err := uuid.Parse(firstID); err != nil || !strings.Contains(first.stdout, firstID) {
		t.Fatalf("announced request id %q (%v) is not the order's", firstID, err)
	}

	// create with --request-id, then again: the recorded outcome, replayed.
	secondID := uuid.NewString()
	var created, again ctlCreated
	r := ctl.run(addr, "--json", "create", "--customer", customer, "--total", "20.00", "--currency", "EUR", "--request-id", secondID)
	r.want(t, 0, nil, nil)
	if r.stderr != "" {
		t.Errorf("create with --request-id wrote to stderr: %q", r.stderr)
	}
	r.decode(t, &created)
	if created.Replayed || created.Order.RequestID != secondID || created.Order.OrderID == "" || created.Order.Total != "20.00" {
		t.Fatalf("create --json: %+v", created)
	}
	r = ctl.run(addr, "--json", "create", "--customer", customer, "--total", "20.0", "--currency", "eur", "--request-id", secondID)
	r.want(t, 0, nil, nil)
	r.decode(t, &again)
	if !again.Replayed || again.Order.OrderID != created.Order.OrderID {
		t.Errorf("the same intent again: %+v, want order %s replayed", again, created.Order.OrderID)
	}
	// The same request id for another order: refused for good, exit 5.
	ctl.run(addr, "create", "--customer", customer, "--total", "21.00", "--currency", "EUR", "--request-id", secondID).
		want(t, 5, nil, []string{"REQUEST_ID_REUSED"})

	// get: the order with its lines.
	var firstOrder struct {
		Order ctlOrder `json:"order"`
	}
	r = ctl.run(addr, "--json", "replay", firstID)
	r.want(t, 0, []string{`"replayed":true`}, nil)
	r.decode(t, &firstOrder)
	ctl.run(addr, "get", firstOrder.Order.OrderID).want(t, 0, []string{firstOrder.Order.OrderID, "SKU-A", "SKU-B", "QUANTITY", "CREATED"}, nil)
	var got struct {
		Order ctlOrder `json:"order"`
	}
	r = ctl.run(addr, "--json", "get", firstOrder.Order.OrderID)
	r.decode(t, &got)
	if got.Order.RequestID != firstID || len(got.Order.Lines) != 2 || got.Order.Version != "1" {
		t.Errorf("get --json: %+v", got.Order)
	}
	ctl.run(addr, "get", uuid.NewString()).want(t, 4, nil, []string{"not found"})

	// replay: what a retry of the create would be answered.
	ctl.run(addr, "replay", secondID).want(t, 0, []string{"REPLAYED", "true", created.Order.OrderID}, nil)

	// list: one page at a time, newest first, across a range of months.
	ctl.run(addr, "list", "--customer", customer, "--from", from, "--to", month, "--page-size", "1").
		want(t, 0, []string{created.Order.OrderID}, []string{"next_page_token: ", "--page-token "})
	var listing struct {
		Orders []ctlOrder `json:"orders"`
		Next   *string    `json:"next_page_token"`
	}
	r = ctl.run(addr, "--json", "list", "--customer", customer, "--from", from, "--to", month, "--page-size", "1", "--all")
	r.want(t, 0, nil, nil)
	r.decode(t, &listing)
	if len(listing.Orders) != 2 || listing.Orders[0].OrderID != created.Order.OrderID || listing.Orders[1].OrderID != firstOrder.Order.OrderID ||
		listing.Next == nil || *listing.Next != "" {
		t.Errorf("list --all: %+v, want the two orders newest first and no next page", listing)
	}
	if r.stderr != "" {
		t.Errorf("list --all --json wrote to stderr (no progress bar off a terminal): %q", r.stderr)
	}

	// request: the ledger's view, with its age.
	ctl.run(addr, "request", firstID).want(t, 0, []string{"COMPLETE", "AGE", "CREATE_ORDER", firstOrder.Order.OrderID}, nil)
	var req struct {
		Request ctlRequest `json:"request"`
	}
	r = ctl.run(addr, "--json", "request", secondID)
	r.decode(t, &req)
	if req.Request.State != "REQUEST_STATE_COMPLETE" || req.Request.OrderID != created.Order.OrderID {
		t.Errorf("request --json: %+v", req.Request)
	}

	// Changes: amend at version 1, then a cancel still based on version 1
	// is stale (exit 5, current_version printed).
	ctl.run(addr, "amend", created.Order.OrderID, "--expected-version", "1", "--note", "back door").
		want(t, 0, []string{"NEW_VERSION", "back door"}, []string{"request_id: "})
	ctl.run(addr, "cancel", created.Order.OrderID, "--expected-version", "1").
		want(t, 5, nil, []string{"STALE_VERSION", "current_version: 2"})

	// Invalid input: exit 3, the field named, nothing written.
	invalidID := uuid.NewString()
	r = ctl.run(addr, "create", "--customer", customer, "--total", "-1", "--currency", "EUR", "--request-id", invalidID)
	r.want(t, 3, nil, []string{"field total: "})
	if r.stdout != "" {
		t.Errorf("an invalid create printed a result: %q", r.stdout)
	}
	ctl.run(addr, "request", invalidID).want(t, 4, nil, []string{"not found"})
	// A usage mistake: exit 2, before any call.
	ctl.run(addr, "create", "--customer", customer, "--total", "1.00").want(t, 2, nil, []string{"currency", "--help"})
	// No credentials: exit 7.
	denied := ctl
	denied.token = ""
	denied.run(addr, "get", firstOrder.Order.OrderID).want(t, 7, nil, []string{"denied"})

	// A request left PENDING (every projection write fails, no reconciler):
	// create gives up with exit 6 and the request id to retry with.
	failing := startOrderd(t, withoutReconciler("ORDERD_FAILPOINTS=projection.orders_by_id=error")...)
	pendingID := uuid.NewString()
	ctl.run(failing.addr, "--timeout", "10s", "create", "--customer", customer, "--total", "30.00", "--currency", "EUR", "--request-id", pendingID).
		want(t, 6, nil, []string{"--request-id " + pendingID})
	ctl.run(addr, "replay", pendingID).want(t, 6, []string{"PENDING"}, []string{"PENDING", "--request-id " + pendingID})
	ctl.run(addr, "requests", "--state", "pending", "--all").
		want(t, 0, []string{"REQUEST_ID", "OPERATION", "STATE", "AGE", "ATTEMPTS", "LAST_ERROR", "ORDER_ID", pendingID}, nil)
	var pending struct {
		Requests []ctlRequest `json:"requests"`
		Next     *string      `json:"next_page_token"`
	}
	r = ctl.run(addr, "--json", "requests", "--state", "pending", "--all", "--page-size", "1")
	r.want(t, 0, nil, nil)
	r.decode(t, &pending)
	found := false
	for _, q := range pending.Requests {
		if q.State != "REQUEST_STATE_PENDING" {
			t.Errorf("requests --state pending listed %+v", q)
		}
		found = found || q.RequestID == pendingID
	}
	if !found || pending.Next == nil || *pending.Next != "" {
		t.Errorf("requests --all: %+v, want %s among them and no next page", pending, pendingID)
	}
	// requeue of a request that is not FAILED: left as it is.
	ctl.run(addr, "requeue", pendingID).want(t, 0, []string{"PENDING", pendingID}, nil)

	// verify: the created requests are good (one as a plain id, one as a
	// JSON line of the client example's -out); PENDING and unknown ids are
	// problems (exit 8).
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	writeLines(t, good, firstID, `{"request_id":"`+secondID+`","order_id":"`+created.Order.OrderID+`"}`)
	ctl.run(addr, "verify", "--requests", good).want(t, 0, []string{"complete", "2"}, nil)
	unknownID := uuid.NewString()
	bad := filepath.Join(dir, "bad")
	writeLines(t, bad, firstID, secondID, pendingID, unknownID)
	ctl.run(addr, "verify", "--requests", bad).want(t, 8, []string{unknownID, "missing", pendingID, "pending"}, nil)
	var rep struct {
		Checked, Complete, Pending, Missing int
		Problems                            []struct {
			RequestID string `json:"request_id"`
			Outcome   string `json:"outcome"`
		}
	}
	r = ctl.run(addr, "--json", "verify", "--requests", bad)
	r.want(t, 8, nil, nil)
	r.decode(t, &rep)
	if rep.Checked != 4 || rep.Complete != 2 || rep.Pending != 1 || rep.Missing != 1 || len(rep.Problems) != 2 {
		t.Errorf("verify --json: %+v", rep)
	}

	// Retried later with the same request id, on a healthy orderd, the
	// PENDING intent completes (and leaves nothing unfinished behind).
	var done ctlCreated
	r = ctl.run(addr, "--json", "create", "--customer", customer, "--total", "30.00", "--currency", "EUR", "--request-id", pendingID)
	r.want(t, 0, nil, nil)
	r.decode(t, &done)
	if done.Order.RequestID != pendingID {
		t.Errorf("the retried intent: %+v", done)
	}
	ctl.run(addr, "replay", pendingID).want(t, 0, []string{"REPLAYED", "true", done.Order.OrderID}, nil)

	// Shell completion is cobra's.
	ctl.run(addr, "completion", "bash").want(t, 0, []string{"bash completion"}, nil)
}

func writeLines(t *testing.T, path string, lines ...string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}
