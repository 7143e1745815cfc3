package grpcapi

import (
	"bytes"
	"strings"
	"testing"
)

var testKey = bytes.Repeat([]byte{0x5a}, MinPageTokenKeyLength)

var (
	testListing = customerOrdersListing("acme", "cust-1", "", "2026-08", "2026-09")
	testState   = []byte("\x00\x10cassandra-paging-state\x01\x02\xff")
)

func TestPageTokenRoundTrip(t *testing.T) {
	p := pageTokens{key: testKey}
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
	p := pageTokens{key: testKey}
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
		{name: "flipped state byte", l: testListing, token: flip(5), p: p},
		{name: "flipped mac byte", l: testListing, token: flip(len(raw) - 1), p: p},
		{name: "wrong customer", l: customerOrdersListing("acme", "cust-2", "", "2026-08", "2026-09"), token: tok, p: p},
		{name: "wrong start month", l: customerOrdersListing("acme", "cust-1", "", "2026-07", "2026-09"), token: tok, p: p},
		{name: "wrong end month", l: customerOrdersListing("acme", "cust-1", "", "2026-08", "2026-10"), token: tok, p: p},
		{name: "wrong tenant", l: customerOrdersListing("globex", "cust-1", "", "2026-08", "2026-09"), token: tok, p: p},
		{name: "another kind of listing", l: requestsListing("acme", "PENDING,FAILED"), token: tok, p: p},
		{name: "fields shifted between customer and month", l: customerOrdersListing("acme", "cust-12026", "", "-08", "2026-09"), token: tok, p: p},
		{name: "start given as the single month", l: customerOrdersListing("acme", "cust-1", "2026-08", "", "2026-09"), token: tok, p: p},
		{name: "one field fewer", l: testListing[:len(testListing)-1], token: tok, p: p},
		{name: "wrong key", l: testListing, token: tok, p: pageTokens{key: bytes.Repeat([]byte{0xa5}, MinPageTokenKeyLength)}},
		{name: "truncated by one byte", l: testListing, token: reseal(raw[:len(raw)-1]), p: p},
		{name: "truncated to the mac", l: testListing, token: reseal(raw[len(raw)-32:]), p: p},
		{name: "truncated string", l: testListing, token: tok[:len(tok)-3], p: p},
		{name: "state only (an old raw token)", l: testListing, token: reseal(testState), p: p},
		{name: "empty state", l: testListing, token: reseal(append([]byte{pageTokenVersion}, p.mac(testListing, nil)...)), p: p},
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
