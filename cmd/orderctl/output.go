package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

// jsonOptions: the .proto field names (request_id, as in the .proto files
// and the client example's -out lines) and every field present, so a
// script finds the same keys in every document.
var jsonOptions = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}

// protoJSON is m as compact JSON. protojson's output varies its spacing on
// purpose; compacting makes it one stable line.
func protoJSON(m proto.Message) (json.RawMessage, error) {
	raw, err := jsonOptions.Marshal(m)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// writeProto writes m as one JSON line.
func writeProto(w io.Writer, m proto.Message) error {
	raw, err := protoJSON(m)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", raw)
	return err
}

// writeJSON writes v (encoding/json; its API messages as json.RawMessage
// from protoJSON) as one JSON line.
func writeJSON(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}

// table writes aligned columns; flush writes them.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer) table { return table{tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)} }

func (t table) row(cells ...string) {
	for i, c := range cells {
		if c == "" {
			cells[i] = "-"
		}
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t table) flush() error { return t.tw.Flush() }

// writeOrder writes one order as FIELD value rows, then its lines.
func writeOrder(w io.Writer, o *ordersv1.Order, extra ...[2]string) error {
	t := newTable(w)
	for _, e := range extra {
		t.row(e[0], e[1])
	}
	t.row("ORDER_ID", o.GetOrderId())
	t.row("CUSTOMER_ID", o.GetCustomerId())
	t.row("STATUS", orderStatus(o.GetStatus()))
	t.row("TOTAL", o.GetTotal()+" "+o.GetCurrency())
	t.row("VERSION", fmt.Sprint(o.GetVersion()))
	t.row("ORDER_MONTH", o.GetOrderMonth())
	t.row("REQUEST_ID", o.GetRequestId())
	t.row("CREATED_AT", timestamp(o.GetCreatedAt()))
	t.row("UPDATED_AT", timestamp(o.GetUpdatedAt()))
	t.row("SHIPPING_NOTE", o.GetShippingNote())
	if err := t.flush(); err != nil {
		return err
	}
	if len(o.GetLines()) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	t = newTable(w)
	t.row("SKU", "QUANTITY", "UNIT_PRICE")
	for _, l := range o.GetLines() {
		t.row(l.GetSku(), fmt.Sprint(l.GetQuantity()), l.GetUnitPrice())
	}
	return t.flush()
}

// writeOrders writes a listing page, one order a row.
func writeOrders(w io.Writer, orders []*ordersv1.Order) error {
	t := newTable(w)
	t.row("ORDER_ID", "CREATED_AT", "STATUS", "TOTAL", "CURRENCY", "VERSION", "REQUEST_ID")
	for _, o := range orders {
		t.row(o.GetOrderId(), timestamp(o.GetCreatedAt()), orderStatus(o.GetStatus()), o.GetTotal(), o.GetCurrency(),
			fmt.Sprint(o.GetVersion()), o.GetRequestId())
	}
	return t.flush()
}

// writeRequest writes the ledger's record of one request as FIELD value rows.
func writeRequest(w io.Writer, r *ordersv1.WriteRequest, now time.Time) error {
	t := newTable(w)
	t.row("REQUEST_ID", r.GetRequestId())
	t.row("OPERATION", r.GetOperation())
	t.row("STATE", requestState(r.GetState()))
	t.row("AGE", age(now, r.GetCreatedAt()))
	t.row("ATTEMPTS", fmt.Sprint(r.GetAttempts()))
	t.row("LAST_ERROR", r.GetLastError())
	t.row("ORDER_ID", r.GetOrderId())
	t.row("CREATED_AT", timestamp(r.GetCreatedAt()))
	t.row("COMPLETED_AT", timestamp(r.GetCompletedAt()))
	t.row("TENANT", r.GetTenant())
	return t.flush()
}

// writeRequests writes requests one a row.
func writeRequests(w io.Writer, rs []*ordersv1.WriteRequest, now time.Time) error {
	t := newTable(w)
	t.row("REQUEST_ID", "OPERATION", "STATE", "AGE", "ATTEMPTS", "LAST_ERROR", "ORDER_ID")
	for _, r := range rs {
		t.row(r.GetRequestId(), r.GetOperation(), requestState(r.GetState()), age(now, r.GetCreatedAt()),
			fmt.Sprint(r.GetAttempts()), r.GetLastError(), r.GetOrderId())
	}
	return t.flush()
}

func orderStatus(s ordersv1.OrderStatus) string {
	return strings.TrimPrefix(s.String(), "ORDER_STATUS_")
}

func requestState(s ordersv1.RequestState) string {
	return strings.TrimPrefix(s.String(), "REQUEST_STATE_")
}

func timestamp(ts *timestamppb.Timestamp) string {
	if ts == nil {
		return ""
	}
	return ts.AsTime().UTC().Format(time.RFC3339)
}

// age is how long ago ts was, for people: 45s, 3m12s, 2h4m, 3d.
func age(now time.Time, ts *timestamppb.Timestamp) string {
	if ts == nil {
		return ""
	}
	return formatAge(now.Sub(ts.AsTime()))
}

func formatAge(d time.Duration) string {
	d = max(d, 0).Truncate(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd", int(d.Hours())/24)
}
