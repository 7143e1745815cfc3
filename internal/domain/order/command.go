package order

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"gopkg.in/inf.v0"

	"github.com/atlasmart/orderd/internal/domain/fault"
)

// OperationCreate names the CreateOrder operation in the request ledger.
const OperationCreate = "CREATE_ORDER"

// Limits on one command. The gRPC API documents them on its fields
// (proto/atlasmart/orders/v1/orders.proto) and applies MaxIDLength to every
// customer_id it is given (CustomerIDViolations).
const (
	// MaxIDLength bounds customer_id and sku, in bytes.
	MaxIDLength = 128
	// MaxAmountLength bounds total and unit_price as sent, in bytes (leading
	// and trailing zeros included): room for maxIntDigits, the point and
	// any currency's decimals with zeros to spare.
	MaxAmountLength = 32
	MaxLines        = 100
	MaxQuantity     = 1_000_000
	maxIntDigits    = 15 // up to 999 trillion in the major unit
)

// fingerprintVersion prefixes the encoding hashed into a fingerprint.
const fingerprintVersion = "v1"

// Input is the command as the client sent it.
type Input struct {
	RequestID  string
	CustomerID string
	Total      string
	Currency   string
	Lines      []LineInput
}

// LineInput is one order line as the client sent it.
type LineInput struct {
	SKU       string
	Quantity  int64
	UnitPrice string
}

// Command is a validated, canonical CreateOrder command. Its JSON encoding
// (Encode) is what the ledger stores and what the fingerprint hashes.
type Command struct {
	CustomerID string `json:"customer_id"`
	Total      string `json:"total"`
	Currency   string `json:"currency"`
	Lines      []Line `json:"lines,omitempty"`
}

// Line is one canonical order line.
type Line struct {
	SKU       string `json:"sku"`
	Quantity  int64  `json:"quantity"`
	UnitPrice string `json:"unit_price"`
}

// Canonicalize validates in and returns its request id and canonical
// command. Every problem is reported at once as a fault.Invalid error with
// one violation per problem, each naming its field.
func Canonicalize(in Input) (uuid.UUID, Command, error) {
	var v violations
	requestID := checkUUID(&v, "request_id", in.RequestID,
		"required: a UUID chosen once per business intent and reused on every retry")
	checkID(&v, "customer_id", in.CustomerID)

	cmd := Command{CustomerID: in.CustomerID}
	scale := -1
	if in.Currency == "" {
		v.add("currency", "required: an ISO 4217 code such as EUR")
	} else if code, units, ok := minorUnitsOf(in.Currency); !ok {
		v.add("currency", "must be the ISO 4217 code of a currency or fund with minor units, such as EUR")
	} else {
		cmd.Currency, scale = code, units
	}

	total, ok := parseAmount(&v, "total", in.Total, scale)
	if ok && total.Sign() <= 0 {
		v.add("total", "must be greater than zero")
	}
	if ok {
		cmd.Total = total.String()
	}

	lines := in.Lines
	if len(lines) > MaxLines {
		// Report the count alone rather than a violation per excess line.
		v.add("lines", fmt.Sprintf("at most %d lines", MaxLines))
		lines = nil
	}
	sum, sumOK := new(inf.Dec), ok
	for i, l := range lines {
		field := fmt.Sprintf("lines[%d]", i)
		checkID(&v, field+".sku", l.SKU)
		if l.Quantity < 1 || l.Quantity > MaxQuantity {
			v.add(field+".quantity", fmt.Sprintf("must be 1 to %d", MaxQuantity))
			sumOK = false
		}
		price, ok := parseAmount(&v, field+".unit_price", l.UnitPrice, scale)
		if !ok {
			sumOK = false
			continue
		}
		cmd.Lines = append(cmd.Lines, Line{SKU: l.SKU, Quantity: l.Quantity, UnitPrice: price.String()})
		sum.Add(sum, new(inf.Dec).Mul(price, inf.NewDec(l.Quantity, 0)))
	}
	if len(lines) > 0 && sumOK && sum.Cmp(total) != 0 {
		v.add("total", fmt.Sprintf("must equal the sum of the lines (%s)", sum.Round(sum, inf.Scale(scale), inf.RoundExact)))
	}
	if len(v) > 0 {
		return uuid.Nil, Command{}, fault.InvalidArgs(v)
	}
	slices.SortFunc(cmd.Lines, func(a, b Line) int {
		return cmp.Or(strings.Compare(a.SKU, b.SKU), cmpAmount(a.UnitPrice, b.UnitPrice), cmp.Compare(a.Quantity, b.Quantity))
	})
	return requestID, cmd, nil
}

