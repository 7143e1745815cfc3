package grpcapi

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/atlasmart/orderd/internal/auth"
	"github.com/atlasmart/orderd/internal/order"
	"github.com/atlasmart/orderd/internal/workflow"
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
