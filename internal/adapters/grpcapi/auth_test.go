package grpcapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/atlasmart/orderd/internal/adapters/auth"
	"github.com/atlasmart/orderd/internal/app/workflow"
	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/ledger"
	"github.com/atlasmart/orderd/projection/projectiontest"
	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

// acme is a context carrying a verified identity of tenant acme with every
// permission, as the guard leaves it for the handlers.
func acme() context.Context {
	return auth.NewContext(context.Background(), auth.Identity{Tenant: "acme", Name: "test", Method: auth.MethodAPIKey,
		Permissions: auth.Create | auth.Read | auth.Admin})
}

type spyAuthObserver struct {
	mu      sync.Mutex
	refused []string
	served  []string
}

func (o *spyAuthObserver) Refused(method string, r fault.Reason) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.refused = append(o.refused, method+" "+string(r))
}

func (o *spyAuthObserver) Served(tenant, method, code string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.served = append(o.served, tenant+" "+method+" "+code)
}

func newGuardedServer(t *testing.T) (*Server, map[string]string, *spyAuthObserver) {
	t.Helper()
	keys := map[string]string{}
	var entries []auth.KeyEntry
	for name, perms := range map[string][]string{"writer": {"create"}, "reader": {"read"}, "admin": {"admin"}} {
		k, e, err := auth.NewKey("acme", name, perms, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		keys[name], entries = k, append(entries, e)
	}
	ring := &auth.KeyRing{}
	data, _ := json.Marshal(auth.KeyFile{Keys: entries})
	if err := ring.Load(data); err != nil {
		t.Fatal(err)
	}
	obs := &spyAuthObserver{}
	s, err := New(Config{PageTokenKey: testKey, Auth: &auth.Authenticator{Keys: ring}, AuthObserver: obs}, nil, nil,
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return s, keys, obs
}

func withBearer(token string) context.Context {
	return metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+token))
}

// Every call is refused before its handler runs unless its identity
// verifies and holds the call's permission; the handler sees the identity.
func TestGuardRefusesBeforeTheHandlerRuns(t *testing.T) {
	s, keys, obs := newGuardedServer(t)
	create := &grpc.UnaryServerInfo{FullMethod: ordersv1.OrderService_CreateOrder_FullMethodName}
	get := &grpc.UnaryServerInfo{FullMethod: ordersv1.OrderService_GetOrder_FullMethodName}
	unlisted := &grpc.UnaryServerInfo{FullMethod: "/atlasmart.orders.v1.OrderService/DeleteEverything"}
	health := &grpc.UnaryServerInfo{FullMethod: "/grpc.health.v1.Health/Check"}
	twoHeaders := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+keys["writer"], "authorization", "Bearer "+keys["reader"]))
	cases := []struct {
		name string
		ctx  context.Context
		info *grpc.UnaryServerInfo
		want codes.Code
		who  string // tenant the handler sees
	}{
		{"no credentials", context.Background(), create, codes.Unauthenticated, ""},
		{"wrong key", withBearer(keys["writer"] + "x"), create, codes.Unauthenticated, ""},
		{"basic scheme", metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Basic "+keys["writer"])), create, codes.Unauthenticated, ""},
		{"two authorization headers", twoHeaders, create, codes.Unauthenticated, ""},
		{"reader creates", withBearer(keys["reader"]), create, codes.PermissionDenied, ""},
		{"writer reads", withBearer(keys["writer"]), get, codes.PermissionDenied, ""},
		{"admin alone creates", withBearer(keys["admin"]), create, codes.PermissionDenied, ""},
		{"method not in the table", withBearer(keys["admin"]), unlisted, codes.PermissionDenied, ""},
		{"writer creates", withBearer(keys["writer"]), create, codes.OK, "acme"},
		{"reader reads", withBearer(keys["reader"]), get, codes.OK, "acme"},
		{"health needs nothing", context.Background(), health, codes.OK, ""},
	}
	for _, c := range cases {
		ran := false
		var saw auth.Identity
		_, err := s.UnaryInterceptor()(c.ctx, nil, c.info, func(ctx context.Context, _ any) (any, error) {
			ran = true
			saw, _ = auth.FromContext(ctx)
			return nil, nil
		})
		if got := status.Code(err); got != c.want {
			t.Errorf("%s: code %s, want %s (%v)", c.name, got, c.want, err)
		}
		if ran != (c.want == codes.OK) {
			t.Errorf("%s: handler ran = %v", c.name, ran)
		}
		if saw.Tenant != c.who {
			t.Errorf("%s: handler saw tenant %q, want %q", c.name, saw.Tenant, c.who)
		}
		if c.want == codes.Unauthenticated && status.Convert(err).Message() != messageOf[fault.ReasonUnauthenticated] {
			t.Errorf("%s: message %q tells more than the one refusal message", c.name, status.Convert(err).Message())
		}
	}
	if len(obs.refused) != 8 || len(obs.served) != 2 {
		t.Errorf("observer heard %d refusals and %d served calls, want 8 and 2:\n%v\n%v", len(obs.refused), len(obs.served), obs.refused, obs.served)
	}
}

