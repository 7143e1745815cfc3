package grpcapi

import (
	"bytes"
	"strings"
	"testing"
)

var testKey = bytes.Repeat([]byte{0x5a}, MinPageTokenKeyLength)

// testTokens are page tokens under testKey.
func testTokens(t testing.TB) pageTokens {
	t.Helper()
	p, err := newPageTokens(testKey)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var (
	testListing = customerOrdersListing("acme", "cust-1", "", "2026-08", "2026-09")
	testState   = []byte("\x00\x10cassandra-paging-state\x01\x02\xff")
)

func TestPageTokenRoundTrip(t *testing.T) {
	p := testTokens(t)
	tok := p.seal(testListing, testState)
	if tok == "" || strings.ContainsAny(tok, "+/=") {
		t.Fatalf("token %q: want non-empty unpadded base64url", tok)
	}
	got, err := p.open(testListing, tok)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if !bytes.Equal(got, testState) {
		t.Errorf("state = %q, want %q", got, testState)
	}
	if tok := p.seal(testListing, nil); tok != "" {
		t.Errorf("last page: token %q, want empty", tok)
	}
}

func TestPageTokenRejected(t *testing.T) {
	p := testTokens(t)
	other, err := newPageTokens(bytes.Repeat([]byte{0xa5}, MinPageTokenKeyLength))
	if err != nil {
		t.Fatal(err)
	}
	tok := p.seal(testListing, testState)
	raw, err := pageTokenEncoding.DecodeString(tok)
	if err != nil {
		t.Fatal(err)
	}
	reseal := func(b []byte) string { return pageTokenEncoding.EncodeToString(b) }
	flip := func(i int) string {
		b := bytes.Clone(raw)
		b[i] ^= 0x01
		return reseal(b)
	}
	tests := []struct {
		name  string
		l     listing
		token string
		p     pageTokens
	}{
		{name: "flipped version byte", l: testListing, token: flip(0), p: p},
		{name: "flipped state byte", l: testListing, token: flip(1 + 12 + 3), p: p},
		{name: "flipped nonce byte", l: testListing, token: flip(2), p: p},
		{name: "flipped tag byte", l: testListing, token: flip(len(raw) - 1), p: p},
		{name: "wrong customer", l: customerOrdersListing("acme", "cust-2", "", "2026-08", "2026-09"), token: tok, p: p},
		{name: "wrong start month", l: customerOrdersListing("acme", "cust-1", "", "2026-07", "2026-09"), token: tok, p: p},
		{name: "wrong end month", l: customerOrdersListing("acme", "cust-1", "", "2026-08", "2026-10"), token: tok, p: p},
		{name: "wrong tenant", l: customerOrdersListing("globex", "cust-1", "", "2026-08", "2026-09"), token: tok, p: p},
		{name: "another kind of listing", l: requestsListing("acme", "PENDING,FAILED"), token: tok, p: p},
		{name: "fields shifted between customer and month", l: customerOrdersListing("acme", "cust-12026", "", "-08", "2026-09"), token: tok, p: p},
		{name: "start given as the single month", l: customerOrdersListing("acme", "cust-1", "2026-08", "", "2026-09"), token: tok, p: p},
		{name: "one field fewer", l: testListing[:len(testListing)-1], token: tok, p: p},
		{name: "wrong key", l: testListing, token: tok, p: other},
		{name: "truncated by one byte", l: testListing, token: reseal(raw[:len(raw)-1]), p: p},
		{name: "truncated to the tag", l: testListing, token: reseal(raw[len(raw)-16:]), p: p},
		{name: "an older version's layout", l: testListing, token: reseal(append([]byte{2}, raw[1:]...)), p: p},
		{name: "truncated string", l: testListing, token: tok[:len(tok)-3], p: p},
		{name: "state only (an old raw token)", l: testListing, token: reseal(testState), p: p},
		{name: "empty state", l: testListing, token: reseal(p.aead.Seal(bytes.Clone(raw[:13]), raw[1:13], nil, additionalData(testListing))), p: p},
		{name: "not base64url", l: testListing, token: "!!not a token!!", p: p},
		{name: "padded", l: testListing, token: tok + "==", p: p},
		{name: "too long", l: testListing, token: strings.Repeat("A", MaxPageTokenLength+1), p: p},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if state, err := tc.p.open(tc.l, tc.token); err == nil {
				t.Errorf("open accepted the token (state %q)", state)
			}
		})
	}
}

// A token shows nothing of its position: the ledger scan behind
// ListRequests reads every tenant's rows, so a paging state may hold
// another tenant's key (its name and request id).
func TestPageTokenHidesThePosition(t *testing.T) {
	p := testTokens(t)
	position := []byte("\x00\x06globex\x00\x00\x0cCREATE_ORDER\x00")
	tok := p.seal(requestsListing("acme", "PENDING,FAILED"), position)
	raw, err := pageTokenEncoding.DecodeString(tok)
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{"globex", "CREATE_ORDER"} {
		if bytes.Contains(raw, []byte(part)) || strings.Contains(tok, part) {
			t.Errorf("token %q shows %q", tok, part)
		}
	}
	if again := p.seal(requestsListing("acme", "PENDING,FAILED"), position); again == tok {
		t.Error("two tokens for one position are equal: the nonce is not fresh")
	}
}
