package order

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"golang.org/x/text/unicode/norm"

	"github.com/atlasmart/orderd/internal/domain/fault"
)

// The change operations, as the request ledger names them. A
// request id is scoped by its operation: the same id used for a cancel and
// an amendment is two requests (the key's scope is its operation).
const (
	OperationCancel = "CANCEL_ORDER"
	OperationAmend  = "AMEND_ORDER"
)

// StatusCancelled is the status of a cancelled order. A cancelled order
// takes no further change.
const StatusCancelled = "CANCELLED"

// CreatedVersion is the version of a newly created order; every accepted
// change adds one.
const CreatedVersion = 1

// Limits on a change command.
const (
	// MaxShippingNoteLength bounds the shipping note, in characters after
	// normalisation.
	MaxShippingNoteLength = 500
	// MaxVersion bounds expected_version: far beyond any real order's
	// history, small enough that version arithmetic never overflows.
	MaxVersion = 1_000_000
)

// ChangeInput is a CancelOrder or AmendOrder command as the client sent it.
type ChangeInput struct {
	Operation       string // OperationCancel or OperationAmend
	RequestID       string
	OrderID         string
	ExpectedVersion int64
	ShippingNote    string // AmendOrder only: the new note ("" clears it)
}

// ChangeCommand is a validated, canonical change. Its JSON encoding
// (Encode) is what the ledger stores and the fingerprint hashes; the
// operation is part of the fingerprint, not of the encoding.
type ChangeCommand struct {
	OrderID         uuid.UUID `json:"order_id"`
	ExpectedVersion int64     `json:"expected_version"`
	ShippingNote    string    `json:"shipping_note,omitempty"`
}

// CanonicalizeChange validates in and returns its request id and canonical
// command; every problem at once, as a fault.Invalid error with one
// violation per field.
func CanonicalizeChange(in ChangeInput) (uuid.UUID, ChangeCommand, error) {
	var v violations
	requestID := checkUUID(&v, "request_id", in.RequestID,
		"required: a UUID chosen once per change and reused on every retry")
	orderID := checkUUID(&v, "order_id", in.OrderID, "required: the id of the order to change")
	if in.ExpectedVersion < CreatedVersion || in.ExpectedVersion > MaxVersion {
		v.add("expected_version", fmt.Sprintf("required: the order version the change is based on (%d to %d), as GetOrder shows it",
			CreatedVersion, MaxVersion))
	}
	cmd := ChangeCommand{OrderID: orderID, ExpectedVersion: in.ExpectedVersion}
	switch in.Operation {
	case OperationCancel:
	case OperationAmend:
		cmd.ShippingNote = canonicalNote(&v, in.ShippingNote)
	default:
		return uuid.Nil, ChangeCommand{}, fault.New(fault.ReasonInternal, fmt.Errorf("unknown change operation %q", in.Operation))
	}
	if len(v) > 0 {
		return uuid.Nil, ChangeCommand{}, fault.InvalidArgs(v)
	}
	return requestID, cmd, nil
}

// checkUUID parses a required UUID field in its 36-character form.
func checkUUID(v *violations, field, s, missing string) uuid.UUID {
	id, err := uuid.Parse(s)
	switch {
	case s == "":
		v.add(field, missing)
	case err != nil || len(s) != 36:
		v.add(field, "must be a UUID in its 36-character form, e.g. 17000000-0000-0000-0000-000000000500")
	case id == uuid.Nil:
		v.add(field, "must not be the nil UUID")
	default:
		return id
	}
	return uuid.Nil
}

// canonicalNote is the shipping note in Unicode NFC with surrounding
// whitespace trimmed and every line break a line feed (a browser's
// textarea sends CRLF), so that what looks the same is the same command.
func canonicalNote(v *violations, s string) string {
	if !utf8.ValidString(s) {
		v.add("shipping_note", "must be valid UTF-8")
		return ""
	}
	s = strings.TrimSpace(lineBreaks.Replace(norm.NFC.String(s)))
	switch {
	case utf8.RuneCountInString(s) > MaxShippingNoteLength:
		v.add("shipping_note", fmt.Sprintf("at most %d characters", MaxShippingNoteLength))
	case strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) && r != '\n' }) >= 0:
		v.add("shipping_note", "must not contain control characters other than line breaks")
	}
	return s
}

// lineBreaks makes CRLF and a lone CR a line feed.
var lineBreaks = strings.NewReplacer("\r\n", "\n", "\r", "\n")

// Encode is the canonical encoding of c (version v1).
func (c ChangeCommand) Encode() []byte {
	b, err := json.Marshal(c)
	if err != nil {
		panic(fmt.Sprintf("order: encode change: %v", err)) // plain fields: cannot fail
	}
	return b
}

