package grpcapi

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/atlasmart/orderd/internal/domain/fault"
)

// Page tokens (ListCustomerOrders, ListRequests) are owned here, not by the
// stores: a store hands out Cassandra's raw paging state, and a client must
// not be able to send Cassandra a paging state of its own making (a forged
// one was answered UNAVAILABLE with RetryInfo, so clients retried it
// forever). The token is
//
//	base64url( version | nonce | AES-256-GCM(key', nonce, position, version | listing...) )
//
// where key' is derived from the configured key (HKDF-SHA256), the listing
// is what the token was issued for (its kind, the tenant, and the request
// fields that define the listing: customer and months, or states) and the
// position is where the next page starts (for customer orders: the month
// and Cassandra's paging state within it). So a token is accepted only for
// the listing it was issued for, and only by servers sharing the key
// (ORDERD_PAGE_TOKEN_KEY). It is encrypted, not only signed: a paging
// state holds the partition key of the last row read, and the ledger scan
// behind ListRequests reads every tenant's rows, so that key may be
// another tenant's (its name and request id).
const (
	// pageTokenVersion is the first byte of every token; a new layout or
	// input takes a new version. Version 3 encrypts the position (version
	// 2 signed it, in clear; version 1 bound neither kind nor month
	// range); a token of an older version is refused (INVALID_ARGUMENT:
	// list again from the first page).
	pageTokenVersion byte = 3
	// MaxPageTokenLength bounds page_token, in characters. Tokens orderd
	// issues are a few hundred: a paging state holds the partition key
	// (tenant, a customer_id of at most 128 bytes, the month) and one
	// clustering key.
	MaxPageTokenLength = 2048
	// MinPageTokenKeyLength is the shortest page-token key accepted, in
	// bytes.
	MinPageTokenKeyLength = 32
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

// pageTokens issues and opens page tokens under one key. Make one with
// newPageTokens.
type pageTokens struct{ aead cipher.AEAD }

// newPageTokens derives the token cipher's key from key (at least
// MinPageTokenKeyLength bytes).
func newPageTokens(key []byte) (pageTokens, error) {
	if len(key) < MinPageTokenKeyLength {
		return pageTokens{}, fmt.Errorf("page token key of %d bytes: need at least %d", len(key), MinPageTokenKeyLength)
	}
	k, err := hkdf.Key(sha256.New, key, nil, "orderd page token v3", 32)
	if err != nil {
		return pageTokens{}, fmt.Errorf("derive the page token key: %w", err)
	}
	block, err := aes.NewCipher(k)
	if err != nil {
		return pageTokens{}, fmt.Errorf("page token cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return pageTokens{}, fmt.Errorf("page token cipher: %w", err)
	}
	return pageTokens{aead: aead}, nil
}

// seal wraps a position for l; an empty position (the last page) gives an
// empty token.
func (p pageTokens) seal(l listing, position []byte) string {
	if len(position) == 0 {
		return ""
	}
	b := make([]byte, 1+p.aead.NonceSize(), 1+p.aead.NonceSize()+len(position)+p.aead.Overhead())
	b[0] = pageTokenVersion
	rand.Read(b[1:]) // never fails (crypto/rand)
	b = p.aead.Seal(b, b[1:], position, additionalData(l))
	return pageTokenEncoding.EncodeToString(b)
}

// open returns the position of a token sealed for l, or errPageToken.
func (p pageTokens) open(l listing, token string) ([]byte, error) {
	if len(token) > MaxPageTokenLength {
		return nil, errPageToken
	}
	b, err := pageTokenEncoding.DecodeString(token)
	n := 1 + p.aead.NonceSize()
	if err != nil || len(b) < n+1+p.aead.Overhead() || b[0] != pageTokenVersion {
		return nil, errPageToken
	}
	position, err := p.aead.Open(nil, b[1:n], b[n:], additionalData(l))
	if err != nil {
		return nil, errPageToken
	}
	return position, nil
}

// additionalData is what a token is bound to besides its position: the
// version and the listing, each field length-prefixed so that no two
// different listings share an encoding.
func additionalData(l listing) []byte {
	b := []byte{pageTokenVersion}
	b = binary.AppendUvarint(b, uint64(len(l)))
	for _, f := range l {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	return b
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
