package grpcapi

import (
	"bytes"
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/atlasmart/orderd/internal/adapters/auth"
	"github.com/atlasmart/orderd/internal/tools/rawcodec"
	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

// encodeWith is m encoded, with each placeholder replaced by the bytes
// given for it (of the same length: the encoding's lengths stay right).
func encodeWith(t *testing.T, m proto.Message, replace map[string]string) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	for from, to := range replace {
		if len(from) != len(to) || !bytes.Contains(b, []byte(from)) {
			t.Fatalf("placeholder %q: not in the message, or not the length of %q", from, to)
		}
		b = bytes.ReplaceAll(b, []byte(from), []byte(to))
	}
	return b
}

// The codec hands a request with text that is not UTF-8 to the handler as
// sent, the rest of it intact (unknown fields too); what fails to decode
// for another reason still fails.
func TestCodecKeepsInvalidText(t *testing.T) {
	req := &ordersv1.CreateOrderRequest{RequestId: validID, CustomerId: "cust-AAAA", Total: "3.00", Currency: "EUR",
		Lines: []*ordersv1.OrderLine{{Sku: "sku-BBBB", Quantity: 3, UnitPrice: "1.00"}}}
	b := encodeWith(t, req, map[string]string{"AAAA": "\xff\xfe\x00A", "BBBB": "B\xc3(B"})
	unknown := protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 7)
	b = append(b, unknown...)

	if err := proto.Unmarshal(b, new(ordersv1.CreateOrderRequest)); err == nil {
		t.Fatal("the protobuf runtime decoded invalid UTF-8: this test no longer tests anything")
	}
	c := newCodec()
	var got ordersv1.CreateOrderRequest
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &got); err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	if got.GetCustomerId() != "cust-\xff\xfe\x00A" || got.GetRequestId() != validID || got.GetTotal() != "3.00" || got.GetCurrency() != "EUR" {
		t.Errorf("decoded %q %q %q %q", got.GetCustomerId(), got.GetRequestId(), got.GetTotal(), got.GetCurrency())
	}
	if len(got.GetLines()) != 1 || got.GetLines()[0].GetSku() != "sku-B\xc3(B" || got.GetLines()[0].GetQuantity() != 3 || got.GetLines()[0].GetUnitPrice() != "1.00" {
		t.Errorf("lines decoded as %v", got.GetLines())
	}
	if !bytes.Equal(got.ProtoReflect().GetUnknown(), unknown) {
		t.Errorf("unknown fields %x, want field 99 kept", got.ProtoReflect().GetUnknown())
	}

	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b[:len(b)-len(unknown)-1])}, &got); err == nil {
		t.Error("a truncated message decoded")
	}
}

// Over a real connection, each RPC refuses invalid text as it refuses any
// bad field, INVALID_ARGUMENT naming it, and reaches no store; a valid
// request is served as before, and a message that is not one keeps gRPC's
// INTERNAL.
func TestInvalidTextIsAnInvalidArgument(t *testing.T) {
	api, l, r := newTestAPI(t, testKey)
	srv := grpc.NewServer(Codec(), grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		id, _ := auth.FromContext(acme())
		return h(auth.NewContext(ctx, id), req)
	}))
	ordersv1.RegisterOrderServiceServer(srv, api)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	call := func(method string, b []byte) error {
		var resp []byte
		return conn.Invoke(context.Background(), method, b, &resp, grpc.ForceCodecV2(rawcodec.Codec{}))
	}

	create := &ordersv1.CreateOrderRequest{RequestId: validID, CustomerId: "cust-AAAA", Total: "1.00", Currency: "EUR",
		Lines: []*ordersv1.OrderLine{{Sku: "BBBB", Quantity: 1, UnitPrice: "1.00"}}}
	cases := []struct {
		name, method string
		b            []byte
		fields       []string
	}{
		{"CreateOrder", ordersv1.OrderService_CreateOrder_FullMethodName,
			encodeWith(t, create, map[string]string{"AAAA": "\xffAA\xfe", "BBBB": "\xc3(BB"}), []string{"customer_id", "lines[0].sku"}},
		{"ListCustomerOrders", ordersv1.OrderService_ListCustomerOrders_FullMethodName,
			encodeWith(t, &ordersv1.ListCustomerOrdersRequest{CustomerId: "AAAA", Month: "2026-09"}, map[string]string{"AAAA": "A\x80AA"}), []string{"customer_id"}},
		{"GetRequest", ordersv1.OrderService_GetRequest_FullMethodName,
			encodeWith(t, &ordersv1.GetRequestRequest{RequestId: validID, Operation: "AAAA"}, map[string]string{"AAAA": "\xffAAA"}), []string{"operation"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { wantInvalid(t, call(c.method, c.b), c.fields...) })
	}
	if c := l.Calls(); len(c) > 0 {
		t.Errorf("the ledger was called: %v", c)
	}
	if c := r.calls(); len(c) > 0 {
		t.Errorf("the projections were read: %q", c)
	}

	get, _ := proto.Marshal(&ordersv1.GetRequestRequest{RequestId: validID})
	if err := call(ordersv1.OrderService_GetRequest_FullMethodName, get); status.Code(err) != codes.NotFound {
		t.Errorf("a valid GetRequest: %v, want NotFound from the ledger", err)
	}
	if c := l.Calls(); len(c) != 1 || c[0] != "Get" {
		t.Errorf("a valid GetRequest reached the ledger as %v, want one Get", c)
	}
	if err := call(ordersv1.OrderService_GetRequest_FullMethodName, get[:len(get)-1]); status.Code(err) != codes.Internal {
		t.Errorf("a truncated message: %v, want gRPC's INTERNAL", err)
	}
}
