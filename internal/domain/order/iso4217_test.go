package order

import (
	"encoding/csv"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestISO4217Golden pins minorUnits to testdata/iso4217.csv, row for row:
// every code with numeric minor units is in the table with exactly those
// units, no code without them (N.A.) is, and the table has nothing else. A
// change to either file is a visible diff in review and fails here until
// the other agrees.
func TestISO4217Golden(t *testing.T) {
	raw, err := os.ReadFile("testdata/iso4217.csv")
	if err != nil {
		t.Fatal(err)
	}
	if first, _, _ := strings.Cut(string(raw), "\n"); !strings.Contains(first, "as published "+iso4217Published) {
		t.Errorf("testdata/iso4217.csv names another publication than %s: %q", iso4217Published, first)
	}
	r := csv.NewReader(strings.NewReader(string(raw)))
	r.Comment = '#'
	r.FieldsPerRecord = 5
	rows, err := r.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"code", "numeric", "minor_units", "fund", "name"}; !slices.Equal(rows[0], want) {
		t.Fatalf("header %q, want %q", rows[0], want)
	}
	rows = rows[1:]

	want := map[string]int{}
	var refused []string
	for i, row := range rows {
		code, units := row[0], row[2]
		if len(code) != 3 || strings.Trim(code, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != "" {
			t.Errorf("row %d: code %q is not three upper-case letters", i+2, code)
		}
		if i > 0 && rows[i-1][0] >= code {
			t.Errorf("row %d: code %s is not after %s (one row per code, sorted)", i+2, code, rows[i-1][0])
		}
		if units == "N.A." {
			refused = append(refused, code)
			continue
		}
		n, err := strconv.Atoi(units)
		if err != nil || n < 0 || n > 4 {
			t.Errorf("row %d: %s minor units %q", i+2, code, units)
			continue
		}
		want[code] = n
	}

	for code, n := range want {
		got, ok := minorUnits[code]
		switch {
		case !ok:
			t.Errorf("%s (%d minor units in ISO 4217) is missing from minorUnits", code, n)
		case got != n:
			t.Errorf("minorUnits[%s] = %d, ISO 4217 says %d", code, got, n)
		}
	}
	for code, n := range minorUnits {
		if _, ok := want[code]; !ok {
			t.Errorf("minorUnits[%s] = %d is not a code with minor units in testdata/iso4217.csv", code, n)
		}
	}
	for _, code := range refused {
		if _, _, ok := minorUnitsOf(code); ok {
			t.Errorf("%s has no minor units in ISO 4217 but is accepted", code)
		}
	}
	if len(want) != 165 || len(refused) != 13 {
		// Counts of the 2026-01-01 list: a new publication changes them
		// on purpose, together with iso4217Published.
		t.Errorf("%d codes with minor units and %d without, want 165 and 13 (list of %s)", len(want), len(refused), iso4217Published)
	}
}

// TestISO4217KnownScales checks codes where ISO 4217 and CLDR (through
// golang.org/x/text/currency, which chose the scale before) disagree or
// that are easy to get wrong. Values from list one, 2026-01-01.
func TestISO4217KnownScales(t *testing.T) {
	tests := []struct {
		code  string
		units int // -1: refused
	}{
		// x/text said 0 for these; ISO 4217 says:
		{"IDR", 2}, {"COP", 2}, {"IQD", 3}, {"PKR", 2}, {"RSD", 2}, {"IRR", 2}, {"LBP", 2},
		// agreed before and after
		{"JPY", 0}, {"KRW", 0}, {"ISK", 0}, {"KWD", 3}, {"BHD", 3}, {"TND", 3}, {"EUR", 2}, {"USD", 2}, {"CHF", 2},
		// funds with minor units (x/text refused them as not tender)
		{"CLF", 4}, {"UYW", 4}, {"UYI", 0}, {"BOV", 2}, {"USN", 2},
		// new in list one (x/text did not know them as in use)
		{"XCG", 2}, {"ZWG", 2}, {"VES", 2}, {"VED", 2}, {"SLE", 2}, {"MRU", 2}, {"XAD", 2}, {"SVC", 2},
		// no minor unit, withdrawn, or not a code
		{"XAU", -1}, {"XAG", -1}, {"XDR", -1}, {"XTS", -1}, {"XXX", -1}, {"XUA", -1}, {"XSU", -1},
		{"DEM", -1}, {"HRK", -1}, {"BGN", -1}, {"ANG", -1}, {"CUC", -1}, {"MRO", -1}, {"SLL", -1}, {"VEF", -1},
		{"XYZ", -1}, {"EU", -1}, {"EURO", -1}, {"E1R", -1}, {" EU", -1}, {"€", -1}, {"", -1},
	}
	for _, tt := range tests {
		code, units, ok := minorUnitsOf(tt.code)
		switch {
		case tt.units < 0 && ok:
			t.Errorf("%q accepted as %s with %d minor units, want refused", tt.code, code, units)
		case tt.units >= 0 && (!ok || code != tt.code || units != tt.units):
			t.Errorf("%q = %q, %d, %v; want %q, %d, true", tt.code, code, units, ok, tt.code, tt.units)
		}
	}
}

// TestISO4217LetterCase: a code in any letter case is the upper-case code;
// a non-ASCII letter that upper-cases to an ASCII one is not a letter of a
// code.
func TestISO4217LetterCase(t *testing.T) {
	for _, in := range []string{"eur", "Eur", "eUR", "EUR"} {
		if code, units, ok := minorUnitsOf(in); !ok || code != "EUR" || units != 2 {
			t.Errorf("%q = %q, %d, %v; want EUR, 2, true", in, code, units, ok)
		}
	}
	for _, in := range []string{"uſd", "ıdr", "EU\x00", "EU\u0280"} {
		if code, _, ok := minorUnitsOf(in); ok {
			t.Errorf("%q accepted as %s", in, code)
		}
	}
}