// DecodeChangeCommand reads a change stored by Encode.
func DecodeChangeCommand(b []byte) (ChangeCommand, error) {
	var c ChangeCommand
	if err := json.Unmarshal(b, &c); err != nil {
		return ChangeCommand{}, fmt.Errorf("decode stored change: %w", err)
	}
	if c.OrderID == uuid.Nil || c.ExpectedVersion < CreatedVersion {
		return ChangeCommand{}, fmt.Errorf("decode stored change: no order id or version in %q", b)
	}
	return c, nil
}

// ChangeFingerprint is the fingerprint of a change of operation op encoded
// by ChangeCommand.Encode.
func ChangeFingerprint(op string, encoded []byte) string { return fingerprintOf(op, encoded) }

// ChangeID derives a change's id from its scoped request id: every finisher
// of one change names it alike, and it is the id of the change's event.
func ChangeID(tenant, op string, requestID uuid.UUID) uuid.UUID {
	return EventID(tenant, op, requestID)
}

// Change is an accepted change: the version it made and what it set. It is
// the row of order_versions that the version LWT wrote, so it never
// changes once accepted.
type Change struct {
	ID          uuid.UUID
	Tenant      string
	OrderID     uuid.UUID
	Operation   string
	RequestID   uuid.UUID
	Fingerprint string
	// Version is the version this change made (its expected version + 1).
	Version int64
	// Status is the order's status from this version on.
	Status string
	// ShippingNote is the note this change set (amendments only).
	ShippingNote string
	// At is the change's claim time (milliseconds): every value it
	// projects derives from it, never from a finisher's clock.
	At time.Time
}

// NewChange is the change a claimed command makes: the version after its
// expected one, dated by its claim.
func NewChange(tenant, op string, requestID uuid.UUID, fingerprint string, cmd ChangeCommand, claimedAt time.Time) Change {
	c := Change{
		ID: ChangeID(tenant, op, requestID), Tenant: tenant, OrderID: cmd.OrderID, Operation: op,
		RequestID: requestID, Fingerprint: fingerprint, Version: cmd.ExpectedVersion + 1, Status: StatusCreated,
		At: claimedAt.UTC(),
	}
	switch op {
	case OperationCancel:
		c.Status = StatusCancelled
	case OperationAmend:
		c.ShippingNote = cmd.ShippingNote
	}
	return c
}

// SetsNote reports whether c sets the shipping note (amendments do; a cancel
// keeps the note it found).
func (c Change) SetsNote() bool { return c.Operation == OperationAmend }

// EventType is the type of the event c emits.
func (c Change) EventType() string {
	if c.Operation == OperationCancel {
		return EventOrderCancelled
	}
	return EventOrderAmended
}

// The order events, by type.
const (
	EventOrderCreated   = "ORDER_CREATED"
	EventOrderCancelled = "ORDER_CANCELLED"
	EventOrderAmended   = "ORDER_AMENDED"
)

// Apply returns o as it is after c: its version, status and (for an
// amendment) shipping note, updated at c's time.
func (o Order) Apply(c Change) Order {
	o.Version, o.Status, o.UpdatedAt = c.Version, c.Status, c.At
	if c.SetsNote() {
		o.ShippingNote = c.ShippingNote
	}
	return o
}

// At returns o as it is at the end of history, the accepted changes that
// made versions 2 to n in order: the order's state at version n.
func (o Order) At(history []Change) Order {
	o = o.AsCreated()
	for _, c := range history {
		o = o.Apply(c)
	}
	return o
}

// AsCreated is o as its creation left it (version 1): the recorded outcome
// of its CreateOrder, which later changes never alter.
func (o Order) AsCreated() Order {
	o.Version, o.Status, o.ShippingNote, o.UpdatedAt = CreatedVersion, StatusCreated, "", o.CreatedAt
	return o
}

// ChangeOutcome is what a change request ended with: an accepted change,
// or a conflict receipt (the reason, and the order's version when it was
// decided). The ledger keeps a conflict receipt as a COMPLETE request's
// outcome; an accepted change's record is its order_versions row.
type ChangeOutcome struct {
	Reason         fault.Reason `json:"reason"`
	CurrentVersion int64        `json:"current_version"`
}

// Encode is the stored form of a conflict receipt.
func (r ChangeOutcome) Encode() []byte {
	b, err := json.Marshal(r)
	if err != nil {
		panic(fmt.Sprintf("order: encode change outcome: %v", err))
	}
	return b
}

// DecodeChangeOutcome reads a conflict receipt stored by Encode.
func DecodeChangeOutcome(b []byte) (ChangeOutcome, error) {
	var r ChangeOutcome
	if err := json.Unmarshal(b, &r); err != nil || r.Reason == "" {
		return ChangeOutcome{}, fmt.Errorf("decode a change's recorded conflict %q: %v", b, err)
	}
	return r, nil
}
