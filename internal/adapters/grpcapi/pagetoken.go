package grpcapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"

	"github.com/atlasmart/orderd/internal/domain/fault"
)

// Page tokens (ListCustomerOrders, ListRequests) are owned here, not by the
// stores: a store hands out Cassandra's raw paging state, and a client must
// not be able to send Cassandra a paging state of its own making (a forged
// one was answered UNAVAILABLE with RetryInfo, so clients retried it
// forever). The token is
//
//	base64url( version | position | HMAC-SHA256(key, version, listing..., position) )
//
// where the listing is what the token was issued for (its kind, the tenant,
// and the request fields that define the listing: customer and months, or
// states) and the position is where the next page starts (for customer
// orders: the month and Cassandra's paging state within it). So a token is
// accepted only for the listing it was issued for, and only by servers
// sharing the key (ORDERD_PAGE_TOKEN_KEY). It is signed, not encrypted: the
// paging state holds the partition key and one clustering key, nothing the
// caller could not list itself.
const (
	// pageTokenVersion is the first byte of every token; a new layout or
	// MAC input takes a new version. Version 2 binds the kind
	// and the month range; a version 1 token from an older server is
	// refused (INVALID_ARGUMENT: list again from the first page).
	pageTokenVersion byte = 2
	// MaxPageTokenLength bounds page_token, in characters. Tokens orderd
	// issues are a few hundred: a paging state holds the partition key
	// (tenant, a customer_id of at most 128 bytes, the month) and one
	// clustering key.
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

// listing is what a page token is bound to: the kind of listing first, then
// the fields that define it, in a fixed order.
type listing []string

// customerOrdersListing is a ListCustomerOrders listing: its fields as the
// client sent them (month is the deprecated single month).
func customerOrdersListing(tenant, customerID, month, start, end string) listing {
	return listing{"customer-orders", tenant, customerID, month, start, end}
}

// pageTokens issues and opens page tokens under one key.
type pageTokens struct{ key []byte }

// seal wraps a position for l; an empty position (the last page) gives an
// empty token.
func (p pageTokens) seal(l listing, position []byte) string {
	if len(position) == 0 {
		return ""
	}
	b := make([]byte, 0, 1+len(position)+sha256.Size)
	b = append(b, pageTokenVersion)
	b = append(b, position...)
	b = append(b, p.mac(l, position)...)
	return pageTokenEncoding.EncodeToString(b)
}

// open returns the position of a token sealed for l, or errPageToken.
func (p pageTokens) open(l listing, token string) ([]byte, error) {
	if len(token) > MaxPageTokenLength {
		return nil, errPageToken
	}
	b, err := pageTokenEncoding.DecodeString(token)
	if err != nil || len(b) < 1+1+sha256.Size || b[0] != pageTokenVersion {
		return nil, errPageToken
	}
	position, tag := b[1:len(b)-sha256.Size], b[len(b)-sha256.Size:]
	if !hmac.Equal(tag, p.mac(l, position)) {
		return nil, errPageToken
	}
	return position, nil
}

// badPageToken is the violation of a page_token that is not a token of
// the listing it was sent with.
var badPageToken = fault.Violation{Field: "page_token", Description: errPageToken.Error()}

// openField opens a request's page_token for l: the position, or nil when
// there is no token or it is not one of l's (then badPageToken is in v). A
// token is opened only once the fields that define l are known valid
// (listed), so nothing unchecked reaches Cassandra; a token too long is
// refused in any case.
func (p pageTokens) openField(v *[]fault.Violation, listed bool, l listing, token string) []byte {
	switch {
	case len(token) > MaxPageTokenLength:
		*v = append(*v, badPageToken)
	case token != "" && listed:
		position, err := p.open(l, token)
		if err != nil {
			*v = append(*v, badPageToken)
		}
		return position
	}
	return nil
}

// mac authenticates the version, the listing and the position; each field
// is length-prefixed so that no two different inputs share an encoding.
func (p pageTokens) mac(l listing, position []byte) []byte {
	m := hmac.New(sha256.New, p.key)
	m.Write([]byte{pageTokenVersion})
	var n [binary.MaxVarintLen64]byte
	field := func(f []byte) {
		m.Write(n[:binary.PutUvarint(n[:], uint64(len(f)))])
		m.Write(f)
	}
	m.Write(n[:binary.PutUvarint(n[:], uint64(len(l)))])
	for _, f := range l {
		field([]byte(f))
	}
	field(position)
	return m.Sum(nil)
}
