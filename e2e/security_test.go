package e2e

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/tools/clientcreds"
	"github.com/atlasmart/orderd/internal/tools/devpki"
	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

var keyLine = regexp.MustCompile(`key id ([0-9a-f]{12}) .*: (odk_[0-9a-f]{12}_[A-Za-z0-9_-]+)`)

// addKey adds an API key to the run's key file with `orderd keys add`, as
// an operator would, and waits until p has reloaded it. It returns the key
// and its id.
func addKey(t *testing.T, p *orderdProcess, keyTenant, perms string) (key, id string) {
	t.Helper()
	out, err := runOrderd(callCtx(t), "keys", "add", "-file", sec.files.APIKeys(), "-tenant", keyTenant, "-name", t.Name(), "-permissions", perms)
	if err != nil {
		t.Fatalf("orderd keys add: %v\n%s", err, out)
	}
	m := keyLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("orderd keys add printed no key:\n%s", out)
	}
	waitKey(t, p, m[2], true)
	return m[2], m[1]
}

// waitKey waits until p accepts key (or, accepted=false, refuses it): a
// GetOrder of an id that exists nowhere is NOT_FOUND or PERMISSION_DENIED
// once the key verifies, UNAUTHENTICATED while it does not.
func waitKey(t *testing.T, p *orderdProcess, key string, accepted bool) {
	t.Helper()
	c := dialAs(t, p.addr, sec.files.Client(key))
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := c.GetOrder(callCtx(t), &ordersv1.GetOrderRequest{OrderId: uuid.NewString()})
		if (status.Code(err) != codes.Unauthenticated) == accepted {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("key not %s by orderd within 10 s of the key file change (last: %v)", map[bool]string{true: "accepted", false: "refused"}[accepted], err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// nothingWritten checks that no tenant holds a ledger row or an order for
// a request id.
func nothingWritten(t *testing.T, requestID string, tenants ...string) {
	t.Helper()
	s := freshSession(t)
	for _, tn := range tenants {
		var n int
		if err := s.Query(`SELECT count(*) FROM write_requests_by_id WHERE tenant = ? AND operation = 'CREATE_ORDER' AND request_id = ?`,
			tn, requestID).ScanContext(callCtx(t), &n); err != nil {
			t.Fatal(err)
		}
		var m int
		if err := s.Query(`SELECT count(*) FROM orders_by_id WHERE tenant = ? AND order_id = ?`,
			tn, order.ID(tn, uuid.MustParse(requestID)).String()).ScanContext(callCtx(t), &m); err != nil {
			t.Fatal(err)
		}
		if n != 0 || m != 0 {
			t.Errorf("request %s: tenant %s holds %d ledger rows and %d orders, want none", requestID, tn, n, m)
		}
	}
}

// Calls without a valid identity are refused before anything runs:
// UNAUTHENTICATED for missing, wrong, unknown and expired credentials, a
// failed handshake (UNAVAILABLE) for a certificate of another CA, a client
// that does not trust the server, and plaintext; PERMISSION_DENIED for a
// key without the call's permission. None writes a row. A valid API key,
// JWT and client certificate each act for the tenant they name.
func TestCallsWithoutAValidIdentityAreRefusedAndWriteNothing(t *testing.T) {
	p := server(t)
	readOnly, _ := addKey(t, p, tenant, "read")
	foreign, err := devpki.NewCA("a stranger's CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	strangerCert, err := foreign.Client(tenant, "stranger", []string{"create", "read", "admin"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) string { return writeSecret(t, dir, name, data) }
	strangerCA := write("stranger-ca.pem", foreign.CertPEM())
	strangerCertFile, strangerKeyFile := write("stranger.pem", strangerCert.CertPEM), write("stranger-key.pem", strangerCert.KeyPEM)
	tampered := sec.defaultKey[:len(sec.defaultKey)-2] + "xx"
	unknown := "odk_000000000000_" + base64.RawURLEncoding.EncodeToString(make([]byte, 32))

	refusedBefore := scrape(t, p, `orderd_auth_refused_total{method="/atlasmart.orders.v1.OrderService/CreateOrder",reason="UNAUTHENTICATED"}`)
	cases := []struct {
		name  string
		creds clientcreds.Options
		want  codes.Code
	}{
		{"no credentials", clientcreds.Options{CAFile: sec.files.CA()}, codes.Unauthenticated},
		{"wrong api key", sec.files.Client(tampered), codes.Unauthenticated},
		{"unknown api key", sec.files.Client(unknown), codes.Unauthenticated},
		{"expired jwt", sec.files.Client(sec.jwtFor(t, tenant, []string{"create"}, time.Now().Add(-2*time.Minute))), codes.Unauthenticated},
		{"unsigned jwt (alg none)", sec.files.Client("eyJhbGciOiJub25lIn0.eyJ0ZW5hbnQiOiJkZWZhdWx0In0."), codes.Unauthenticated},
		// Go's TLS client sends no certificate the server's CA list does
		// not name: the call arrives without credentials.
		{"client certificate of another CA", clientcreds.Options{CAFile: sec.files.CA(), CertFile: strangerCertFile, KeyFile: strangerKeyFile}, codes.Unauthenticated},
		{"client trusting another CA", clientcreds.Options{CAFile: strangerCA, Token: sec.defaultKey}, codes.Unavailable},
		{"plaintext", clientcreds.Options{Plaintext: true}, codes.Unavailable},
		{"read-only key creates", sec.files.Client(readOnly), codes.PermissionDenied},
	}
	for _, c := range cases {
		req := newRequest("12.00")
		_, _, err := create(t, dialAs(t, p.addr, c.creds), req)
		if got := status.Code(err); got != c.want {
			t.Errorf("%s: %v, want %s", c.name, err, c.want)
		}
		nothingWritten(t, req.RequestId, tenant)
		t.Logf("%-45s -> %s", c.name, status.Code(err))
	}
	// A client that presents the stranger's certificate anyway fails the
	// handshake: the server verifies every certificate it is given.
	pushy, err := clientcreds.Options{CAFile: sec.files.CA()}.TLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := tls.LoadX509KeyPair(strangerCertFile, strangerKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	pushy.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &stranger, nil }
	conn, err := grpc.NewClient(p.addr, grpc.WithTransportCredentials(credentials.NewTLS(pushy)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := newRequest("12.00")
	_, err = ordersv1.NewOrderServiceClient(conn).CreateOrder(callCtx(t), req)
	if status.Code(err) != codes.Unavailable {
		t.Errorf("client certificate of another CA, presented anyway: %v, want UNAVAILABLE (handshake refused)", err)
	}
	nothingWritten(t, req.RequestId, tenant)
	t.Logf("%-45s -> %s", "client certificate of another CA, presented", status.Code(err))

	if got := scrape(t, p, `orderd_auth_refused_total{method="/atlasmart.orders.v1.OrderService/CreateOrder",reason="UNAUTHENTICATED"}`) - refusedBefore; got != 6 {
		t.Errorf("UNAUTHENTICATED refusals counted: %v, want 6 (the TLS failures never reach a handler)", got)
	}

	valid := map[string]clientcreds.Options{
		"api key":            sec.defaultClient(),
		"jwt":                sec.files.Client(sec.jwtFor(t, tenant, []string{"create", "read"}, time.Now().Add(time.Hour))),
		"client certificate": {CAFile: sec.files.CA(), CertFile: sec.files.ClientCert(), KeyFile: sec.files.ClientKey()},
	}
	for name, creds := range valid {
		c := dialAs(t, p.addr, creds)
		req := newRequest("13.00")
		resp, _, err := create(t, c, req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := c.GetRequest(callCtx(t), &ordersv1.GetRequestRequest{RequestId: req.RequestId})
		if err != nil || got.GetRequest().GetTenant() != tenant || got.GetRequest().GetOrderId() != resp.GetOrder().GetOrderId() {
			t.Errorf("%s: GetRequest = %v, %v; want the order, tenant %s", name, got, err, tenant)
		}
	}
}

// One request id used by two tenants is two requests with two orders, and
// every probe by one tenant of the other's request ids, order ids,
// customer listings and page tokens is answered exactly as for ids and
// tokens that never existed.
func TestTenantsAreIsolated(t *testing.T) {
	p := server(t)
	acmeKey, _ := addKey(t, p, "acme", "create,read")
	globexKey, _ := addKey(t, p, "globex", "create,read")
	acme, globex := dialAs(t, p.addr, sec.files.Client(acmeKey)), dialAs(t, p.addr, sec.files.Client(globexKey))

	shared := newRequest("10.00")
	a, _, err := create(t, acme, shared)
	if err != nil {
		t.Fatal(err)
	}
	theirs := proto.Clone(shared).(*ordersv1.CreateOrderRequest)
	theirs.CustomerId, theirs.Total = "cust-globex", "99.00"
	b, _, err := create(t, globex, theirs)
	if err != nil {
		t.Fatalf("globex with acme's request id and another payload: %v (want a new order)", err)
	}
	if a.Replayed || b.Replayed || a.Order.OrderId == b.Order.OrderId {
		t.Fatalf("same request id, two tenants: %v and %v; want two new orders", a.Order, b.Order)
	}
	r, err := globex.GetRequest(callCtx(t), &ordersv1.GetRequestRequest{RequestId: shared.RequestId})
	if err != nil || r.Request.Tenant != "globex" || r.Request.OrderId != b.Order.OrderId {
		t.Errorf("globex reading the shared request id: %v, %v; want its own request", r, err)
	}
	// Each order's ORDER_CREATED event is published under an id of its own
	// (publishedEvents also checks that every record's id is the one its
	// tenant and request id derive): a consumer deduplicating by event id
	// applies both orders.
	events := []string{createdEventIDOf("acme", shared.RequestId), createdEventIDOf("globex", shared.RequestId)}
	if events[0] == events[1] || events[0] == shared.RequestId {
		t.Fatalf("event ids %v for one request id of two tenants", events)
	}
	counts := publishedEvents(t, eventsTopic, events, 30*time.Second)
	if counts[events[0]] < 1 || counts[events[1]] < 1 || counts[shared.RequestId] != 0 {
		t.Errorf("records by event id = %v, want acme's and globex's events under ids of their own", counts)
	}

	// acme's private data: a request only acme used, two orders of one
	// customer and a page token over them.
	private := newRequest("11.00")
	private.CustomerId = shared.CustomerId
	pa, _, err := create(t, acme, private)
	if err != nil {
		t.Fatal(err)
	}
	month := pa.Order.OrderMonth[:7]
	page, err := acme.ListCustomerOrders(callCtx(t), &ordersv1.ListCustomerOrdersRequest{CustomerId: shared.CustomerId, Month: month, PageSize: 1})
	if err != nil || page.NextPageToken == "" {
		t.Fatalf("acme's first page: %v, %v; want a next page token", page, err)
	}
	neverIssued := base64.RawURLEncoding.EncodeToString(make([]byte, len(page.NextPageToken)*3/4))

	sameAnswer := func(what string, probe, never error) {
		t.Helper()
		ps, ns := status.Convert(probe), status.Convert(never)
		if !proto.Equal(ps.Proto(), ns.Proto()) {
			t.Errorf("%s: probe answered %v, a never-existing one %v: distinguishable", what, ps.Proto(), ns.Proto())
		}
		t.Logf("%-30s -> %s", what, ps.Code())
	}
	_, probe := globex.GetRequest(callCtx(t), &ordersv1.GetRequestRequest{RequestId: private.RequestId})
	_, never := globex.GetRequest(callCtx(t), &ordersv1.GetRequestRequest{RequestId: uuid.NewString()})
	if status.Code(probe) != codes.NotFound {
		t.Errorf("GetRequest of acme's request id: %v, want NOT_FOUND", probe)
	}
	sameAnswer("acme's request id", probe, never)
	_, probe = globex.GetOrder(callCtx(t), &ordersv1.GetOrderRequest{OrderId: pa.Order.OrderId})
	_, never = globex.GetOrder(callCtx(t), &ordersv1.GetOrderRequest{OrderId: uuid.NewString()})
	if status.Code(probe) != codes.NotFound {
		t.Errorf("GetOrder of acme's order id: %v, want NOT_FOUND", probe)
	}
	sameAnswer("acme's order id", probe, never)
	list, err := globex.ListCustomerOrders(callCtx(t), &ordersv1.ListCustomerOrdersRequest{CustomerId: shared.CustomerId, Month: month})
	if err != nil || len(list.Orders) != 0 || list.NextPageToken != "" {
		t.Errorf("globex listing acme's customer: %v, %v; want an empty list", list, err)
	}
	_, probe = globex.ListCustomerOrders(callCtx(t), &ordersv1.ListCustomerOrdersRequest{CustomerId: shared.CustomerId, Month: month, PageToken: page.NextPageToken})
	_, never = globex.ListCustomerOrders(callCtx(t), &ordersv1.ListCustomerOrdersRequest{CustomerId: shared.CustomerId, Month: month, PageToken: neverIssued})
	if probe == nil {
		t.Errorf("globex continuing acme's listing with acme's page token was answered")
	}
	sameAnswer("acme's page token", probe, never)

	if got := scrape(t, p, `orderd_tenant_requests_total{code="OK",method="/atlasmart.orders.v1.OrderService/CreateOrder",tenant="acme"}`); got < 2 {
		t.Errorf("acme's OK CreateOrder calls counted: %v, want at least 2", got)
	}
}

// A key revoked in the key file is refused at the next reload, replays of
// its earlier requests included; nothing changes in the rows.
func TestRevokedKeyIsRefusedEvenForAReplay(t *testing.T) {
	p := server(t)
	key, id := addKey(t, p, tenant, "create")
	c := dialAs(t, p.addr, sec.files.Client(key))
	req := newRequest("14.00")
	first, _, err := create(t, c, req)
	if err != nil {
		t.Fatal(err)
	}
	if again, _, err := create(t, c, req); err != nil || !again.Replayed {
		t.Fatalf("replay before revoking: %v, %v", again, err)
	}
	if out, err := runOrderd(callCtx(t), "keys", "revoke", "-file", sec.files.APIKeys(), id); err != nil {
		t.Fatalf("orderd keys revoke: %v\n%s", err, out)
	}
	waitKey(t, p, key, false)
	_, _, err = create(t, c, req)
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("replay with the revoked key: %v, want UNAUTHENTICATED", err)
	}
	if again, _, err := create(t, dialClient(t, p.addr), req); err != nil || !again.Replayed || again.Order.OrderId != first.Order.OrderId {
		t.Errorf("replay with a valid key of the tenant: %v, %v; want the recorded order", again, err)
	}
	assertExactlyOneOrder(t, req, first.Order, "14.00")
}

// One tenant flooding orderd is limited to its rate while another tenant's
// requests keep succeeding.
func TestFloodFromOneTenantIsLimitedWhileAnotherKeepsSucceeding(t *testing.T) {
	p := startOrderd(t, "ORDERD_RECONCILER=false", "ORDERD_RATE_ATTEMPTS=5", "ORDERD_RATE_REPLAYS=0")
	floodKey, _ := addKey(t, p, "flooder", "create")
	calmKey, _ := addKey(t, p, "calm", "create")
	flood, calm := dialAs(t, p.addr, sec.files.Client(floodKey)), dialAs(t, p.addr, sec.files.Client(calmKey))

	var mu sync.Mutex
	counts := map[string]int{}
	count := func(who string, err error) {
		mu.Lock()
		defer mu.Unlock()
		counts[who+" "+status.Code(err).String()]++
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for ctx.Err() == nil {
				_, err := flood.CreateOrder(callCtx(t), newRequest("1.00"))
				count("flooder", err)
			}
		})
	}
	wg.Go(func() {
		for ctx.Err() == nil {
			_, err := calm.CreateOrder(callCtx(t), newRequest("2.00"))
			count("calm", err)
			time.Sleep(250 * time.Millisecond)
		}
	})
	wg.Wait()
	t.Logf("3 s, 5 attempts/s per tenant: %v", counts)
	if counts["flooder ResourceExhausted"] == 0 || counts["flooder OK"] == 0 {
		t.Errorf("flooder: %d OK, %d RESOURCE_EXHAUSTED; want both", counts["flooder OK"], counts["flooder ResourceExhausted"])
	}
	for k, n := range counts {
		if strings.HasPrefix(k, "calm ") && k != "calm OK" {
			t.Errorf("calm tenant: %d calls answered %s; want every call OK", n, strings.TrimPrefix(k, "calm "))
		}
	}
	if counts["calm OK"] == 0 {
		t.Error("calm tenant: no call answered")
	}
}

// A handler that panics is answered INTERNAL with nothing written, and the
// process goes on serving: the same request then succeeds.
func TestHandlerPanicIsAnsweredInternalAndTheNextCallSucceeds(t *testing.T) {
	p := startOrderd(t, "ORDERD_RECONCILER=false", "ORDERD_FAILPOINTS=before-claim=panic*1")
	req := newRequest("15.00")
	_, _, err := create(t, p.client, req)
	if st := status.Convert(err); st.Code() != codes.Internal || strings.Contains(st.Message(), "panic") {
		t.Fatalf("panicking call: %v; want INTERNAL without the panic's text", err)
	}
	nothingWritten(t, req.RequestId, tenant)
	resp, _, err := create(t, p.client, req)
	if err != nil || resp.Replayed {
		t.Fatalf("the same request after the panic: %v, %v; want a new order", resp, err)
	}
	assertExactlyOneOrder(t, req, resp.Order, "15.00")
	select {
	case <-p.exited:
		t.Fatal("orderd exited")
	default:
	}
	if !strings.Contains(p.output.String(), "injected panic") {
		t.Errorf("the panic was not logged:\n%s", p.output.String())
	}
	if got := scrape(t, p, fmt.Sprintf(`orderd_grpc_requests_total{code="Internal",method=%q}`, ordersv1.OrderService_CreateOrder_FullMethodName)); got != 1 {
		t.Errorf("INTERNAL answers counted: %v, want 1", got)
	}
}
