package order

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/domain/fault"
)

const exampleRequestID = "17000000-0000-0000-0000-000000000500"

// goldenFingerprint is the v1 fingerprint of the design-doc example command
// (request 17000000-0000-0000-0000-000000000500, customer "cust-safe", total
// "77.70" EUR, no lines). It is also sha256("CREATE_ORDER\nv1\n" +
// `{"customer_id":"cust-safe","total":"77.70","currency":"EUR"}`).
//
// DO NOT update this literal to make the test pass. Every ledger row stores a
// fingerprint computed this way; if this value changes, every stored row's
// comparison breaks and retries of old requests are wrongly rejected as
// conflicts. A change to the canonical encoding must bump fingerprintVersion
// (and keep v1 computable for old rows) instead.
const goldenFingerprint = "sha256:v1:10ead5f91b439cc9d23b7a3028709001594b677aef4e276dd04c3edac5841d30"

var fingerprintFormat = regexp.MustCompile(`^sha256:v1:[0-9a-f]{64}$`)

// valid returns a valid Input (the design-doc example) for tests to modify.
func valid() Input {
	return Input{RequestID: exampleRequestID, CustomerID: "cust-safe", Total: "77.70", Currency: "EUR"}
}

// withLines returns a valid Input with two lines summing to its total.
func withLines() Input {
	in := valid()
	in.Total = "77.69" // 2 × 10.00 + 3 × 19.23
	in.Lines = []LineInput{
		{SKU: "sku-b", Quantity: 2, UnitPrice: "10.00"},
		{SKU: "sku-a", Quantity: 3, UnitPrice: "19.23"},
	}
	return in
}

func mustCanonicalize(t *testing.T, in Input) (uuid.UUID, Command) {
	t.Helper()
	id, cmd, err := Canonicalize(in)
	if err != nil {
		t.Fatalf("Canonicalize(%+v): unexpected error %v (violations %v)", in, err, violationsOf(err))
	}
	return id, cmd
}

func violationsOf(err error) []fault.Violation {
	if fe, ok := fault.As(err); ok {
		return fe.Violations
	}
	return nil
}

func TestCanonicalizeEquivalentInputs(t *testing.T) {
	tests := []struct {
		name string
		a, b func(*Input)
	}{
		{"total 77.7 vs 77.70", func(in *Input) { in.Total = "77.7" }, func(in *Input) { in.Total = "77.70" }},
		{"total 77.7 vs 077.700", func(in *Input) { in.Total = "77.7" }, func(in *Input) { in.Total = "077.700" }},
		{"total 77.70 vs 77.7000000", func(in *Input) { in.Total = "77.70" }, func(in *Input) { in.Total = "77.7000000" }},
		{"total 5 vs 5.00 vs 0005.0", func(in *Input) { in.Total = "5" }, func(in *Input) { in.Total = "0005.0" }},
		{"currency eur vs EUR", func(in *Input) { in.Currency = "eur" }, func(in *Input) { in.Currency = "EUR" }},
		{"currency Eur vs EUR", func(in *Input) { in.Currency = "Eur" }, func(in *Input) { in.Currency = "EUR" }},
		{
			"request id upper vs lower hex",
			func(in *Input) { in.RequestID = "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d" },
			func(in *Input) { in.RequestID = "A1B2C3D4-E5F6-4A7B-8C9D-0E1F2A3B4C5D" },
		},
		{
			"lines in different order",
			func(in *Input) {
				in.Total = "42.50"
				in.Lines = []LineInput{{"b", 1, "10.00"}, {"a", 2, "5.25"}, {"c", 1, "22"}}
			},
			func(in *Input) {
				in.Total = "42.50"
				in.Lines = []LineInput{{"c", 1, "22.00"}, {"a", 2, "5.25"}, {"b", 1, "10"}}
			},
		},
		{
			"same sku, lines ordered by price then quantity",
			func(in *Input) {
				in.Total = "23"
				in.Lines = []LineInput{{"a", 2, "3"}, {"a", 1, "10"}, {"a", 1, "3"}, {"a", 1, "4"}}
			},
			func(in *Input) {
				in.Total = "23.00"
				in.Lines = []LineInput{{"a", 1, "4"}, {"a", 1, "3.0"}, {"a", 1, "10.0"}, {"a", 2, "03"}}
			},
		},
		{
			// Canonical line order compares prices as amounts, not strings:
			// "9.00" sorts before "10.00".
			"line prices compared as amounts",
			func(in *Input) {
				in.Total = "19"
				in.Lines = []LineInput{{"a", 1, "10"}, {"a", 1, "9"}}
			},
			func(in *Input) {
				in.Total = "19"
				in.Lines = []LineInput{{"a", 1, "9"}, {"a", 1, "10"}}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inA, inB := valid(), valid()
			tt.a(&inA)
			tt.b(&inB)
			idA, cmdA := mustCanonicalize(t, inA)
			idB, cmdB := mustCanonicalize(t, inB)
			if idA != idB {
				t.Errorf("request ids differ: %v vs %v", idA, idB)
			}
			if !reflect.DeepEqual(cmdA, cmdB) {
				t.Errorf("commands differ:\n  %+v\n  %+v", cmdA, cmdB)
			}
			if fa, fb := cmdA.Fingerprint(), cmdB.Fingerprint(); fa != fb {
				t.Errorf("fingerprints differ: %s vs %s", fa, fb)
			}
			if ea, eb := string(cmdA.Encode()), string(cmdB.Encode()); ea != eb {
				t.Errorf("encodings differ: %s vs %s", ea, eb)
			}
		})
	}
}

