package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/adapters/auth"
	"github.com/atlasmart/orderd/internal/adapters/grpcapi"
	"github.com/atlasmart/orderd/internal/app/workflow"
	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/ledger/ledgertest"
	"github.com/atlasmart/orderd/projection/projectiontest"
	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

// `orderd requeue` runs the requeue the gRPC RequeueRequest runs
// (workflow.Requests.Requeue), so for the same ledger both say the same:
// a finished create, whose ledger row still says PENDING, is COMPLETE.
func TestRequeueCommandAnswersAsRequeueRequest(t *testing.T) {
	ctx := context.Background()
	discard := slog.New(slog.DiscardHandler)
	led, proj := ledgertest.NewMemory(ledgertest.Config{}), projectiontest.NewMemory()
	wf := workflow.New(workflow.Config{}, led, proj, nil, discard)
	reqs := workflow.NewRequests(wf, led)
	var _ requeuer = reqs // what requeue hands requeueOne: the shared use case

	const tenant = "acme"
	in := order.Input{RequestID: uuid.NewString(), CustomerID: "cust-1", Total: "1.00", Currency: "EUR"}
	res, err := wf.CreateOrder(ctx, tenant, in)
	if err != nil {
		t.Fatal(err)
	}
	wf.Wait()

	api, err := grpcapi.New(grpcapi.Config{PageTokenKey: bytes.Repeat([]byte("k"), grpcapi.MinPageTokenKeyLength),
		Auth: &auth.Authenticator{}, Requests: reqs}, wf, nil, discard)
	if err != nil {
		t.Fatal(err)
	}
	call := auth.NewContext(ctx, auth.Identity{Tenant: tenant, Name: "test", Permissions: auth.Admin})
	resp, err := api.RequeueRequest(call, &ordersv1.RequeueRequestRequest{RequestId: in.RequestID})
	if err != nil {
		t.Fatalf("RequeueRequest: %v", err)
	}

	var logs bytes.Buffer
	if err := requeueOne(ctx, reqs, tenant, res.Order.RequestID, slog.New(slog.NewJSONHandler(&logs, nil))); err != nil {
		t.Fatalf("orderd requeue: %v", err)
	}
	var line struct {
		Msg, State string
		Attempts   int
	}
	if err := json.Unmarshal(logs.Bytes(), &line); err != nil {
		t.Fatalf("log line %q: %v", logs.String(), err)
	}
	want := strings.TrimPrefix(resp.GetRequest().GetState().String(), "REQUEST_STATE_")
	if line.Msg != "requeued" || line.State != want || want != "COMPLETE" || int32(line.Attempts) != resp.GetRequest().GetAttempts() {
		t.Errorf("orderd requeue logged %s; RequeueRequest answered %v (want both COMPLETE)", logs.String(), resp.GetRequest())
	}

	// A request the tenant does not have is not found.
	if err := requeueOne(ctx, reqs, "globex", res.Order.RequestID, discard); fault.KindOf(err) != fault.NotFound {
		t.Errorf("orderd requeue of another tenant's request = %v, want not found", err)
	}
}
