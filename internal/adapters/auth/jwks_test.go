package auth

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/atlasmart/orderd/internal/adapters/auth/authtest"
)

func remoteVerifier(t *testing.T, src JWKSConfig, log *slog.Logger) *JWTVerifier {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // ends jwkset's refresh goroutine
	v, err := NewRemoteJWTVerifier(ctx, JWTConfig{Issuer: "https://idp.test", Audience: "orderd"}, src, log)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func validClaims() (jwt.Claims, tenantClaims) {
	return jwt.Claims{Issuer: "https://idp.test", Audience: jwt.Audience{"orderd"}, Subject: "svc",
			Expiry: jwt.NewNumericDate(time.Now().Add(time.Hour))},
		tenantClaims{Tenant: "acme", Permissions: []string{"create"}}
}

// A key set fetched from the issuer's URL follows its rotation: the new
// key verifies as soon as a token signed by it comes (its unknown key id
// fetches the set at once), the key the issuer removed is refused from that
// fetch on, and further unknown key ids fetch nothing until the interval
// has passed, each refusal saying why.
func TestRemoteKeySetFollowsTheIssuersRotation(t *testing.T) {
	k1, k2, k3 := authtest.NewKey(t, "k1"), authtest.NewKey(t, "k2"), authtest.NewKey(t, "k3")
	is := authtest.NewIssuer(t, k1)
	v := remoteVerifier(t, JWKSConfig{URL: is.URL(), RefreshInterval: time.Hour, UnknownKIDInterval: time.Hour}, slog.New(slog.DiscardHandler))
	ctx := context.Background()
	std, tc := validClaims()
	verify := func(k *authtest.Key) error { _, err := v.Verify(ctx, k.Sign(t, std, tc)); return err }
	wantFetches := func(when string, n int64) {
		t.Helper()
		if got := is.Fetches(); got != n {
			t.Errorf("%s: %d fetches of the key set, want %d", when, got, n)
		}
	}

	wantFetches("at start", 1)
	if err := verify(k1); err != nil {
		t.Fatalf("k1 before the rotation: %v", err)
	}
	wantFetches("after a known key id", 1)

	is.Publish(t, k2) // the issuer rotates: k2 in, k1 out
	if err := verify(k1); err != nil {
		t.Errorf("k1 between the rotation and the next fetch (the cache): %v", err)
	}
	if err := verify(k2); err != nil {
		t.Fatalf("k2 after the rotation: %v", err)
	}
	wantFetches("after the new key id", 2)

	err := verify(k1)
	wantErr(t, "the removed k1", err, `key id "k1" is not in the key set of `+is.URL(), "not fetched again for it", "1h0m0s")
	err = verify(k3)
	wantErr(t, "the unknown k3", err, `key id "k3" is not in the key set`, "at most once every 1h0m0s")
	wantFetches("after two unknown key ids within the interval", 2)
	if err := verify(k2); err != nil {
		t.Errorf("k2 after the refusals: %v", err)
	}
}

// Once the interval has passed, an unknown key id fetches the set again;
// a key id the issuer never published is refused after that fetch.
func TestUnknownKeyIDFetchesAgainAfterTheInterval(t *testing.T) {
	k1, k2 := authtest.NewKey(t, "k1"), authtest.NewKey(t, "k2")
	is := authtest.NewIssuer(t, k1)
	v := remoteVerifier(t, JWKSConfig{URL: is.URL(), RefreshInterval: time.Hour, UnknownKIDInterval: 50 * time.Millisecond}, slog.New(slog.DiscardHandler))
	std, tc := validClaims()
	_, err := v.Verify(context.Background(), k2.Sign(t, std, tc))
	wantErr(t, "k2, never published", err, `key id "k2" is not in the key set`, "fetched again for it")
	if n := is.Fetches(); n != 2 {
		t.Errorf("%d fetches, want 2 (start, the unknown key id)", n)
	}
	time.Sleep(60 * time.Millisecond)
	is.Publish(t, k1, k2)
	if _, err := v.Verify(context.Background(), k2.Sign(t, std, tc)); err != nil {
		t.Errorf("k2 once published and the interval passed: %v", err)
	}
}

// The periodic fetch drops a removed key without any token asking, and a
// fetch that fails keeps the keys in force and is logged.
func TestPeriodicFetchDropsARemovedKeyAndKeepsKeysWhenTheIssuerFails(t *testing.T) {
	k1, k2 := authtest.NewKey(t, "k1"), authtest.NewKey(t, "k2")
	is := authtest.NewIssuer(t, k1, k2)
	var logged bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logged}, nil))
	v := remoteVerifier(t, JWKSConfig{URL: is.URL(), RefreshInterval: 20 * time.Millisecond, UnknownKIDInterval: time.Hour}, log)
	std, tc := validClaims()
	verify := func(k *authtest.Key) error { _, err := v.Verify(context.Background(), k.Sign(t, std, tc)); return err }
	if err := verify(k1); err != nil {
		t.Fatalf("k1: %v", err)
	}
	if !v.remote.unknown.Allow() { // use up the unknown-key-id fetch: only the periodic fetch may drop k1
		t.Fatal("no unknown-key-id fetch was left")
	}
	is.Publish(t, k2)
	waitFor(t, func() bool { return verify(k1) != nil })
	if err := verify(k2); err != nil {
		t.Errorf("k2, still published: %v", err)
	}

	is.SetDown(true)
	waitFor(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(logged.String(), "could not fetch the JWT issuer's key set")
	})
	if err := verify(k2); err != nil {
		t.Errorf("k2 while the issuer fails: %v, want the last fetched keys in force", err)
	}
}