func TestCanonicalizeCanonicalForm(t *testing.T) {
	in := valid()
	in.RequestID = "A1B2C3D4-E5F6-4A7B-8C9D-0E1F2A3B4C5D"
	in.Currency = "eur"
	in.Total = "042.5"
	in.Lines = []LineInput{{"b", 1, "10"}, {"a", 2, "5.25"}, {"c", 1, "022.000"}}
	id, cmd := mustCanonicalize(t, in)
	if want := uuid.MustParse("a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d"); id != want {
		t.Errorf("request id = %v, want %v", id, want)
	}
	want := Command{
		CustomerID: "cust-safe",
		Total:      "42.50",
		Currency:   "EUR",
		Lines: []Line{
			{SKU: "a", Quantity: 2, UnitPrice: "5.25"},
			{SKU: "b", Quantity: 1, UnitPrice: "10.00"},
			{SKU: "c", Quantity: 1, UnitPrice: "22.00"},
		},
	}
	if !reflect.DeepEqual(cmd, want) {
		t.Errorf("command = %+v\nwant      %+v", cmd, want)
	}
	// Canonicalize does not modify its input's lines.
	if in.Lines[0].SKU != "b" || in.Lines[2].UnitPrice != "022.000" {
		t.Errorf("input lines modified: %+v", in.Lines)
	}
}

