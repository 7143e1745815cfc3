package main

import (
	"testing"

	"google.golang.org/protobuf/proto"

	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

func TestParseLine(t *testing.T) {
	for _, c := range []struct {
		in   string
		want *ordersv1.OrderLine
	}{
		{"SKU-1:2:25.90", &ordersv1.OrderLine{Sku: "SKU-1", Quantity: 2, UnitPrice: "25.90"}},
		{"a:b:3:0", &ordersv1.OrderLine{Sku: "a:b", Quantity: 3, UnitPrice: "0"}}, // the last two colons separate
		{"x:-1:1", &ordersv1.OrderLine{Sku: "x", Quantity: -1, UnitPrice: "1"}},   // the server judges values
	} {
		got, err := parseLine(c.in)
		if err != nil || !proto.Equal(got, c.want) {
			t.Errorf("parseLine(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "sku", "sku:1", ":1:2", "sku:1:", "sku:two:1.00", "sku:1.5:1"} {
		if got, err := parseLine(bad); err == nil {
			t.Errorf("parseLine(%q) = %v, want an error", bad, got)
		}
	}
	if lines, err := parseLines([]string{"a:1:1", "b"}); err == nil {
		t.Errorf("parseLines with a bad line = %v, want an error", lines)
	}
}
