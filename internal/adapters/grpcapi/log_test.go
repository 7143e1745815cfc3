package grpcapi

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/atlasmart/orderd/internal/adapters/auth"
	"github.com/atlasmart/orderd/internal/app/workflow"
	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/platform/lograte"
	"github.com/atlasmart/orderd/ledger/ledgertest"
	"github.com/atlasmart/orderd/projection"
	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

type nopProjector struct{}

// headerStream lets a handler called outside a server set headers.
type headerStream struct{}

func (headerStream) Method() string               { return "/atlasmart.orders.v1.OrderService/CreateOrder" }
func (headerStream) SetHeader(metadata.MD) error  { return nil }
func (headerStream) SendHeader(metadata.MD) error { return nil }
func (headerStream) SetTrailer(metadata.MD) error { return nil }

func (nopProjector) Write(context.Context, order.Order) error { return nil }

func (nopProjector) WriteChange(context.Context, order.Order, order.Change) error { return nil }
func (nopProjector) ChangeEvents(context.Context, string, uuid.UUID) ([]projection.ChangeEvent, error) {
	return nil, nil
}

func (nopProjector) Order(context.Context, string, uuid.UUID) (order.Order, error) {
	return order.Order{}, projection.ErrNotFound
}

// logLines runs fn against a Server whose JSON log it returns, one map per line.
func logLines(t *testing.T, fn func(s *Server)) []map[string]any {
	t.Helper()
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	wf := workflow.New(workflow.Config{}, ledgertest.NewMemory(ledgertest.Config{}), nopProjector{}, nil, log)
	s, err := New(Config{PageTokenKey: testKey, Auth: &auth.Authenticator{}}, wf, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	fn(s)
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		m := map[string]any{}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func TestCreateOrderLogsOutcomeWithoutPayload(t *testing.T) {
	const id = "17000000-0000-0000-0000-000000000500"
	req := &ordersv1.CreateOrderRequest{RequestId: id, CustomerId: "cust-secret", Total: "77.70", Currency: "EUR"}
	lines := logLines(t, func(s *Server) {
		ctx := grpc.NewContextWithServerTransportStream(acme(), headerStream{})
		for _, r := range []*ordersv1.CreateOrderRequest{req, req,
			{RequestId: id, CustomerId: "cust-secret", Total: "99.90", Currency: "EUR"},
			{RequestId: strings.Repeat("x", 500), CustomerId: "cust-secret", Total: "-1"}} {
			_, _ = s.CreateOrder(ctx, r)
		}
	})
	want := []struct{ msg, outcome string }{
		{"create order", "new"}, {"create order", "replayed"}, {"request refused", "conflict"}, {"request refused", "invalid"},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d log lines, want %d: %v", len(lines), len(want), lines)
	}
	for i, w := range want {
		l := lines[i]
		if l["msg"] != w.msg || l["outcome"] != w.outcome || l["tenant"] != "acme" {
			t.Errorf("line %d: msg %v outcome %v tenant %v; want %q %q acme", i, l["msg"], l["outcome"], l["tenant"], w.msg, w.outcome)
		}
		rid, _ := l["request_id"].(string)
		if i < 3 && rid != id {
			t.Errorf("line %d: request_id %q, want %s", i, rid, id)
		}
		if len(rid) > 70 {
			t.Errorf("line %d: request_id of %d bytes logged; want it clipped", i, len(rid))
		}
		for _, secret := range []string{"cust-secret", "77.70", "99.90"} {
			raw, _ := json.Marshal(l)
			if strings.Contains(string(raw), secret) {
				t.Errorf("line %d logs the payload (%s): %s", i, secret, raw)
			}
		}
	}
}

// A flood of one refusal writes its burst of lines, then about
// lograte.LinesPerSecond a second; the first line after a held-back run
// says how many were not written, so the lines and their "suppressed"
// counts add up to every refusal. Another refusal kind keeps its own
// allowance, and every call still gets its answer.
func TestRefusalFloodIsLoggedAtABoundedRate(t *testing.T) {
	var codes []string
	lines := logLines(t, func(s *Server) {
		now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
		s.refusals = lograte.New[refusalKind](func() time.Time { return now })
		ctx := grpc.NewContextWithServerTransportStream(acme(), headerStream{})
		bad := &ordersv1.CreateOrderRequest{RequestId: "17000000-0000-0000-0000-000000000501", Total: "-1"}
		for i := 0; i < 1000; i++ {
			_, err := s.CreateOrder(ctx, bad)
			codes = append(codes, status.Code(err).String())
		}
		now = now.Add(time.Second) // one second later: its allowance refilled by lograte.LinesPerSecond
		for i := 0; i < 100; i++ {
			_, _ = s.CreateOrder(ctx, bad)
		}
		// Another kind, in the same second: not held back by the flood.
		_, _ = s.CreateOrder(context.Background(), bad) // no identity: UNAUTHENTICATED
	})
	for i, c := range codes {
		if c != "InvalidArgument" {
			t.Fatalf("call %d answered %s, want InvalidArgument for every call", i, c)
		}
	}
	var invalid, suppressed, other int
	var sawSuppressed bool
	for _, l := range lines {
		if l["msg"] != "request refused" {
			t.Fatalf("unexpected line %v", l)
		}
		if l["code"] != "InvalidArgument" {
			other++
			continue
		}
		invalid++
		if n, ok := l["suppressed"].(float64); ok {
			suppressed += int(n)
			sawSuppressed = true
		}
	}
	wantLines := lograte.Burst + lograte.LinesPerSecond
	if invalid != wantLines {
		t.Errorf("%d lines for 1,100 invalid calls, want %d (the burst, then one second's rate)", invalid, wantLines)
	}
	// The last run held back (after the second batch's allowance) has no
	// line after it yet; every earlier one is counted.
	if !sawSuppressed || suppressed != 1000-lograte.Burst {
		t.Errorf("suppressed adds up to %d, want %d (the first batch past its burst)", suppressed, 1000-lograte.Burst)
	}
	if other != 1 {
		t.Errorf("%d lines of the other refusal kind, want 1", other)
	}
}