func TestCanonicalizeDistinctInputs(t *testing.T) {
	base := func() Input {
		in := valid()
		in.Total = "42.50"
		in.Lines = []LineInput{{"a", 2, "5.25"}, {"b", 1, "32.00"}}
		return in
	}
	tests := []struct {
		name   string
		mutate func(*Input)
	}{
		{"total", func(in *Input) { in.Total = "42.51"; in.Lines = nil }},
		{"total scale-equivalent but different amount", func(in *Input) { in.Total = "4.25"; in.Lines = nil }},
		{"currency", func(in *Input) { in.Currency = "USD" }},
		{"currency with same minor units", func(in *Input) { in.Currency = "GBP" }},
		{"customer_id", func(in *Input) { in.CustomerID = "cust-other" }},
		{"customer_id case", func(in *Input) { in.CustomerID = "Cust-safe" }},
		{"customer_id JSON-escape lookalike", func(in *Input) { in.CustomerID = `cust\u002dsafe` }},
		{"line sku", func(in *Input) { in.Lines[0].SKU = "c" }},
		{"line sku case", func(in *Input) { in.Lines[0].SKU = "A" }},
		{"line quantity", func(in *Input) {
			in.Lines[0].Quantity = 4
			in.Lines[1].UnitPrice = "21.50"
		}},
		{"line price", func(in *Input) {
			in.Lines[0].UnitPrice = "5.00"
			in.Lines[1].UnitPrice = "32.50"
		}},
		{"no lines", func(in *Input) { in.Lines = nil }},
		{"one line instead of two", func(in *Input) { in.Lines = []LineInput{{"a", 1, "42.50"}} }},
		{"line split in two", func(in *Input) {
			in.Lines = []LineInput{{"a", 1, "5.25"}, {"a", 1, "5.25"}, {"b", 1, "32.00"}}
		}},
	}
	_, baseCmd := mustCanonicalize(t, base())
	baseFP := baseCmd.Fingerprint()
	seen := map[string]string{baseFP: "base"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := base()
			tt.mutate(&in)
			_, cmd := mustCanonicalize(t, in)
			fp := cmd.Fingerprint()
			if fp == baseFP {
				t.Errorf("fingerprint equals the base command's: %+v vs %+v", cmd, baseCmd)
			}
			if other, dup := seen[fp]; dup {
				t.Errorf("fingerprint collides with case %q", other)
			}
			seen[fp] = tt.name
		})
	}

	// Customer case difference without lines, as in the brief: "Cust" vs "cust".
	a, b := valid(), valid()
	a.CustomerID, b.CustomerID = "Cust", "cust"
	_, ca := mustCanonicalize(t, a)
	_, cb := mustCanonicalize(t, b)
	if ca.Fingerprint() == cb.Fingerprint() {
		t.Errorf("customer ids %q and %q share a fingerprint", a.CustomerID, b.CustomerID)
	}
}

func TestCanonicalTotals(t *testing.T) {
	tests := []struct {
		currency, total string
		want            string // "" means invalid, with a violation on "total"
	}{
		{"EUR", "77.7", "77.70"},
		{"EUR", "77.70", "77.70"},
		{"EUR", "077.700", "77.70"},
		{"EUR", "1200", "1200.00"},
		{"EUR", "0.05", "0.05"},
		{"EUR", "0.5", "0.50"},
		{"EUR", "77.705", ""},
		{"EUR", "77.7050", ""},
		{"EUR", "0.001", ""},
		{"JPY", "1200", "1200"},
		{"JPY", "1200.0", "1200"},
		{"JPY", "1200.000", "1200"},
		{"JPY", "1200.5", ""},
		{"JPY", "0.5", ""},
		{"KWD", "1.5", "1.500"},
		{"KWD", "1.505", "1.505"},
		{"KWD", "1.5055", ""},
		{"kwd", "2", "2.000"},
		// ISO 4217 minor units, not CLDR's (which gave IDR, COP and IQD 0).
		{"IDR", "15000", "15000.00"},
		{"IDR", "15000.50", "15000.50"},
		{"COP", "1200.5", "1200.50"},
		{"IQD", "1500", "1500.000"},
		{"IQD", "1500.0005", ""},
		{"CLF", "1.2345", "1.2345"},
		{"CLF", "1.23456", ""},
		{"UYW", "7", "7.0000"},
		{"EUR", "999999999999999", "999999999999999.00"},
		{"EUR", "000999999999999999.990", "999999999999999.99"},
		{"EUR", "1000000000000000", ""}, // 16 integer digits
	}
	for _, tt := range tests {
		t.Run(tt.currency+" "+tt.total, func(t *testing.T) {
			in := valid()
			in.Currency, in.Total = tt.currency, tt.total
			_, cmd, err := Canonicalize(in)
			if tt.want == "" {
				assertViolations(t, err, "total")
				return
			}
			if err != nil {
				t.Fatalf("unexpected error %v (violations %v)", err, violationsOf(err))
			}
			if cmd.Total != tt.want {
				t.Errorf("Total = %q, want %q", cmd.Total, tt.want)
			}
			if cmd.Currency != strings.ToUpper(tt.currency) {
				t.Errorf("Currency = %q, want %q", cmd.Currency, strings.ToUpper(tt.currency))
			}
		})
	}
}

