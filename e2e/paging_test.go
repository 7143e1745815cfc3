package e2e

import (
	"encoding/base64"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

// TestListCustomerOrdersPageTokens pages through a customer's orders on the
// real cluster with signed tokens, and shows that a token orderd did not
// issue for this listing is INVALID_ARGUMENT on page_token, without
// RetryInfo: a forged paging state (valid base64, as the old raw token was)
// used to reach Cassandra and come back UNAVAILABLE, retried forever.
func TestListCustomerOrdersPageTokens(t *testing.T) {
	p := server(t)
	customer := "cust-page-" + uuid.NewString()[:8]
	want := map[string]bool{}
	var month string
	for range 5 {
		req := newRequest("4.00")
		req.CustomerId = customer
		resp, _, err := create(t, p.client, req)
		if err != nil {
			t.Fatalf("CreateOrder: %v", err)
		}
		want[resp.Order.OrderId] = true
		month = resp.Order.OrderMonth[:7]
	}
	if len(want) != 5 {
		t.Fatalf("%d orders created, want 5", len(want))
	}

	req := &ordersv1.ListCustomerOrdersRequest{CustomerId: customer, Month: month, PageSize: 2}
	got := map[string]bool{}
	var firstToken string
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatalf("more than 5 pages of size 2 for 5 orders")
		}
		resp, err := p.client.ListCustomerOrders(callCtx(t), req)
		if err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		for _, o := range resp.Orders {
			if got[o.OrderId] {
				t.Errorf("order %s listed twice", o.OrderId)
			}
			got[o.OrderId] = true
		}
		if resp.NextPageToken == "" {
			break
		}
		if firstToken == "" {
			firstToken = resp.NextPageToken
		}
		req = proto.Clone(req).(*ordersv1.ListCustomerOrdersRequest)
		req.PageToken = resp.NextPageToken
	}
	for id := range want {
		if !got[id] {
			t.Errorf("order %s never listed", id)
		}
	}
	if firstToken == "" {
		t.Fatal("no page token issued for 5 orders in pages of 2")
	}

	raw, err := base64.RawURLEncoding.DecodeString(firstToken)
	if err != nil {
		t.Fatalf("token %q is not base64url: %v", firstToken, err)
	}
	if len(raw) <= 1+12+16 {
		t.Fatalf("token %q (%d bytes) is too short to carry a version byte, a 12-byte nonce and a 16-byte tag: not a sealed token", firstToken, len(raw))
	}
	tampered := append([]byte(nil), raw...)
	tampered[len(tampered)/2] ^= 0x01
	for name, r := range map[string]*ordersv1.ListCustomerOrdersRequest{
		"forged raw paging state":                                     {CustomerId: customer, Month: month, PageToken: base64.RawURLEncoding.EncodeToString([]byte("\x00\x0cforged-state\x7f\xff\xff\xff"))},
		"the issued token's bytes without its version, nonce and tag": {CustomerId: customer, Month: month, PageToken: base64.RawURLEncoding.EncodeToString(raw[13 : len(raw)-16])},
		"tampered token":                                              {CustomerId: customer, Month: month, PageToken: base64.RawURLEncoding.EncodeToString(tampered)},
		"token of another customer":                                   {CustomerId: customer + "x", Month: month, PageToken: firstToken},
	} {
		_, err := p.client.ListCustomerOrders(callCtx(t), r)
		st := status.Convert(err)
		if st.Code() != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
			continue
		}
		var field string
		for _, d := range st.Details() {
			switch d := d.(type) {
			case *errdetails.BadRequest:
				if v := d.GetFieldViolations(); len(v) == 1 {
					field = v[0].GetField()
				}
			case *errdetails.RetryInfo:
				t.Errorf("%s: RetryInfo %v on a bad token", name, d)
			}
		}
		if field != "page_token" {
			t.Errorf("%s: violation on %q, want page_token", name, field)
		}
	}
}
