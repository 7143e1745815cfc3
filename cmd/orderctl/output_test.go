package main

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

func TestFormatAge(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "0s"}, // a server clock ahead of ours
		{0, "0s"},
		{45*time.Second + 900*time.Millisecond, "45s"},
		{3*time.Minute + 12*time.Second, "3m12s"},
		{time.Hour - time.Second, "59m59s"},
		{2*time.Hour + 4*time.Minute + 59*time.Second, "2h4m"},
		{24*time.Hour - time.Minute, "23h59m"},
		{3*24*time.Hour + 5*time.Hour, "3d"},
	} {
		if got := formatAge(c.d); got != c.want {
			t.Errorf("formatAge(%v) = %q, want %q", c.d, got, c.want)
		}
	}
	if got := age(time.Now(), nil); got != "" {
		t.Errorf("age of no time = %q, want empty", got)
	}
}

func TestRequestsTableHasTheColumnsAndAges(t *testing.T) {
	now := time.Date(2026, 11, 3, 12, 0, 0, 0, time.UTC)
	var b strings.Builder
	err := writeRequests(&b, []*ordersv1.WriteRequest{{
		RequestId: "17000000-0000-0000-0000-000000000500", Operation: "CREATE_ORDER",
		State: ordersv1.RequestState_REQUEST_STATE_FAILED, CreatedAt: timestamppb.New(now.Add(-(2*time.Hour + 4*time.Minute))),
		Attempts: 3, LastError: "COMMAND_UNREADABLE",
	}}, now)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "REQUEST_ID OPERATION STATE AGE ATTEMPTS LAST_ERROR ORDER_ID" ||
		strings.Join(strings.Fields(lines[1]), " ") != "17000000-0000-0000-0000-000000000500 CREATE_ORDER FAILED 2h4m 3 COMMAND_UNREADABLE -" {
		t.Errorf("table:\n%s", b.String())
	}
}

func TestProtoJSONIsOneLineWithProtoNames(t *testing.T) {
	raw, err := protoJSON(&ordersv1.CreateOrderResponse{Order: &ordersv1.Order{OrderId: "o", RequestId: "r", Version: 1}})
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	for _, want := range []string{`"request_id":"r"`, `"order_id":"o"`, `"replayed":false`, `"version":"1"`, `"status":"ORDER_STATUS_UNSPECIFIED"`, `"lines":[]`} {
		if !strings.Contains(s, want) {
			t.Errorf("%s lacks %s", s, want)
		}
	}
	if strings.ContainsAny(s, "\n ") {
		t.Errorf("%q is not one compact line", s)
	}
}