func TestCanonicalLinePrices(t *testing.T) {
	in := valid()
	in.Currency, in.Total = "KWD", "4.5"
	in.Lines = []LineInput{{"x", 3, "1.5"}}
	_, cmd := mustCanonicalize(t, in)
	want := []Line{{SKU: "x", Quantity: 3, UnitPrice: "1.500"}}
	if cmd.Total != "4.500" || !reflect.DeepEqual(cmd.Lines, want) {
		t.Errorf("got total %q lines %+v, want 4.500 %+v", cmd.Total, cmd.Lines, want)
	}

	in = valid()
	in.Currency, in.Total = "JPY", "2401"
	in.Lines = []LineInput{{"x", 2, "1200.5"}}
	_, _, err := Canonicalize(in)
	assertViolations(t, err, "lines[0].unit_price")
}

// assertViolations checks err is a *fault.Error of Kind Invalid whose
// violations name exactly the given fields (as a multiset; order ignored).
func assertViolations(t *testing.T, err error, fields ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want violations on %v", fields)
	}
	fe, ok := err.(*fault.Error)
	if !ok {
		t.Fatalf("error %T %v is not a *fault.Error", err, err)
	}
	if fe.Kind != fault.Invalid {
		t.Errorf("Kind = %v, want %v", fe.Kind, fault.Invalid)
	}
	if fault.KindOf(err) != fault.Invalid {
		t.Errorf("fault.KindOf = %v, want %v", fault.KindOf(err), fault.Invalid)
	}
	var got []string
	for _, v := range fe.Violations {
		got = append(got, v.Field)
		if v.Description == "" {
			t.Errorf("violation on %q has no description", v.Field)
		}
	}
	want := slices.Clone(fields)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("violation fields = %v, want %v (violations %+v)", got, want, fe.Violations)
	}
}

