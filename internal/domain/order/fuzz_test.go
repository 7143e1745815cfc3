package order

import (
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"
	"gopkg.in/inf.v0"

	"github.com/atlasmart/orderd/internal/domain/fault"
)

// fuzzFields are the only fields a violation may name for a command with at
// most one line.
var fuzzFields = map[string]bool{
	"request_id": true, "customer_id": true, "currency": true, "total": true, "lines": true,
	"lines[0].sku": true, "lines[0].quantity": true, "lines[0].unit_price": true,
}

// canonicalAmount is a canonical amount: no leading zeros, and either no
// fraction or a non-empty one (its length is checked against the currency).
var canonicalAmount = regexp.MustCompile(`^(0|[1-9][0-9]*)(\.[0-9]+)?$`)

// FuzzCanonicalize feeds arbitrary commands with zero or one line (no line
// when sku, qty and price are all zero values).
func FuzzCanonicalize(f *testing.F) {
	const rid = "17000000-0000-0000-0000-000000000500"
	f.Add(rid, "cust-safe", "77.70", "EUR", "", int64(0), "")
	f.Add(rid, "cust-safe", "077.700", "eur", "sku-1", int64(1), "77.7")
	f.Add(strings.ToUpper("a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d"), "Cust", "1200", "JPY", "sku", int64(3), "400")
	f.Add(rid, "c", "1200.5", "JPY", "", int64(0), "")
	f.Add(rid, "c", "1.5", "KWD", "x", int64(2), "0.75")
	f.Add(rid, "c", "77.705", "EUR", "", int64(0), "")
	f.Add("17000000000000000000000000000500", "c", "1", "EUR", "", int64(0), "")
	f.Add("00000000-0000-0000-0000-000000000000", "c", "1", "EUR", "", int64(0), "")
	f.Add(rid, "cust safe", "1e3", "XYZ", "s", int64(0), "+1")
	f.Add(rid, "c\x00", " 1.00", "EURO", "s", int64(1_000_001), "1,00")
	f.Add(rid, "c", "10000.00", "EUR", "s", int64(1_000_000), "0.01")
	f.Add(rid, "c", "999999999999999.99", "CLF", "s", int64(1), "999999999999999.9900")
	f.Add("", "", "", "", "", int64(-1), "")

	f.Fuzz(func(t *testing.T, requestID, customerID, total, cur, sku string, qty int64, price string) {
		in := Input{RequestID: requestID, CustomerID: customerID, Total: total, Currency: cur}
		if sku != "" || qty != 0 || price != "" {
			in.Lines = []LineInput{{SKU: sku, Quantity: qty, UnitPrice: price}}
		}

		id, cmd, err := Canonicalize(in)
		if err != nil {
			// (3) failures are Invalid with at least one violation on a known field.
			fe, ok := err.(*fault.Error)
			if !ok {
				t.Fatalf("error %T %v is not a *fault.Error", err, err)
			}
			if fe.Kind != fault.Invalid {
				t.Fatalf("Kind = %v, want Invalid", fe.Kind)
			}
			if len(fe.Violations) == 0 {
				t.Fatalf("Invalid error without violations: %v", err)
			}
			for _, v := range fe.Violations {
				if !fuzzFields[v.Field] || v.Description == "" {
					t.Fatalf("unexpected violation %+v", v)
				}
			}
			if id != uuid.Nil || !reflect.DeepEqual(cmd, Command{}) {
				t.Fatalf("error with non-zero results: %v %+v", id, cmd)
			}
			return
		}

		// The request id is the UUID the client sent, in its 36-char form.
		if len(requestID) != 36 || id == uuid.Nil || id != uuid.MustParse(requestID) {
			t.Fatalf("accepted request id %q as %v", requestID, id)
		}
		if cmd.CustomerID != customerID {
			t.Fatalf("customer id changed: %q -> %q", customerID, cmd.CustomerID)
		}
		if !strings.EqualFold(cmd.Currency, cur) || cmd.Currency != strings.ToUpper(cmd.Currency) {
			t.Fatalf("currency %q canonicalised to %q", cur, cmd.Currency)
		}

		// (2) amounts have exactly the currency's minor-unit decimals and
		// keep the amount the client sent.
		scale, known := minorUnits[cmd.Currency]
		if !known {
			t.Fatalf("canonical currency %q is not in the ISO 4217 table", cmd.Currency)
		}
		checkAmount := func(what, canon, orig string) *inf.Dec {
			t.Helper()
			if !canonicalAmount.MatchString(canon) {
				t.Fatalf("%s %q is not a canonical amount", what, canon)
			}
			_, frac, _ := strings.Cut(canon, ".")
			if len(frac) != scale {
				t.Fatalf("%s %q has %d decimals; %s has %d", what, canon, len(frac), cmd.Currency, scale)
			}
			c, ok1 := new(inf.Dec).SetString(canon)
			o, ok2 := new(inf.Dec).SetString(orig)
			if !ok1 || !ok2 || c.Cmp(o) != 0 {
				t.Fatalf("%s %q canonicalised to a different amount %q", what, orig, canon)
			}
			return c
		}
		tot := checkAmount("total", cmd.Total, total)
		if tot.Sign() <= 0 {
			t.Fatalf("accepted non-positive total %q", cmd.Total)
		}
		if len(cmd.Lines) != len(in.Lines) {
			t.Fatalf("got %d lines from %d", len(cmd.Lines), len(in.Lines))
		}
		if len(cmd.Lines) == 1 {
			l := cmd.Lines[0]
			if l.SKU != sku || l.Quantity != qty || l.Quantity < 1 || l.Quantity > MaxQuantity {
				t.Fatalf("line %+v from sku %q qty %d", l, sku, qty)
			}
			p := checkAmount("unit price", l.UnitPrice, price)
			if sum := new(inf.Dec).Mul(p, inf.NewDec(qty, 0)); sum.Cmp(tot) != 0 {
				t.Fatalf("line sum %s != total %s", sum, tot)
			}
		}

		fp := cmd.Fingerprint()
		if !fingerprintFormat.MatchString(fp) {
			t.Fatalf("fingerprint %q has the wrong format", fp)
		}
		if dec, err := DecodeCommand(cmd.Encode()); err != nil || !reflect.DeepEqual(dec, cmd) {
			t.Fatalf("Encode/DecodeCommand round trip: %+v, %v; want %+v", dec, err, cmd)
		}

		// (1) idempotence: the canonical form canonicalises to itself.
		again := Input{RequestID: strings.ToLower(requestID), CustomerID: cmd.CustomerID, Total: cmd.Total, Currency: cmd.Currency}
		for _, l := range cmd.Lines {
			again.Lines = append(again.Lines, LineInput{SKU: l.SKU, Quantity: l.Quantity, UnitPrice: l.UnitPrice})
		}
		id2, cmd2, err := Canonicalize(again)
		if err != nil {
			t.Fatalf("canonical form %+v rejected: %v (%+v)", again, err, violationsOf(err))
		}
		if id2 != id {
			t.Fatalf("request id %v became %v", id, id2)
		}
		if !reflect.DeepEqual(cmd2, cmd) {
			t.Fatalf("not idempotent:\n  %+v\n  %+v", cmd, cmd2)
		}
		if fp2 := cmd2.Fingerprint(); fp2 != fp {
			t.Fatalf("fingerprint changed: %s -> %s", fp, fp2)
		}
	})
}
