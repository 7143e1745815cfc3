package order

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
)

// StatusCreated is the status of a newly created order.
const StatusCreated = "CREATED"

// orderNamespace is the UUIDv5 namespace of order ids.
var orderNamespace = uuid.MustParse("6f72d3a1-0b8e-4c3e-9a51-2f0d7e1c4b90")

// ID derives the order id from (tenant, request_id): the same intent maps
// to the same order even after its ledger row has expired.
func ID(tenant string, requestID uuid.UUID) uuid.UUID {
	return uuid.NewSHA1(orderNamespace, []byte(tenant+"\x00"+requestID.String()))
}

// Order is the outcome of a CreateOrder command. Every field derives from
// the ledger row (tenant, request id, stored command, claim time), never from
// the clock of whoever writes it, so every writer produces the same order.
type Order struct {
	ID         uuid.UUID `json:"order_id"`
	Tenant     string    `json:"tenant"`
	CustomerID string    `json:"customer_id"`
	Month      string    `json:"order_month"` // YYYY-MM-01 (UTC)
	Status     string    `json:"status"`
	Total      string    `json:"total"`
	Currency   string    `json:"currency"`
	RequestID  uuid.UUID `json:"request_id"`
	CreatedAt  time.Time `json:"created_at"`
	Lines      []Line    `json:"lines,omitempty"`
	// The order's current state (docs/changes.md). Not part of the recorded
	// outcome's encoding: a CreateOrder's outcome is the order as created
	// (AsCreated), whatever changed since.
	//
	// Version is 1 at creation; each accepted change (change.go) adds one.
	Version int64 `json:"-"`
	// ShippingNote is the delivery instruction set by AmendOrder ("" none).
	ShippingNote string `json:"-"`
	// UpdatedAt is the time of the change that made Version (CreatedAt at 1).
	UpdatedAt time.Time `json:"-"`
}

// New builds the order a claimed command becomes.
func New(tenant string, requestID uuid.UUID, cmd Command, createdAt time.Time) Order {
	createdAt = createdAt.UTC()
	return Order{
		ID:         ID(tenant, requestID),
		Tenant:     tenant,
		CustomerID: cmd.CustomerID,
		Month:      MonthOf(createdAt),
		Status:     StatusCreated,
		Total:      cmd.Total,
		Currency:   cmd.Currency,
		RequestID:  requestID,
		CreatedAt:  createdAt,
		Lines:      cmd.Lines,
		Version:    CreatedVersion,
		UpdatedAt:  createdAt,
	}
}

// MonthOf is the first day of t's month in UTC, as YYYY-MM-01.
func MonthOf(t time.Time) string {
	return t.UTC().Format("2006-01") + "-01"
}

// EncodeOutcome is the recorded outcome stored in the ledger.
func (o Order) EncodeOutcome() []byte {
	b, err := json.Marshal(o)
	if err != nil {
		panic(fmt.Sprintf("order: encode outcome: %v", err)) // plain fields: cannot fail
	}
	return b
}

// DecodeOutcome reads an outcome stored by EncodeOutcome.
func DecodeOutcome(b []byte) (Order, error) {
	var o Order
	if err := json.Unmarshal(b, &o); err != nil {
		return Order{}, fmt.Errorf("decode recorded outcome: %w", err)
	}
	return o.AsCreated(), nil
}

// Carries reports whether o is the order cmd becomes, whoever claimed it and
// whenever: the same customer, total, currency and lines (the claim time, and
// so created_at and the month, may differ). It is how a fresh claim of a
// request id whose ledger row has expired tells a late retry of the same
// intent (replay the order) from a different command (reject it).
func (o Order) Carries(cmd Command) bool {
	return o.CustomerID == cmd.CustomerID && o.Total == cmd.Total && o.Currency == cmd.Currency &&
		slices.Equal(o.Lines, cmd.Lines)
}