func TestCanonicalizeInvalid(t *testing.T) {
	manyLines := func(n int) []LineInput {
		ls := make([]LineInput, n)
		for i := range ls {
			ls[i] = LineInput{SKU: fmt.Sprintf("sku-%03d", i), Quantity: 1, UnitPrice: "1.00"}
		}
		return ls
	}
	tests := []struct {
		name   string
		in     Input
		mutate func(*Input)
		fields []string
	}{
		{name: "empty request", in: Input{}, fields: []string{"request_id", "customer_id", "currency", "total"}},
		{name: "empty request with an empty line", in: Input{Lines: []LineInput{{}}},
			fields: []string{"request_id", "customer_id", "currency", "total", "lines[0].sku", "lines[0].quantity", "lines[0].unit_price"}},

		// request_id
		{name: "missing request id", mutate: func(in *Input) { in.RequestID = "" }, fields: []string{"request_id"}},
		{name: "nil uuid", mutate: func(in *Input) { in.RequestID = "00000000-0000-0000-0000-000000000000" }, fields: []string{"request_id"}},
		{name: "non-uuid request id", mutate: func(in *Input) { in.RequestID = "order-1" }, fields: []string{"request_id"}},
		{name: "uuid with bad hex", mutate: func(in *Input) { in.RequestID = "17000000-0000-0000-0000-00000000050g" }, fields: []string{"request_id"}},
		{name: "uuid without dashes", mutate: func(in *Input) { in.RequestID = "17000000000000000000000000000500" }, fields: []string{"request_id"}},
		{name: "nil uuid without dashes", mutate: func(in *Input) { in.RequestID = strings.Repeat("0", 32) }, fields: []string{"request_id"}},
		{name: "uuid in braces", mutate: func(in *Input) { in.RequestID = "{" + exampleRequestID + "}" }, fields: []string{"request_id"}},
		{name: "urn uuid", mutate: func(in *Input) { in.RequestID = "urn:uuid:" + exampleRequestID }, fields: []string{"request_id"}},
		{name: "uuid with surrounding space", mutate: func(in *Input) { in.RequestID = " " + exampleRequestID }, fields: []string{"request_id"}},
		{name: "uuid with misplaced dashes", mutate: func(in *Input) { in.RequestID = "1700000-00000-0000-0000-000000000500" }, fields: []string{"request_id"}},

		// customer_id
		{name: "missing customer", mutate: func(in *Input) { in.CustomerID = "" }, fields: []string{"customer_id"}},
		{name: "customer with space", mutate: func(in *Input) { in.CustomerID = "cust safe" }, fields: []string{"customer_id"}},
		{name: "customer with leading space", mutate: func(in *Input) { in.CustomerID = " cust" }, fields: []string{"customer_id"}},
		{name: "customer with trailing newline", mutate: func(in *Input) { in.CustomerID = "cust\n" }, fields: []string{"customer_id"}},
		{name: "customer with tab", mutate: func(in *Input) { in.CustomerID = "cust\tsafe" }, fields: []string{"customer_id"}},
		{name: "customer with NUL", mutate: func(in *Input) { in.CustomerID = "cust\x00" }, fields: []string{"customer_id"}},
		{name: "customer with DEL", mutate: func(in *Input) { in.CustomerID = "cust\x7f" }, fields: []string{"customer_id"}},
		{name: "customer with no-break space", mutate: func(in *Input) { in.CustomerID = "cust\u00a0safe" }, fields: []string{"customer_id"}},
		{name: "customer with invalid utf-8", mutate: func(in *Input) { in.CustomerID = "cust\xff" }, fields: []string{"customer_id"}},
		{name: "customer 129 bytes", mutate: func(in *Input) { in.CustomerID = strings.Repeat("c", 129) }, fields: []string{"customer_id"}},
		{name: "customer 129 bytes of multibyte runes", mutate: func(in *Input) { in.CustomerID = strings.Repeat("é", 64) + "c" }, fields: []string{"customer_id"}},

		// currency
		{name: "missing currency", mutate: func(in *Input) { in.Currency = "" }, fields: []string{"currency"}},
		{name: "unknown currency", mutate: func(in *Input) { in.Currency = "XYZ" }, fields: []string{"currency"}},
		{name: "currency EURO", mutate: func(in *Input) { in.Currency = "EURO" }, fields: []string{"currency"}},
		{name: "currency E1R", mutate: func(in *Input) { in.Currency = "E1R" }, fields: []string{"currency"}},
		{name: "currency EU", mutate: func(in *Input) { in.Currency = "EU" }, fields: []string{"currency"}},
		{name: "currency with space", mutate: func(in *Input) { in.Currency = " EUR" }, fields: []string{"currency"}},
		{name: "currency symbol", mutate: func(in *Input) { in.Currency = "€" }, fields: []string{"currency"}},

		// total
		{name: "missing total", mutate: func(in *Input) { in.Total = "" }, fields: []string{"total"}},
		{name: "negative total", mutate: func(in *Input) { in.Total = "-1.00" }, fields: []string{"total"}},
		{name: "zero total", mutate: func(in *Input) { in.Total = "0" }, fields: []string{"total"}},
		{name: "zero total with decimals", mutate: func(in *Input) { in.Total = "000.000" }, fields: []string{"total"}},
		{name: "exponent total", mutate: func(in *Input) { in.Total = "1e3" }, fields: []string{"total"}},
		{name: "leading space total", mutate: func(in *Input) { in.Total = " 1.00" }, fields: []string{"total"}},
		{name: "trailing newline total", mutate: func(in *Input) { in.Total = "1.00\n" }, fields: []string{"total"}},
		{name: "comma total", mutate: func(in *Input) { in.Total = "1,00" }, fields: []string{"total"}},
		{name: "thousands separator total", mutate: func(in *Input) { in.Total = "1,000.00" }, fields: []string{"total"}},
		{name: "plus total", mutate: func(in *Input) { in.Total = "+1" }, fields: []string{"total"}},
		{name: "trailing dot total", mutate: func(in *Input) { in.Total = "1." }, fields: []string{"total"}},
		{name: "leading dot total", mutate: func(in *Input) { in.Total = ".5" }, fields: []string{"total"}},
		{name: "two dots total", mutate: func(in *Input) { in.Total = "1.0.0" }, fields: []string{"total"}},
		{name: "non-ascii digits total", mutate: func(in *Input) { in.Total = "١٢" }, fields: []string{"total"}},
		{name: "too many decimals total", mutate: func(in *Input) { in.Total = "77.705" }, fields: []string{"total"}},
		{name: "total over MaxAmountLength", mutate: func(in *Input) {
			in.Total = strings.Repeat("0", MaxAmountLength-4) + "77.70"
		}, fields: []string{"total"}},
		{name: "huge zero-padded total", mutate: func(in *Input) { in.Total = "77.70" + strings.Repeat("0", 1<<20) }, fields: []string{"total"}},

		// lines
		{name: "101 lines", mutate: func(in *Input) { in.Total = "101"; in.Lines = manyLines(101) }, fields: []string{"lines"}},
		{name: "quantity 0", mutate: func(in *Input) { in.Lines = []LineInput{{"a", 0, "77.70"}} }, fields: []string{"lines[0].quantity"}},
		{name: "quantity negative", mutate: func(in *Input) { in.Lines = []LineInput{{"a", -1, "77.70"}} }, fields: []string{"lines[0].quantity"}},
		{name: "quantity above max", mutate: func(in *Input) {
			in.Total = "1000001"
			in.Lines = []LineInput{{"a", MaxQuantity + 1, "1"}}
		}, fields: []string{"lines[0].quantity"}},
		{name: "lines sum below total", mutate: func(in *Input) { in.Lines = []LineInput{{"a", 1, "77.69"}} }, fields: []string{"total"}},
		{name: "lines sum above total", mutate: func(in *Input) {
			in.Lines = []LineInput{{"a", 1, "70.00"}, {"b", 2, "3.86"}}
		}, fields: []string{"total"}},
		{name: "bad second line price", mutate: func(in *Input) {
			in.Lines = []LineInput{{"a", 1, "70.00"}, {"b", 1, "7.7x"}}
		}, fields: []string{"lines[1].unit_price"}},
		{name: "second line price too precise", mutate: func(in *Input) {
			in.Lines = []LineInput{{"a", 1, "70.00"}, {"b", 1, "7.699"}}
		}, fields: []string{"lines[1].unit_price"}},
		{name: "missing line price", mutate: func(in *Input) { in.Lines = []LineInput{{"a", 1, ""}} }, fields: []string{"lines[0].unit_price"}},
		{name: "negative line price", mutate: func(in *Input) { in.Lines = []LineInput{{"a", 1, "-77.70"}} }, fields: []string{"lines[0].unit_price"}},
		{name: "missing sku", mutate: func(in *Input) { in.Lines = []LineInput{{"", 1, "77.70"}} }, fields: []string{"lines[0].sku"}},
		{name: "sku with space", mutate: func(in *Input) {
			in.Lines = []LineInput{{"a", 1, "70.00"}, {"b c", 1, "7.70"}}
		}, fields: []string{"lines[1].sku"}},
		{name: "sku too long", mutate: func(in *Input) { in.Lines = []LineInput{{strings.Repeat("s", 129), 1, "77.70"}} }, fields: []string{"lines[0].sku"}},
		{name: "line price over MaxAmountLength", mutate: func(in *Input) {
			in.Lines = []LineInput{{"a", 1, "77.70" + strings.Repeat("0", MaxAmountLength-4)}}
		}, fields: []string{"lines[0].unit_price"}},

		// several problems at once
		{name: "several problems", mutate: func(in *Input) {
			in.RequestID = "not-a-uuid"
			in.CustomerID = "cust safe"
			in.Currency = "XYZ"
			in.Total = "1e3"
			in.Lines = []LineInput{{"a", 0, "1.00"}, {"", 1, "1,00"}}
		}, fields: []string{"request_id", "customer_id", "currency", "total", "lines[0].quantity", "lines[1].sku", "lines[1].unit_price"}},
		{name: "several line problems, sum not checked", mutate: func(in *Input) {
			in.Lines = []LineInput{{"a", 1, "1.00"}, {"b", 0, "1.00"}, {"c", 1, "1.001"}}
		}, fields: []string{"lines[1].quantity", "lines[2].unit_price"}},
		// Too many lines is reported once; the lines themselves are not
		// checked, so the violation list stays bounded.
		{name: "101 lines, one bad, sum wrong", mutate: func(in *Input) {
			in.Lines = manyLines(101)
			in.Lines[100].Quantity = 0
		}, fields: []string{"lines"}},
		{name: "test currency", mutate: func(in *Input) { in.Currency = "XTS" }, fields: []string{"currency"}},
		{name: "no-currency code", mutate: func(in *Input) { in.Currency = "XXX" }, fields: []string{"currency"}},
		{name: "withdrawn currency", mutate: func(in *Input) { in.Currency = "DEM" }, fields: []string{"currency"}},
		{name: "withdrawn currency x/text still listed", mutate: func(in *Input) { in.Currency = "HRK" }, fields: []string{"currency"}},
		{name: "precious metal", mutate: func(in *Input) { in.Currency = "XAU" }, fields: []string{"currency"}},
		{name: "unknown currency hides amount scale checks", mutate: func(in *Input) {
			in.Currency = "XYZ"
			in.Total = "1.23456"
			in.Lines = []LineInput{{"a", 1, "9.87654"}}
		}, fields: []string{"currency"}},
		{name: "unknown currency still checks amount syntax", mutate: func(in *Input) {
			in.Currency = "XYZ"
			in.Total = "-1"
			in.Lines = []LineInput{{"a", 1, "1e2"}}
		}, fields: []string{"currency", "total", "lines[0].unit_price"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			if tt.mutate != nil {
				in = valid()
				tt.mutate(&in)
			}
			id, cmd, err := Canonicalize(in)
			assertViolations(t, err, tt.fields...)
			if id != uuid.Nil {
				t.Errorf("request id = %v on error, want nil UUID", id)
			}
			if !reflect.DeepEqual(cmd, Command{}) {
				t.Errorf("command = %+v on error, want zero", cmd)
			}
		})
	}
}

