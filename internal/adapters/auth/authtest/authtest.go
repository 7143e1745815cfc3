// Package authtest is an identity provider for tests: ES256 signing keys
// that sign JWTs, and a JWKS endpoint on a loopback port whose key set a
// test rotates, as an identity provider's key set URL does.
package authtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Key is an ES256 signing key published under a key id.
type Key struct {
	KID     string
	Private *ecdsa.PrivateKey
	signer  jose.Signer
}

// NewKey makes a fresh key for kid; its tokens carry kid in their header.
func NewKey(t testing.TB, kid string) *Key {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	return &Key{KID: kid, Private: key, signer: s}
}

// Sign is a compact JWT of the claims (jwt.Claims and any custom claims
// struct or map, merged), signed by k.
func (k *Key) Sign(t testing.TB, claims ...any) string {
	t.Helper()
	b := jwt.Signed(k.signer)
	for _, c := range claims {
		b = b.Claims(c)
	}
	raw, err := b.Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// Public is k's public half as a key set publishes it.
func (k *Key) Public() jose.JSONWebKey {
	return jose.JSONWebKey{Key: &k.Private.PublicKey, KeyID: k.KID, Algorithm: "ES256", Use: "sig"}
}

// Issuer serves a key set on a loopback port and counts its fetches. Make
// one with NewIssuer; it closes with the test.
type Issuer struct {
	srv     *httptest.Server
	mu      sync.Mutex
	set     []byte
	fetches atomic.Int64
	down    atomic.Bool
}

// NewIssuer serves a key set of keys.
func NewIssuer(t testing.TB, keys ...*Key) *Issuer {
	t.Helper()
	is := &Issuer{}
	is.Publish(t, keys...)
	is.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		is.fetches.Add(1)
		if is.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		is.mu.Lock()
		defer is.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(is.set)
	}))
	t.Cleanup(is.srv.Close)
	return is
}

// Publish makes keys the issuer's whole key set (a rotation).
func (is *Issuer) Publish(t testing.TB, keys ...*Key) {
	t.Helper()
	var set jose.JSONWebKeySet
	for _, k := range keys {
		set.Keys = append(set.Keys, k.Public())
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	is.set = b
}

// URL is the key set's URL.
func (is *Issuer) URL() string { return is.srv.URL + "/.well-known/jwks.json" }

// Fetches is how many times the key set was fetched, failed fetches
// included.
func (is *Issuer) Fetches() int64 { return is.fetches.Load() }

// SetDown makes every fetch answer 503 while down is true.
func (is *Issuer) SetDown(down bool) { is.down.Store(down) }