func TestJWKSURLMustBeHTTPSOrLoopback(t *testing.T) {
	for u, ok := range map[string]bool{
		"https://idp.example/.well-known/jwks.json": true,
		"http://127.0.0.1:8080/jwks.json":           true,
		"http://[::1]:8080/jwks.json":               true,
		"http://localhost/jwks.json":                true,
		"http://idp.example/jwks.json":              false,
		"idp.example/jwks.json":                     false,
		"https:///jwks.json":                        false,
	} {
		if err := CheckJWKSURL(u); (err == nil) != ok {
			t.Errorf("CheckJWKSURL(%q) = %v, want ok %v", u, err, ok)
		}
	}
}

func wantErr(t *testing.T, what string, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: verified, want refused", what)
		return
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("%s: error %q does not say %q", what, err, p)
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// A key marked for encryption or for another algorithm verifies no token,
// whether the key set comes from the file or from the issuer's URL; the
// same key without those marks does.
func TestKeyUseAndAlgAreHeldFromEitherSource(t *testing.T) {
	sources := map[string]func(t *testing.T, set []byte) *JWTVerifier{
		"file": func(t *testing.T, set []byte) *JWTVerifier {
			v, err := NewJWTVerifier(JWTConfig{Issuer: "https://idp.test", Audience: "orderd"})
			if err != nil {
				t.Fatal(err)
			}
			if err := v.Load(set); err != nil {
				t.Fatal(err)
			}
			return v
		},
		"url": func(t *testing.T, set []byte) *JWTVerifier {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(set) }))
			t.Cleanup(srv.Close)
			return remoteVerifier(t, JWKSConfig{URL: srv.URL}, slog.New(slog.DiscardHandler))
		},
	}
	for source, verifier := range sources {
		for name, tc := range map[string]struct {
			mark func(*jose.JSONWebKey)
			ok   bool
		}{
			"unmarked":  {func(*jose.JSONWebKey) {}, true},
			"use sig":   {func(k *jose.JSONWebKey) { k.Use = "sig" }, true},
			"alg ES256": {func(k *jose.JSONWebKey) { k.Algorithm = "ES256" }, true},
			"use enc":   {func(k *jose.JSONWebKey) { k.Use = "enc" }, false},
			"alg ES384": {func(k *jose.JSONWebKey) { k.Algorithm = "ES384" }, false},
		} {
			t.Run(source+"/"+name, func(t *testing.T) {
				k := authtest.NewKey(t, "k1")
				pub := k.Public()
				tc.mark(&pub)
				set, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{pub}})
				if err != nil {
					t.Fatal(err)
				}
				std, claims := validClaims()
				id, err := verifier(t, set).Verify(context.Background(), k.Sign(t, std, claims))
				if tc.ok != (err == nil) {
					t.Errorf("Verify with the key %s = %+v, %v; want accepted: %v", name, id, err, tc.ok)
				}
			})
		}
	}
}