func TestCanonicalizeBoundaries(t *testing.T) {
	manyLines := func(n int) []LineInput {
		ls := make([]LineInput, n)
		for i := range ls {
			ls[i] = LineInput{SKU: fmt.Sprintf("sku-%03d", i), Quantity: 1, UnitPrice: "1.00"}
		}
		return ls
	}
	tests := []struct {
		name   string
		mutate func(*Input)
	}{
		{"customer 128 bytes", func(in *Input) { in.CustomerID = strings.Repeat("c", MaxIDLength) }},
		{"customer non-ascii", func(in *Input) { in.CustomerID = "kunde-müller" }},
		{"customer with JSON-special chars", func(in *Input) { in.CustomerID = `a"b\c<d>&` }},
		{"sku 128 bytes", func(in *Input) { in.Lines = []LineInput{{strings.Repeat("s", MaxIDLength), 1, "77.70"}} }},
		{"total of MaxAmountLength", func(in *Input) { in.Total = strings.Repeat("0", MaxAmountLength-5) + "77.70" }},
		{"line price of MaxAmountLength", func(in *Input) {
			in.Lines = []LineInput{{"a", 1, "77.70" + strings.Repeat("0", MaxAmountLength-5)}}
		}},
		{"100 lines", func(in *Input) { in.Total = "100"; in.Lines = manyLines(MaxLines) }},
		{"quantity max", func(in *Input) {
			in.Total = "10000.00"
			in.Lines = []LineInput{{"a", MaxQuantity, "0.01"}}
		}},
		{"free line", func(in *Input) { in.Lines = []LineInput{{"a", 1, "77.70"}, {"gift", 1, "0"}} }},
		{"uuid any version", func(in *Input) { in.RequestID = "ffffffff-ffff-ffff-ffff-ffffffffffff" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := valid()
			tt.mutate(&in)
			mustCanonicalize(t, in)
		})
	}
}

