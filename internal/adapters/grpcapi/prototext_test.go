package grpcapi

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/atlasmart/orderd/internal/domain/order"
)

// The proto documents every limit the server enforces, in the words its
// fields use; this holds the comments to the constants, so that a limit
// changed in code without its comment (or the reverse) fails here.
func TestProtoDocumentsTheServersLimits(t *testing.T) {
	b, err := os.ReadFile("../../../proto/atlasmart/orders/v1/orders.proto")
	if err != nil {
		t.Fatal(err)
	}
	// Comments only, joined into one line per comment block's text.
	var text strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		if c, ok := strings.CutPrefix(strings.TrimSpace(line), "//"); ok {
			text.WriteString(strings.TrimSpace(c) + " ")
		}
	}
	doc := text.String()
	for _, want := range []string{
		fmt.Sprintf("1 to %d bytes of UTF-8", order.MaxIDLength),
		fmt.Sprintf("at most %d characters, %d digits before the point", order.MaxAmountLength, 15),
		fmt.Sprintf("Order lines: at most %d", order.MaxLines),
		fmt.Sprintf("Number of units ordered: 1 to %d", order.MaxQuantity),
		fmt.Sprintf("1 to %d", order.MaxVersion),
		fmt.Sprintf("At most %d characters after Unicode NFC normalisation", order.MaxShippingNoteLength),
		fmt.Sprintf("0 means %d; larger than %d is read as %d", defaultPageSize, maxPageSize, maxPageSize),
		fmt.Sprintf("at most %d characters. A token is valid only", MaxPageTokenLength),
		fmt.Sprintf("at most %d months before it (%d months in all)", maxListedMonths-1, maxListedMonths),
		fmt.Sprintf("Default: %d months before end_month", defaultListedMonths-1),
		"exactly 36 characters",
		"greater than zero",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("orders.proto does not say %q", want)
		}
	}
	// Every limit-looking number in the comments is one of the known ones.
	known := map[string]bool{}
	for _, n := range []int{order.MaxIDLength, order.MaxAmountLength, 15, order.MaxLines, order.MaxQuantity, order.MaxVersion,
		order.MaxShippingNoteLength, defaultPageSize, maxPageSize, MaxPageTokenLength, maxListedMonths, maxListedMonths - 1,
		defaultListedMonths - 1, 36, 3, 2, 0, 1, 4} {
		known[fmt.Sprint(n)] = true
	}
	matches := regexp.MustCompile(`(?:at most|to|exactly|means|as) (\d+)`).FindAllStringSubmatch(doc, -1)
	if len(matches) < 10 {
		t.Fatalf("found %d stated limits in orders.proto; the pattern no longer reads its comments", len(matches))
	}
	for _, m := range matches {
		if !known[m[1]] {
			t.Errorf("orders.proto states a limit %q (%q) that no server constant has", m[1], m[0])
		}
	}
}
