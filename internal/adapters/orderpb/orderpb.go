// Package orderpb converts orders to their protobuf messages: the API's
// Order (internal/adapters/grpcapi) and the OrderEvent published to Kafka
// (internal/adapters/outbox), so both speak of an order in the same words.
package orderpb

import (
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/atlasmart/orderd/internal/domain/order"
	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

var statusOf = map[string]ordersv1.OrderStatus{
	order.StatusCreated:   ordersv1.OrderStatus_ORDER_STATUS_CREATED,
	order.StatusCancelled: ordersv1.OrderStatus_ORDER_STATUS_CANCELLED,
}

var eventTypeOf = map[string]ordersv1.OrderEventType{
	order.EventOrderCreated:   ordersv1.OrderEventType_ORDER_EVENT_TYPE_CREATED,
	order.EventOrderCancelled: ordersv1.OrderEventType_ORDER_EVENT_TYPE_CANCELLED,
	order.EventOrderAmended:   ordersv1.OrderEventType_ORDER_EVENT_TYPE_AMENDED,
}

// Order is o as the API and the events show it.
func Order(o order.Order) *ordersv1.Order {
	out := &ordersv1.Order{
		OrderId:      o.ID.String(),
		CustomerId:   o.CustomerID,
		OrderMonth:   Month(o.Month),
		Status:       statusOf[o.Status],
		Total:        o.Total,
		Currency:     o.Currency,
		RequestId:    o.RequestID.String(),
		CreatedAt:    timestamppb.New(o.CreatedAt),
		Version:      max(o.Version, order.CreatedVersion),
		ShippingNote: o.ShippingNote,
		UpdatedAt:    timestamppb.New(o.UpdatedAt),
	}
	if o.UpdatedAt.IsZero() {
		out.UpdatedAt = out.CreatedAt
	}
	for _, l := range o.Lines {
		out.Lines = append(out.Lines, &ordersv1.OrderLine{Sku: l.SKU, Quantity: l.Quantity, UnitPrice: l.UnitPrice})
	}
	return out
}

// Month is an order's month as the API shows it, "YYYY-MM" (the format
// ListCustomerOrders takes); the stores keep the first day of the month,
// "YYYY-MM-01".
func Month(stored string) string {
	if len(stored) < len("2006-01") {
		return stored
	}
	return stored[:len("2006-01")]
}

// CreatedVersion is the version of a newly created order; every later
// change adds one.
const CreatedVersion = order.CreatedVersion

// Event is ev as published: its id is the same on every publication, by
// whichever process.
func Event(ev order.Event) *ordersv1.OrderEvent {
	o := Order(ev.Order)
	return &ordersv1.OrderEvent{
		EventId:      ev.ID.String(),
		Type:         eventTypeOf[ev.Type],
		Order:        o,
		OrderVersion: o.GetVersion(),
		Tenant:       ev.Order.Tenant,
		RequestId:    ev.RequestID.String(),
		OccurredAt:   timestamppb.New(ev.At),
	}
}

// Created is the ORDER_CREATED event of o. Its id is the creating request's
// id.
func Created(o order.Order) *ordersv1.OrderEvent { return Event(order.CreatedEvent(o)) }
