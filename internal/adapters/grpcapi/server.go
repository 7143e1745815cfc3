// Package grpcapi adapts the use cases (internal/app/workflow) to the
// atlasmart.orders.v1.OrderService gRPC API. It is transport only: it
// converts messages, authenticates and authorizes calls, signs and checks
// page tokens, calls the use cases, and maps errors to status codes — all
// in Status, the one place where that happens. It knows no store.
package grpcapi

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/atlasmart/orderd/internal/adapters/auth"
	"github.com/atlasmart/orderd/internal/adapters/orderpb"
	"github.com/atlasmart/orderd/internal/app/workflow"
	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/platform/lograte"
	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

// ReplayedHeader is the response header that says whether CreateOrder's
// answer is a recorded outcome.
const ReplayedHeader = "idempotency-replayed"

// Config is the adapter's settings.
type Config struct {
	// PageTokenKey seals ListCustomerOrders and ListRequests page tokens
	// (the cipher's key is derived from it); at least
	// MinPageTokenKeyLength bytes. Every instance behind one address
	// needs the same key, and a token lives only as long as its key.
	PageTokenKey []byte
	// Auth establishes each caller's identity; required. Every call but
	// health and reflection is refused without one (docs/security.md).
	Auth *auth.Authenticator
	// AuthObserver hears identity decisions; nil hears nothing.
	AuthObserver AuthObserver
	// Requests serves GetRequest, and, if it is operable
	// (workflow.Requests.Operable), ListRequests and RequeueRequest; nil:
	// GetRequest alone, and the other two are UNIMPLEMENTED.
	Requests *workflow.Requests
}

// Server implements ordersv1.OrderServiceServer.
type Server struct {
	ordersv1.UnimplementedOrderServiceServer
	wf       *workflow.Service
	orders   *workflow.Orders
	requests *workflow.Requests
	tokens   pageTokens
	guard    guard
	log      *slog.Logger
	refusals *lograte.Sampler[refusalKind]
}

var _ ordersv1.OrderServiceServer = (*Server)(nil)

// New returns a Server, or an error if cfg cannot work: wf runs the
// writes, orders serves the order reads.
func New(cfg Config, wf *workflow.Service, orders *workflow.Orders, log *slog.Logger) (*Server, error) {
	tokens, err := newPageTokens(cfg.PageTokenKey)
	if err != nil {
		return nil, err
	}
	if cfg.Auth == nil {
		return nil, errors.New("no authenticator: every call needs a verified identity")
	}
	if cfg.AuthObserver == nil {
		cfg.AuthObserver = nopAuthObserver{}
	}
	if cfg.Requests == nil {
		cfg.Requests = workflow.NewRequests(wf, nil)
	}
	s := &Server{wf: wf, orders: orders, requests: cfg.Requests, tokens: tokens, log: log,
		refusals: lograte.New[refusalKind](nil)}
	s.guard = guard{authn: cfg.Auth, observer: cfg.AuthObserver, status: s.Status}
	return s, nil
}

// UnaryInterceptor authenticates and authorizes every unary call, so it
// must run before any handler: install it on the grpc.Server.
func (s *Server) UnaryInterceptor() grpc.UnaryServerInterceptor { return s.guard.UnaryInterceptor() }

// StreamInterceptor is UnaryInterceptor for streaming calls.
func (s *Server) StreamInterceptor() grpc.StreamServerInterceptor { return s.guard.StreamInterceptor() }

// CreateOrder implements ordersv1.OrderServiceServer.
func (s *Server) CreateOrder(ctx context.Context, req *ordersv1.CreateOrderRequest) (*ordersv1.CreateOrderResponse, error) {
	in := order.Input{RequestID: req.GetRequestId(), CustomerID: req.GetCustomerId(), Total: req.GetTotal(), Currency: req.GetCurrency()}
	for _, l := range req.GetLines() {
		in.Lines = append(in.Lines, order.LineInput{SKU: l.GetSku(), Quantity: l.GetQuantity(), UnitPrice: l.GetUnitPrice()})
	}
	id, err := caller(ctx)
	if err != nil {
		return nil, s.Status(ctx, "CreateOrder", err)
	}
	res, err := s.wf.CreateOrder(ctx, id.Tenant, in)
	if err != nil {
		// The refusal names the request, never its payload (customer, amounts).
		return nil, s.Status(ctx, "CreateOrder", err, slog.String("request_id", clip(req.GetRequestId())),
			slog.String("tenant", id.Tenant), slog.String("outcome", string(workflow.OutcomeOf(err))))
	}
	s.setReplayed(ctx, res.Replayed)
	s.log.InfoContext(ctx, "create order", "request_id", res.Order.RequestID, "tenant", res.Order.Tenant, "client", id.Name, "outcome", string(res.Outcome),
		"order_id", res.Order.ID, "replayed", res.Replayed)
	return &ordersv1.CreateOrderResponse{Order: orderpb.Order(res.Order), Replayed: res.Replayed}, nil
}