// A handler reached without the guard (a wiring mistake) refuses rather
// than act for a tenant it does not know.
func TestHandlersWithoutAnIdentityRefuse(t *testing.T) {
	s, _, _ := newTestAPI(t, testKey)
	_, err := s.CreateOrder(context.Background(), &ordersv1.CreateOrderRequest{RequestId: validID})
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("CreateOrder without identity: %v, want UNAUTHENTICATED", err)
	}
	_, err = s.GetOrder(context.Background(), &ordersv1.GetOrderRequest{OrderId: validID})
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("GetOrder without identity: %v, want UNAUTHENTICATED", err)
	}
}

func TestEveryOrderServiceMethodHasAPermission(t *testing.T) {
	for _, m := range ordersv1.OrderService_ServiceDesc.Methods {
		full := "/" + ordersv1.OrderService_ServiceDesc.ServiceName + "/" + m.MethodName
		if _, ok := permissionOf[full]; !ok {
			t.Errorf("%s has no permission: every call would be refused", full)
		}
	}
}

// fakeRequeuer answers as the ledger's Requeue: the row as it is after
// the call (PENDING, the raw state, for a requeued or a finished create).
type fakeRequeuer struct {
	keys    []ledger.Key
	command []byte // of every row it returns
}

func (f *fakeRequeuer) Requeue(_ context.Context, key ledger.Key) (ledger.Record, error) {
	f.keys = append(f.keys, key)
	if key.Tenant != "acme" {
		return ledger.Record{}, ledger.ErrNotFound
	}
	return ledger.Record{Key: key, State: ledger.Pending, Command: f.command, EntityID: order.ID(key.Tenant, key.RequestID)}, nil
}

// Scan is not the requeue's: no test here lists through it.
func (f *fakeRequeuer) Scan(context.Context, ledger.ScanFilter, int, []byte) (ledger.ScanPage, error) {
	return ledger.ScanPage{}, errors.New("fakeRequeuer: no scans")
}

func newRequeueAPI(t *testing.T, r workflow.RequestLedger, proj workflow.Projector) *Server {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	wf := workflow.New(workflow.Config{}, &spyLedger{}, proj, nil, log)
	s, err := New(Config{PageTokenKey: testKey, Auth: &auth.Authenticator{}, Requests: workflow.NewRequests(wf, r)}, wf, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// RequeueRequest answers a finished create (whose ledger row still says
// PENDING) as COMPLETE, as GetRequest does, not as the raw row.
func TestRequeueRequestOfAFinishedCreateSaysComplete(t *testing.T) {
	_, cmd, err := order.Canonicalize(order.Input{RequestID: validID, CustomerID: "cust-1", Total: "1.00", Currency: "EUR"})
	if err != nil {
		t.Fatal(err)
	}
	proj := projectiontest.NewMemory()
	s := newRequeueAPI(t, &fakeRequeuer{command: cmd.Encode()}, proj)
	resp, err := s.RequeueRequest(acme(), &ordersv1.RequeueRequestRequest{RequestId: validID})
	if err != nil || resp.GetRequest().GetState() != ordersv1.RequestState_REQUEST_STATE_PENDING {
		t.Fatalf("before its order is recorded: %v, %v; want PENDING", resp, err)
	}
	if err := proj.Write(context.Background(), order.New("acme", uuid.MustParse(validID), cmd, time.Now())); err != nil {
		t.Fatal(err)
	}
	resp, err = s.RequeueRequest(acme(), &ordersv1.RequeueRequestRequest{RequestId: validID})
	if err != nil || resp.GetRequest().GetState() != ordersv1.RequestState_REQUEST_STATE_COMPLETE {
		t.Errorf("once its order is recorded: %v, %v; want COMPLETE", resp, err)
	}
}

// RequeueRequest acts on the caller's tenant's request only.
func TestRequeueRequestIsScopedToTheCallersTenant(t *testing.T) {
	r := &fakeRequeuer{}
	s := newRequeueAPI(t, r, projectiontest.NewMemory())
	resp, err := s.RequeueRequest(acme(), &ordersv1.RequeueRequestRequest{RequestId: validID})
	if err != nil || resp.Request.State != ordersv1.RequestState_REQUEST_STATE_PENDING || resp.Request.Tenant != "acme" {
		t.Fatalf("RequeueRequest = %v, %v", resp, err)
	}
	other := auth.NewContext(context.Background(), auth.Identity{Tenant: "globex", Permissions: auth.Admin})
	if _, err := s.RequeueRequest(other, &ordersv1.RequeueRequestRequest{RequestId: validID}); status.Code(err) != codes.NotFound {
		t.Errorf("another tenant: %v, want NOT_FOUND", err)
	}
	if _, err := s.RequeueRequest(acme(), &ordersv1.RequeueRequestRequest{RequestId: "x"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("bad id: %v, want INVALID_ARGUMENT", err)
	}
	if len(r.keys) != 2 || r.keys[0].Tenant != "acme" || r.keys[1].Tenant != "globex" {
		t.Errorf("keys requeued: %v", r.keys)
	}
}
