package e2e

import (
	"bytes"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/atlasmart/orderd/internal/tools/rawcodec"
	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

// invokeWithText calls method with m encoded, the bytes of placeholder in
// it replaced by text (of the same length, so that the encoding stays
// well formed).
func invokeWithText(t *testing.T, p *orderdProcess, method string, m proto.Message, placeholder, text string) error {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil || len(placeholder) != len(text) || bytes.Count(b, []byte(placeholder)) != 1 {
		t.Fatalf("encode %T with %q once in it: %v", m, placeholder, err)
	}
	var resp []byte
	return p.conn.Invoke(callCtx(t), method, bytes.Replace(b, []byte(placeholder), []byte(text), 1), &resp, grpc.ForceCodecV2(rawcodec.Codec{}))
}

// wantFieldViolation wants INVALID_ARGUMENT with one field violation, on
// field.
func wantFieldViolation(t *testing.T, err error, field string) {
	t.Helper()
	st := status.Convert(err)
	var fields []string
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				fields = append(fields, v.GetField())
			}
		}
	}
	if st.Code() != codes.InvalidArgument || len(fields) != 1 || fields[0] != field {
		t.Fatalf("got %v with violations on %v, want INVALID_ARGUMENT on %s alone", err, fields, field)
	}
}

// Text that is not UTF-8 is refused as any bad field is, INVALID_ARGUMENT
// naming it, and changes nothing: no request is claimed, and the order a
// change names stays as it was.
func TestTextThatIsNotUTF8IsRefusedAndWritesNothing(t *testing.T) {
	p := server(t)
	create := newRequest("10.00")
	create.CustomerId = "cust-AAAA"
	wantFieldViolation(t, invokeWithText(t, p, ordersv1.OrderService_CreateOrder_FullMethodName, create, "AAAA", "\xffA\xfeA"), "customer_id")
	if r := readRows(t, create.RequestId, "", "", ""); r.ledger != nil {
		t.Errorf("the refused create left a ledger row: %v", r.ledger)
	}

	o := orderAtVersion(t, p.client, 1)
	amend := &ordersv1.AmendOrderRequest{RequestId: uuid.NewString(), OrderId: o.GetOrderId(), ExpectedVersion: 1, ShippingNote: "leave it at AAAA"}
	wantFieldViolation(t, invokeWithText(t, p, ordersv1.OrderService_AmendOrder_FullMethodName, amend, "AAAA", "\xed\xa0\x80A"), "shipping_note")
	if n := ledgerRows(t, "AMEND_ORDER", amend.RequestId); n != 0 {
		t.Errorf("the refused amend left %d ledger rows", n)
	}
	if got := getOrder(t, p.client, o.GetOrderId(), 1); got.GetShippingNote() != o.GetShippingNote() {
		t.Errorf("shipping note %q after the refused amend, was %q", got.GetShippingNote(), o.GetShippingNote())
	}

	list := &ordersv1.ListCustomerOrdersRequest{CustomerId: "AAAA"}
	wantFieldViolation(t, invokeWithText(t, p, ordersv1.OrderService_ListCustomerOrders_FullMethodName, list, "AAAA", "A\x80AA"), "customer_id")
}