func TestFingerprintGolden(t *testing.T) {
	id, cmd := mustCanonicalize(t, valid())
	if id != uuid.MustParse(exampleRequestID) {
		t.Errorf("request id = %v", id)
	}
	if got := string(cmd.Encode()); got != `{"customer_id":"cust-safe","total":"77.70","currency":"EUR"}` {
		t.Errorf("Encode = %s", got)
	}
	if got := cmd.Fingerprint(); got != goldenFingerprint {
		t.Errorf("Fingerprint = %s\nwant          %s\n(changing it breaks every stored ledger row's comparison: bump the version instead)", got, goldenFingerprint)
	}
	// Equivalent spellings of the same example give the same golden value.
	in := valid()
	in.RequestID = strings.ToUpper(exampleRequestID)
	in.Total, in.Currency = "077.7", "eur"
	if _, cmd := mustCanonicalize(t, in); cmd.Fingerprint() != goldenFingerprint {
		t.Errorf("equivalent input: Fingerprint = %s, want golden", cmd.Fingerprint())
	}
}

func TestFingerprintFormatAndStability(t *testing.T) {
	for _, in := range []Input{valid(), withLines()} {
		_, cmd := mustCanonicalize(t, in)
		fp := cmd.Fingerprint()
		if !fingerprintFormat.MatchString(fp) {
			t.Errorf("Fingerprint %q does not match %s", fp, fingerprintFormat)
		}
		for range 3 {
			if again := cmd.Fingerprint(); again != fp {
				t.Errorf("Fingerprint not stable: %s then %s", fp, again)
			}
		}
		// A decoded copy fingerprints the same as the original.
		dec, err := DecodeCommand(cmd.Encode())
		if err != nil {
			t.Fatal(err)
		}
		if dec.Fingerprint() != fp {
			t.Errorf("decoded command fingerprint %s, want %s", dec.Fingerprint(), fp)
		}
	}
}