// CancelOrder implements ordersv1.OrderServiceServer.
func (s *Server) CancelOrder(ctx context.Context, req *ordersv1.CancelOrderRequest) (*ordersv1.CancelOrderResponse, error) {
	res, err := s.changeOrder(ctx, "CancelOrder", order.ChangeInput{Operation: order.OperationCancel,
		RequestID: req.GetRequestId(), OrderID: req.GetOrderId(), ExpectedVersion: req.GetExpectedVersion()})
	if err != nil {
		return nil, err
	}
	return &ordersv1.CancelOrderResponse{ChangeId: res.Change.ID.String(), Version: res.Change.Version,
		Order: orderpb.Order(res.Order), Replayed: res.Replayed}, nil
}

// AmendOrder implements ordersv1.OrderServiceServer.
func (s *Server) AmendOrder(ctx context.Context, req *ordersv1.AmendOrderRequest) (*ordersv1.AmendOrderResponse, error) {
	res, err := s.changeOrder(ctx, "AmendOrder", order.ChangeInput{Operation: order.OperationAmend,
		RequestID: req.GetRequestId(), OrderID: req.GetOrderId(), ExpectedVersion: req.GetExpectedVersion(),
		ShippingNote: req.GetShippingNote()})
	if err != nil {
		return nil, err
	}
	return &ordersv1.AmendOrderResponse{ChangeId: res.Change.ID.String(), Version: res.Change.Version,
		Order: orderpb.Order(res.Order), Replayed: res.Replayed}, nil
}

// changeOrder runs one change attempt for method and sets the replayed
// header, as CreateOrder does.
func (s *Server) changeOrder(ctx context.Context, method string, in order.ChangeInput) (workflow.ChangeResult, error) {
	id, err := caller(ctx)
	if err != nil {
		return workflow.ChangeResult{}, s.Status(ctx, method, err)
	}
	res, err := s.wf.ChangeOrder(ctx, id.Tenant, in)
	if err != nil {
		// The refusal names the request and the order, never the note.
		return workflow.ChangeResult{}, s.Status(ctx, method, err, slog.String("request_id", clip(in.RequestID)),
			slog.String("order_id", clip(in.OrderID)), slog.String("tenant", id.Tenant),
			slog.String("outcome", string(workflow.OutcomeOf(err))))
	}
	s.setReplayed(ctx, res.Replayed)
	s.log.InfoContext(ctx, "change order", "operation", in.Operation, "request_id", res.Change.RequestID, "tenant", id.Tenant,
		"client", id.Name, "outcome", string(res.Outcome), "order_id", res.Order.ID, "version", res.Change.Version,
		"replayed", res.Replayed)
	return res, nil
}

// setReplayed sets the response header that mirrors a write's replayed flag.
func (s *Server) setReplayed(ctx context.Context, replayed bool) {
	if err := grpc.SetHeader(ctx, metadata.Pairs(ReplayedHeader, strconv.FormatBool(replayed))); err != nil {
		s.log.WarnContext(ctx, "could not set response header", "error", err)
	}
}

// GetRequest implements ordersv1.OrderServiceServer.
func (s *Server) GetRequest(ctx context.Context, req *ordersv1.GetRequestRequest) (*ordersv1.GetRequestResponse, error) {
	who, err := caller(ctx)
	if err != nil {
		return nil, s.Status(ctx, "GetRequest", err)
	}
	id, v := parseUUID("request_id", req.GetRequestId())
	op := req.GetOperation()
	switch op {
	case "":
		op = order.OperationCreate
	case order.OperationCreate, order.OperationCancel, order.OperationAmend: // what the ledger records
	default:
		v = append(v, fault.Violation{Field: "operation", Description: "must be " + order.OperationCreate + " (the default when empty), " +
			order.OperationCancel + " or " + order.OperationAmend})
	}
	if len(v) > 0 {
		return nil, s.Status(ctx, "GetRequest", fault.InvalidArgs(v))
	}
	rec, err := s.requests.Get(ctx, who.Tenant, op, id)
	if err != nil {
		return nil, s.Status(ctx, "GetRequest", err, slog.String("request_id", id.String()))
	}
	return &ordersv1.GetRequestResponse{Request: writeRequest(rec)}, nil
}

