// Package orderpb converts orders to their protobuf messages: the API's
// Order (internal/grpcapi) and the OrderEvent published to Kafka
// (internal/outbox), so both speak of an order in the same words.
package orderpb

import (
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/atlasmart/orderd/internal/order"
	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

// Order is o as the API and the events show it.
func Order(o order.Order) *ordersv1.Order {
	out := &ordersv1.Order{
		OrderId:    o.ID.String(),
		CustomerId: o.CustomerID,
		OrderMonth: o.Month,
		Status:     ordersv1.OrderStatus_ORDER_STATUS_UNSPECIFIED,
		Total:      o.Total,
		Currency:   o.Currency,
		RequestId:  o.RequestID.String(),
		CreatedAt:  timestamppb.New(o.CreatedAt),
	}
	if o.Status == order.StatusCreated {
		out.Status = ordersv1.OrderStatus_ORDER_STATUS_CREATED
	}
	for _, l := range o.Lines {
		out.Lines = append(out.Lines, &ordersv1.OrderLine{Sku: l.SKU, Quantity: l.Quantity, UnitPrice: l.UnitPrice})
	}
	return out
}

// CreatedVersion is the version of a newly created order; every later
// change (issue 13) adds one.
const CreatedVersion = 1

// Created is the ORDER_CREATED event of o. Its id is the creating request's
// id: every publication of it, by whichever process, carries the same id.
func Created(o order.Order) *ordersv1.OrderEvent {
	return &ordersv1.OrderEvent{
		EventId:      o.RequestID.String(),
		Type:         ordersv1.OrderEventType_ORDER_EVENT_TYPE_CREATED,
		Order:        Order(o),
		OrderVersion: CreatedVersion,
		Tenant:       o.Tenant,
		RequestId:    o.RequestID.String(),
		OccurredAt:   timestamppb.New(o.CreatedAt),
	}
}