func TestEncodeDecodeCommandRoundTrip(t *testing.T) {
	lineInput := withLines()
	special := valid()
	special.CustomerID = `a"b\c<d>&é`
	special.Lines = []LineInput{{"x<y>", 1, "77.70"}}
	for _, in := range []Input{valid(), lineInput, special} {
		_, cmd := mustCanonicalize(t, in)
		got, err := DecodeCommand(cmd.Encode())
		if err != nil {
			t.Fatalf("DecodeCommand: %v", err)
		}
		if !reflect.DeepEqual(got, cmd) {
			t.Errorf("round trip: got %+v, want %+v", got, cmd)
		}
	}
}

func TestDecodeCommandError(t *testing.T) {
	for _, b := range [][]byte{nil, []byte("{"), []byte(`{"total":1}`), []byte(`[]`)} {
		if _, err := DecodeCommand(b); err == nil {
			t.Errorf("DecodeCommand(%q): no error", b)
		}
	}
}

// CustomerIDViolations is the rule Canonicalize applies to customer_id.
func TestCustomerIDViolations(t *testing.T) {
	for _, id := range []string{"", strings.Repeat("c", MaxIDLength+1), "cust safe", "c\x00", "\xff"} {
		in := valid()
		in.CustomerID = id
		_, _, err := Canonicalize(in)
		want := violationsOf(err)
		got := CustomerIDViolations("customer_id", id)
		if len(got) != 1 || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: CustomerIDViolations = %v, Canonicalize = %v; want one and the same", id, got, want)
		}
	}
	for _, id := range []string{"c", strings.Repeat("c", MaxIDLength), "kunde-müller"} {
		if got := CustomerIDViolations("customer_id", id); len(got) != 0 {
			t.Errorf("%q: %v, want none", id, got)
		}
	}
}