// RequeueRequest implements ordersv1.OrderServiceServer.
func (s *Server) RequeueRequest(ctx context.Context, req *ordersv1.RequeueRequestRequest) (*ordersv1.RequeueRequestResponse, error) {
	if !s.requests.Operable() {
		return nil, status.Error(codes.Unimplemented, "requeue is not available on this server")
	}
	who, err := caller(ctx)
	if err != nil {
		return nil, s.Status(ctx, "RequeueRequest", err)
	}
	id, v := parseUUID("request_id", req.GetRequestId())
	if len(v) > 0 {
		return nil, s.Status(ctx, "RequeueRequest", fault.InvalidArgs(v))
	}
	// The one requeue, shared with `orderd requeue`: it answers as
	// GetRequest would (a finished create's row says PENDING in the ledger).
	rec, err := s.requests.Requeue(ctx, who.Tenant, id)
	if err != nil {
		return nil, s.Status(ctx, "RequeueRequest", err, slog.String("request_id", id.String()))
	}
	s.log.InfoContext(ctx, "requeued", "request_id", id, "tenant", who.Tenant, "client", who.Name, "state", string(rec.State))
	return &ordersv1.RequeueRequestResponse{Request: writeRequest(rec)}, nil
}

// writeRequest is the client's view of a request.
func writeRequest(rec workflow.Request) *ordersv1.WriteRequest {
	out := &ordersv1.WriteRequest{
		RequestId:          rec.RequestID.String(),
		Tenant:             rec.Tenant,
		Operation:          rec.Operation,
		State:              toState(rec.State),
		OrderId:            rec.OrderID.String(),
		PayloadFingerprint: rec.Fingerprint,
		CreatedAt:          timestamppb.New(rec.CreatedAt),
		Attempts:           int32(rec.Attempts),
		LastError:          lastError(rec.LastError),
	}
	if !rec.CompletedAt.IsZero() {
		out.CompletedAt = timestamppb.New(rec.CompletedAt)
	}
	return out
}

// GetOrder implements ordersv1.OrderServiceServer.
func (s *Server) GetOrder(ctx context.Context, req *ordersv1.GetOrderRequest) (*ordersv1.GetOrderResponse, error) {
	who, err := caller(ctx)
	if err != nil {
		return nil, s.Status(ctx, "GetOrder", err)
	}
	id, v := parseUUID("order_id", req.GetOrderId())
	if len(v) > 0 {
		return nil, s.Status(ctx, "GetOrder", fault.InvalidArgs(v))
	}
	// Another tenant's order is looked up under this tenant's key: it is
	// not found, exactly as an id that never existed.
	o, err := s.orders.Get(ctx, who.Tenant, id)
	if err != nil {
		return nil, s.Status(ctx, "GetOrder", err, slog.String("order_id", id.String()))
	}
	return &ordersv1.GetOrderResponse{Order: orderpb.Order(o)}, nil
}

// lastError is a request's last_error as a client may see it: a stable
// reason (fault.Reason). Anything else (driver text recorded by an older
// version, still within its retention) is shown as INTERNAL, never as is.
func lastError(s string) string {
	if s == "" {
		return ""
	}
	for _, r := range fault.Reasons() {
		if s == string(r) {
			return s
		}
	}
	return string(fault.ReasonInternal)
}

// clip bounds a client-chosen value before it is logged: an invalid
// request_id can be any string.
func clip(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	return strings.ToValidUTF8(s[:max], "") + "..."
}

// parseUUID parses a UUID field, or says what is wrong with it. Only the
// 36-character form is accepted, which also bounds the field's length.
func parseUUID(field, s string) (uuid.UUID, []fault.Violation) {
	id, err := uuid.Parse(s)
	if err != nil || len(s) != 36 {
		return uuid.Nil, []fault.Violation{{Field: field, Description: "must be a UUID in its 36-character form"}}
	}
	return id, nil
}

func toState(s workflow.RequestState) ordersv1.RequestState {
	switch s {
	case workflow.RequestPending:
		return ordersv1.RequestState_REQUEST_STATE_PENDING
	case workflow.RequestComplete:
		return ordersv1.RequestState_REQUEST_STATE_COMPLETE
	case workflow.RequestFailed:
		return ordersv1.RequestState_REQUEST_STATE_FAILED
	}
	return ordersv1.RequestState_REQUEST_STATE_UNSPECIFIED
}