type violations []fault.Violation

func (v *violations) add(field, desc string) {
	*v = append(*v, fault.Violation{Field: field, Description: desc})
}

// CustomerIDViolations checks a customer_id given anywhere (a listing as
// well as a command) by the rule Canonicalize applies: the same limit and
// characters, so every id an order can carry is accepted and no other.
func CustomerIDViolations(field, s string) []fault.Violation {
	var v violations
	checkID(&v, field, s)
	return v
}

func checkID(v *violations, field, s string) {
	switch {
	case s == "":
		v.add(field, "required")
	case len(s) > MaxIDLength:
		v.add(field, fmt.Sprintf("at most %d bytes", MaxIDLength))
	case !utf8.ValidString(s) || strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		v.add(field, "must be valid UTF-8 without whitespace or control characters")
	}
}

var amountSyntax = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)

// parseAmount parses a plain decimal string and returns it at the currency's
// scale. scale < 0 means the currency is unknown: syntax is still checked.
func parseAmount(v *violations, field, s string, scale int) (*inf.Dec, bool) {
	if s == "" {
		v.add(field, "required: a decimal amount such as 77.70")
		return nil, false
	}
	if len(s) > MaxAmountLength {
		v.add(field, fmt.Sprintf("at most %d characters", MaxAmountLength))
		return nil, false
	}
	if !amountSyntax.MatchString(s) {
		v.add(field, "must be a plain decimal amount such as 77.70 (digits and one optional '.', no sign or exponent)")
		return nil, false
	}
	intPart, frac, _ := strings.Cut(s, ".")
	intPart = strings.TrimLeft(intPart, "0")
	frac = strings.TrimRight(frac, "0")
	if len(intPart) > maxIntDigits {
		v.add(field, fmt.Sprintf("at most %d digits before the decimal point", maxIntDigits))
		return nil, false
	}
	if scale < 0 {
		return nil, false
	}
	if len(frac) > scale {
		v.add(field, fmt.Sprintf("has %d decimal places; the currency has %d", len(frac), scale))
		return nil, false
	}
	d, ok := new(inf.Dec).SetString(cmp.Or(intPart, "0") + "." + frac + "0")
	if !ok {
		v.add(field, "is not a decimal amount")
		return nil, false
	}
	return d.Round(d, inf.Scale(scale), inf.RoundExact), true
}

func cmpAmount(a, b string) int {
	x, _ := new(inf.Dec).SetString(a)
	y, _ := new(inf.Dec).SetString(b)
	return x.Cmp(y)
}

// Encode is the canonical encoding of c (version v1): JSON with fields in
// declaration order, lines sorted.
func (c Command) Encode() []byte {
	b, err := json.Marshal(c)
	if err != nil {
		panic(fmt.Sprintf("order: encode command: %v", err)) // only strings and ints: cannot fail
	}
	return b
}

// DecodeCommand reads a command stored by Encode.
func DecodeCommand(b []byte) (Command, error) {
	var c Command
	if err := json.Unmarshal(b, &c); err != nil {
		return Command{}, fmt.Errorf("decode stored command: %w", err)
	}
	return c, nil
}

// Fingerprint identifies the command's content: equal for commands that
// canonicalise alike, different for any difference that matters.
//
// If the encoding ever changes (v2), ledger rows fingerprinted under v1 must
// still compare equal to their retries: compare by re-fingerprinting the
// stored command, not by comparing the stored string.
func (c Command) Fingerprint() string { return Fingerprint(c.Encode()) }

// Fingerprint is the fingerprint of an encoding made by Command.Encode, for
// callers that already hold the encoding.
func Fingerprint(encoded []byte) string { return fingerprintOf(OperationCreate, encoded) }

// fingerprintOf hashes an operation's encoded command, versioned.
func fingerprintOf(op string, encoded []byte) string {
	h := sha256.New()
	h.Write([]byte(op + "\n" + fingerprintVersion + "\n"))
	h.Write(encoded)
	return "sha256:" + fingerprintVersion + ":" + hex.EncodeToString(h.Sum(nil))
}
