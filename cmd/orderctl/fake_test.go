package main

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

// fakeServer answers from maps: just enough of orderd to drive each
// command's paths that the e2e test cannot reach (a COMPLETE request whose
// order is missing or names another request). The e2e test runs every
// command against the real orderd.
type fakeServer struct {
	ordersv1.UnimplementedOrderServiceServer
	mu       sync.Mutex
	requests map[string]*ordersv1.WriteRequest
	orders   map[string]*ordersv1.Order
	pages    []*ordersv1.ListCustomerOrdersResponse // by the page token's index: "", "1", "2", ...
	events   *[]string                              // the calls, in order with what the test writes there
}

func (f *fakeServer) GetRequest(_ context.Context, req *ordersv1.GetRequestRequest) (*ordersv1.GetRequestResponse, error) {
	if r, ok := f.requests[req.GetRequestId()]; ok {
		return &ordersv1.GetRequestResponse{Request: r}, nil
	}
	return nil, status.Error(codes.NotFound, "no such request")
}

func (f *fakeServer) GetOrder(_ context.Context, req *ordersv1.GetOrderRequest) (*ordersv1.GetOrderResponse, error) {
	if o, ok := f.orders[req.GetOrderId()]; ok {
		return &ordersv1.GetOrderResponse{Order: o}, nil
	}
	return nil, status.Error(codes.NotFound, "no such order")
}

func (f *fakeServer) CreateOrder(_ context.Context, req *ordersv1.CreateOrderRequest) (*ordersv1.CreateOrderResponse, error) {
	f.mu.Lock()
	*f.events = append(*f.events, "call "+req.GetRequestId())
	f.mu.Unlock()
	if req.GetTotal() == "-1" {
		st, _ := status.New(codes.InvalidArgument, "invalid request").WithDetails(&errdetails.BadRequest{
			FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "total", Description: "must be greater than zero"}}})
		return nil, st.Err()
	}
	return &ordersv1.CreateOrderResponse{Order: &ordersv1.Order{OrderId: "o-new", RequestId: req.GetRequestId(), Total: req.GetTotal()}}, nil
}

func (f *fakeServer) ListCustomerOrders(_ context.Context, req *ordersv1.ListCustomerOrdersRequest) (*ordersv1.ListCustomerOrdersResponse, error) {
	i := 0
	if req.GetPageToken() != "" {
		i = int(req.GetPageToken()[0] - '0')
	}
	return f.pages[i], nil
}

// eventLog records writes as events, beside the fake's calls.
type eventLog struct {
	mu     *sync.Mutex
	events *[]string
}

func (l eventLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	*l.events = append(*l.events, "stderr "+string(p))
	return len(p), nil
}

