package grpcapi

import (
	"context"
	"crypto/x509"
	"errors"
	"log/slog"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/atlasmart/orderd/internal/adapters/auth"
	"github.com/atlasmart/orderd/internal/domain/fault"
	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

// permissionOf is the one table of what each call needs. A method of a
// registered service that is missing here is refused (closed by default);
// publicPrefixes are the services anyone may call.
var permissionOf = map[string]auth.Permissions{
	ordersv1.OrderService_CreateOrder_FullMethodName:        auth.Create,
	ordersv1.OrderService_CancelOrder_FullMethodName:        auth.Create,
	ordersv1.OrderService_AmendOrder_FullMethodName:         auth.Create,
	ordersv1.OrderService_GetRequest_FullMethodName:         auth.Read,
	ordersv1.OrderService_GetOrder_FullMethodName:           auth.Read,
	ordersv1.OrderService_ListCustomerOrders_FullMethodName: auth.Read,
	ordersv1.OrderService_RequeueRequest_FullMethodName:     auth.Admin,
	ordersv1.OrderService_ListRequests_FullMethodName:       auth.Admin,
}

// publicPrefixes: health (probes and load balancers carry no credentials;
// it says only SERVING or not) and reflection (the schema, no data; it can
// be turned off).
var publicPrefixes = []string{"/grpc.health.v1.Health/", "/grpc.reflection."}

// AuthObserver hears each call's identity decision (for per-tenant
// metrics). Implementations must be cheap and safe for concurrent use.
type AuthObserver interface {
	// Refused: a call without a verified identity, or without the
	// permission it needs; reason is the fault reason.
	Refused(method string, reason fault.Reason)
	// Served: an authenticated call ended with code.
	Served(tenant, method, code string)
}

// guard authenticates and authorizes every call before its handler runs.
type guard struct {
	authn    *auth.Authenticator
	observer AuthObserver
	status   func(ctx context.Context, method string, err error, attrs ...slog.Attr) error
}

// admit returns the context carrying the caller's identity, or the status
// refusing the call. Nothing else has run yet, so a refusal has written
// nothing; a replay is refused like any other call.
func (g *guard) admit(ctx context.Context, method string) (context.Context, auth.Identity, error) {
	for _, p := range publicPrefixes {
		if strings.HasPrefix(method, p) {
			return ctx, auth.Identity{}, nil
		}
	}
	bearer, berr := bearerToken(ctx)
	var id auth.Identity
	err := berr
	if err == nil {
		id, err = g.authn.Authenticate(ctx, bearer, verifiedClientCert(ctx))
	}
	if err != nil {
		g.observer.Refused(method, fault.ReasonUnauthenticated)
		return nil, auth.Identity{}, g.status(ctx, method, fault.New(fault.ReasonUnauthenticated, err))
	}
	need, known := permissionOf[method]
	if !known || !id.Permissions.Has(need) {
		g.observer.Refused(method, fault.ReasonPermissionDenied)
		return nil, auth.Identity{}, g.status(ctx, method, fault.New(fault.ReasonPermissionDenied, nil),
			slog.String("tenant", id.Tenant), slog.String("client", id.Name), slog.String("has", id.Permissions.String()))
	}
	return auth.NewContext(ctx, id), id, nil
}

func (g *guard) served(id auth.Identity, method string, err error) {
	if id.Tenant != "" {
		g.observer.Served(id.Tenant, method, status.Code(err).String())
	}
}

// UnaryInterceptor admits each unary call (see admit).
func (g *guard) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, id, err := g.admit(ctx, info.FullMethod)
		if err != nil {
			return nil, err
		}
		resp, err := handler(ctx, req)
		g.served(id, info.FullMethod, err)
		return resp, err
	}
}

// StreamInterceptor admits each streaming call (health Watch, reflection).
func (g *guard) StreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, id, err := g.admit(ss.Context(), info.FullMethod)
		if err != nil {
			return err
		}
		err = handler(srv, &identityStream{ServerStream: ss, ctx: ctx})
		g.served(id, info.FullMethod, err)
		return err
	}
}

type identityStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *identityStream) Context() context.Context { return s.ctx }

var errBadAuthorization = errors.New(`authorization metadata must be one "Bearer <token>"`)

// bearerToken is the token of the call's authorization metadata, "" if it
// has none.
func bearerToken(ctx context.Context) (string, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	switch len(vals) {
	case 0:
		return "", nil
	case 1:
	default:
		return "", errBadAuthorization
	}
	scheme, token, ok := strings.Cut(vals[0], " ")
	if !ok || !strings.EqualFold(scheme, "bearer") || strings.TrimSpace(token) == "" {
		return "", errBadAuthorization
	}
	return strings.TrimSpace(token), nil
}

// verifiedClientCert is the leaf of the client certificate chain the TLS
// handshake verified against the client CA, or nil.
func verifiedClientCert(ctx context.Context) *x509.Certificate {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return nil
	}
	return info.State.VerifiedChains[0][0]
}

// caller is the verified identity the guard put on ctx. Without one (a
// Server used without its interceptors) every call is refused.
func caller(ctx context.Context) (auth.Identity, error) {
	id, ok := auth.FromContext(ctx)
	if !ok || id.Tenant == "" {
		return auth.Identity{}, fault.New(fault.ReasonUnauthenticated, errors.New("no identity on the call: the guard interceptor is not installed"))
	}
	return id, nil
}

type nopAuthObserver struct{}

func (nopAuthObserver) Refused(string, fault.Reason)  {}
func (nopAuthObserver) Served(string, string, string) {}
