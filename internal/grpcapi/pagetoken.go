package grpcapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
)

// ListCustomerOrders' page_token is owned here, not by the store: the store
// hands out Cassandra's raw paging state, and a client must not be able to
// send Cassandra a paging state of its own making (a forged one was answered
// UNAVAILABLE with RetryInfo, so clients retried it forever). The token is
//
//	base64url( version | paging state | HMAC-SHA256(key, version, tenant, customer_id, month, paging state) )
//
// so a token is accepted only for the listing (tenant, customer, month) it
// was issued for, and only by servers sharing the key (ORDERD_PAGE_TOKEN_KEY).
// It is signed, not encrypted: the paging state holds the partition key the
// client asked for and the last row's clustering key, nothing it could not
// list itself.
const (
	// pageTokenVersion is the first byte of every token; a new layout or
	// MAC input takes a new version.
	pageTokenVersion byte = 1
	// MaxPageTokenLength bounds page_token, in characters. Tokens orderd
	// issues are a few hundred: a paging state holds the partition key
	// (tenant, a customer_id of at most 128 bytes, the month) and one
	// clustering key (an order id).
	MaxPageTokenLength = 2048
	// MinPageTokenKeyLength is the shortest page-token key accepted, in
	// bytes (the HMAC-SHA256 output size).
	MinPageTokenKeyLength = sha256.Size
)

// pageTokenEncoding is strict so that one token has one spelling.
var pageTokenEncoding = base64.RawURLEncoding.Strict()

// errPageToken: the token was not issued for this listing by a server with
// this key (or is not a token at all).
var errPageToken = errors.New("not a token from a previous page of this listing")

// listing is what a page token is bound to.
type listing struct {
	tenant     string
	customerID string
	month      string // YYYY-MM
}

// pageTokens issues and opens page tokens under one key.
type pageTokens struct{ key []byte }

// seal wraps a paging state for l; an empty state (the last page) gives an
// empty token.
func (p pageTokens) seal(l listing, state []byte) string {
	if len(state) == 0 {
		return ""
	}
	b := make([]byte, 0, 1+len(state)+sha256.Size)
	b = append(b, pageTokenVersion)
	b = append(b, state...)
	b = append(b, p.mac(l, state)...)
	return pageTokenEncoding.EncodeToString(b)
}

// open returns the paging state of a token sealed for l, or errPageToken.
func (p pageTokens) open(l listing, token string) ([]byte, error) {
	if len(token) > MaxPageTokenLength {
		return nil, errPageToken
	}
	b, err := pageTokenEncoding.DecodeString(token)
	if err != nil || len(b) < 1+1+sha256.Size || b[0] != pageTokenVersion {
		return nil, errPageToken
	}
	state, tag := b[1:len(b)-sha256.Size], b[len(b)-sha256.Size:]
	if !hmac.Equal(tag, p.mac(l, state)) {
		return nil, errPageToken
	}
	return state, nil
}

// mac authenticates the version, the listing and the state; each field is
// length-prefixed so that no two different inputs share an encoding.
func (p pageTokens) mac(l listing, state []byte) []byte {
	m := hmac.New(sha256.New, p.key)
	m.Write([]byte{pageTokenVersion})
	var n [binary.MaxVarintLen64]byte
	for _, f := range [][]byte{[]byte(l.tenant), []byte(l.customerID), []byte(l.month), state} {
		m.Write(n[:binary.PutUvarint(n[:], uint64(len(f)))])
		m.Write(f)
	}
	return m.Sum(nil)
}