func startFake(t *testing.T, f *fakeServer) string {
	t.Helper()
	if f.events == nil {
		f.events = new([]string)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	ordersv1.RegisterOrderServiceServer(s, f)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	return l.Addr().String()
}

// orderctl runs one command against addr, in plaintext.
func orderctl(t *testing.T, addr string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	t.Setenv("ORDERD_API_KEY", "")
	var out, errOut strings.Builder
	code = run(context.Background(), append(args, "--addr", addr, "--plaintext"), &out, &errOut)
	return code, out.String(), errOut.String()
}

func complete(id, orderID string) *ordersv1.WriteRequest {
	return &ordersv1.WriteRequest{RequestId: id, Operation: "CREATE_ORDER", State: ordersv1.RequestState_REQUEST_STATE_COMPLETE, OrderId: orderID}
}

func TestVerifyFindsEveryKindOfProblem(t *testing.T) {
	const good, pending, failed, unknown, lost, foreign = "00000000-0000-0000-0000-000000000001", "00000000-0000-0000-0000-000000000002",
		"00000000-0000-0000-0000-000000000003", "00000000-0000-0000-0000-000000000004", "00000000-0000-0000-0000-000000000005", "00000000-0000-0000-0000-000000000006"
	addr := startFake(t, &fakeServer{
		requests: map[string]*ordersv1.WriteRequest{
			good:    complete(good, "o1"),
			pending: {RequestId: pending, State: ordersv1.RequestState_REQUEST_STATE_PENDING, LastError: "CLUSTER_UNAVAILABLE"},
			failed:  {RequestId: failed, State: ordersv1.RequestState_REQUEST_STATE_FAILED},
			lost:    complete(lost, "o-gone"),
			foreign: complete(foreign, "o1"),
		},
		orders: map[string]*ordersv1.Order{"o1": {OrderId: "o1", RequestId: good}},
	})
	file := filepath.Join(t.TempDir(), "ids")
	if err := os.WriteFile(file, []byte(strings.Join([]string{good, pending, failed, unknown, lost, foreign}, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := orderctl(t, addr, "verify", "--requests", file, "--json")
	var rep verifyReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != exitProblems {
		t.Fatalf("exit %d, %q (%v), stderr %q", code, stdout, err, stderr)
	}
	want := verifyReport{Checked: 6, Complete: 1, Pending: 1, Failed: 1, Missing: 2, Mismatched: 1}
	if rep.Checked != want.Checked || rep.Complete != want.Complete || rep.Pending != want.Pending || rep.Failed != want.Failed ||
		rep.Missing != want.Missing || rep.Mismatched != want.Mismatched || len(rep.Problems) != 5 {
		t.Errorf("report %+v, want the counts of %+v and 5 problems", rep, want)
	}
	if code, stdout, _ := orderctl(t, addr, "verify", "--requests", writeFile(t, good+"\n")); code != exitOK || !strings.Contains(stdout, "complete") {
		t.Errorf("all good: exit %d, %q", code, stdout)
	}
}

func writeFile(t *testing.T, s string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReplayByState(t *testing.T) {
	const done, pending, failed = "00000000-0000-0000-0000-000000000001", "00000000-0000-0000-0000-000000000002", "00000000-0000-0000-0000-000000000003"
	addr := startFake(t, &fakeServer{
		requests: map[string]*ordersv1.WriteRequest{
			done:    complete(done, "o1"),
			pending: {RequestId: pending, State: ordersv1.RequestState_REQUEST_STATE_PENDING},
			failed:  {RequestId: failed, State: ordersv1.RequestState_REQUEST_STATE_FAILED, LastError: "COMMAND_UNREADABLE"},
		},
		orders: map[string]*ordersv1.Order{"o1": {OrderId: "o1", RequestId: done}},
	})
	for _, c := range []struct {
		id       string
		code     int
		replayed bool
		stderr   string
	}{
		{done, exitOK, true, ""},
		{pending, exitRetry, false, "--request-id " + pending},
		{failed, exitRefused, false, "COMMAND_UNREADABLE"},
		{"00000000-0000-0000-0000-000000000009", exitNotFound, false, "not found"},
	} {
		code, stdout, stderr := orderctl(t, addr, "replay", c.id, "--json")
		var doc struct {
			Request  map[string]any `json:"request"`
			Order    map[string]any `json:"order"`
			Replayed bool           `json:"replayed"`
		}
		if code != c.code || !strings.Contains(stderr, c.stderr) {
			t.Errorf("replay %s: exit %d, stderr %q; want %d and %q", c.id, code, stderr, c.code, c.stderr)
		}
		if c.code == exitNotFound {
			continue
		}
		if err := json.Unmarshal([]byte(stdout), &doc); err != nil || doc.Replayed != c.replayed || (doc.Order != nil) != c.replayed || doc.Request["request_id"] != c.id {
			t.Errorf("replay %s: %q (%v)", c.id, stdout, err)
		}
	}
}

func TestCreateAnnouncesItsRequestIDBeforeTheCall(t *testing.T) {
	events := new([]string)
	f := &fakeServer{events: events}
	addr := startFake(t, f)
	t.Setenv("ORDERD_API_KEY", "")
	var out strings.Builder
	code := run(context.Background(), []string{"create", "--customer", "c", "--total", "1.00", "--currency", "EUR", "--addr", addr, "--plaintext"},
		&out, eventLog{&f.mu, events})
	f.mu.Lock()
	defer f.mu.Unlock()
	if code != exitOK || len(*events) != 2 || !strings.HasPrefix((*events)[0], "stderr request_id: ") || !strings.HasPrefix((*events)[1], "call ") {
		t.Fatalf("exit %d, events %q", code, *events)
	}
	id := strings.TrimPrefix((*events)[1], "call ")
	if !strings.Contains((*events)[0], "--request-id "+id) || !strings.Contains(out.String(), id) {
		t.Errorf("announced %q, sent %s, printed %q", (*events)[0], id, out.String())
	}
}

func TestInvalidArgumentNamesTheField(t *testing.T) {
	addr := startFake(t, &fakeServer{})
	code, stdout, stderr := orderctl(t, addr, "create", "--customer", "c", "--total", "-1", "--currency", "EUR",
		"--request-id", "00000000-0000-0000-0000-000000000001")
	if code != exitInvalid || stdout != "" || !strings.Contains(stderr, "field total: must be greater than zero") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func TestListAllReadsEveryPage(t *testing.T) {
	addr := startFake(t, &fakeServer{pages: []*ordersv1.ListCustomerOrdersResponse{
		{Orders: []*ordersv1.Order{{OrderId: "o3"}}, NextPageToken: "1"},
		{NextPageToken: "2"}, // an empty page that is not the last
		{Orders: []*ordersv1.Order{{OrderId: "o2"}, {OrderId: "o1"}}},
	}})
	code, stdout, stderr := orderctl(t, addr, "list", "--customer", "c", "--all", "--json")
	var doc struct {
		Orders []struct {
			OrderID string `json:"order_id"`
		} `json:"orders"`
		Next *string `json:"next_page_token"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil || code != exitOK || len(doc.Orders) != 3 || doc.Orders[0].OrderID != "o3" ||
		doc.Next == nil || *doc.Next != "" {
		t.Errorf("exit %d, %q (%v), stderr %q", code, stdout, err, stderr)
	}
	code, stdout, stderr = orderctl(t, addr, "list", "--customer", "c")
	if code != exitOK || !strings.Contains(stdout, "o3") || strings.Contains(stdout, "o2") || !strings.Contains(stderr, "--page-token 1") {
		t.Errorf("one page: exit %d, %q, stderr %q", code, stdout, stderr)
	}
}
