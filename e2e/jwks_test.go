package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// rotatingIssuer serves a JWKS on a loopback port, as an identity
// provider's key set URL does, and lets the test rotate its keys.
type rotatingIssuer struct {
	srv     *httptest.Server
	mu      sync.Mutex
	set     []byte
	fetches atomic.Int64
}

func (is *rotatingIssuer) publish(t *testing.T, keys ...*issuerKey) {
	t.Helper()
	var set jose.JSONWebKeySet
	for _, k := range keys {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: &k.key.PublicKey, KeyID: k.kid, Algorithm: "ES256", Use: "sig"})
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	is.set = b
}

type issuerKey struct {
	kid string
	key *ecdsa.PrivateKey
}

func newIssuerKey(t *testing.T, kid string) *issuerKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &issuerKey{kid: kid, key: key}
}

// token is a JWT for the run's tenant with create and read, signed by k.
func (k *issuerKey) token(t *testing.T) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k.key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", k.kid))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := jwt.Signed(signer).Claims(jwt.Claims{Issuer: jwtIssuer, Audience: jwt.Audience{jwtAudience}, Subject: "e2e-" + k.kid,
		Expiry: jwt.NewNumericDate(time.Now().Add(time.Hour)), IssuedAt: jwt.NewNumericDate(time.Now().Add(-time.Minute))}).
		Claims(map[string]any{"tenant": tenant, "permissions": []string{"create", "read"}}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// orderd takes its JWT keys from the issuer's key set URL
// (ORDERD_JWKS_URL) and follows a rotation: after the issuer replaces k1
// by k2, a token signed by k2 is accepted (its unknown key id fetches the
// set at once), one signed by the removed k1 is refused UNAUTHENTICATED,
// and so is one of a key id never published, without another fetch (one
// per interval); each refusal's log line says which key id and why, and
// nothing is written for a refused call.
func TestJWTKeysFromTheIssuersURLFollowItsRotation(t *testing.T) {
	k1, k2, k3 := newIssuerKey(t, "rot-1"), newIssuerKey(t, "rot-2"), newIssuerKey(t, "rot-3")
	is := &rotatingIssuer{}
	is.publish(t, k1)
	is.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		is.fetches.Add(1)
		is.mu.Lock()
		defer is.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(is.set)
	}))
	t.Cleanup(is.srv.Close)
	p := startOrderd(t, "ORDERD_JWKS_FILE=", "ORDERD_JWKS_URL="+is.srv.URL+"/.well-known/jwks.json",
		"ORDERD_JWKS_REFRESH_INTERVAL=1h", "ORDERD_JWKS_UNKNOWN_KID_INTERVAL=1h")
	createAs := func(k *issuerKey) (string, error) {
		req := newRequest("17.00")
		_, _, err := create(t, dialAs(t, p.addr, sec.files.Client(k.token(t))), req)
		return req.RequestId, err
	}
	wantFetches := func(when string, n int64) {
		t.Helper()
		if got := is.fetches.Load(); got != n {
			t.Errorf("%s: orderd fetched the key set %d times, want %d", when, got, n)
		}
	}

	if _, err := createAs(k1); err != nil {
		t.Fatalf("k1 before the rotation: %v", err)
	}
	wantFetches("after start and a k1 call", 1)
	is.publish(t, k2)
	if _, err := createAs(k2); err != nil {
		t.Fatalf("k2 after the rotation: %v", err)
	}
	wantFetches("after the first k2 call", 2)
	for _, c := range []struct {
		key  *issuerKey
		says string
	}{
		{k1, `key id \"rot-1\" is not in the key set`},
		{k3, `key id \"rot-3\" is not in the key set`},
	} {
		id, err := createAs(c.key)
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("%s: %v, want UNAUTHENTICATED", c.key.kid, err)
		}
		nothingWritten(t, id, tenant)
		line := waitLine(t, "orderd", p.output, `msg="request refused"`, c.says)
		t.Logf("%s -> %s; log: %s", c.key.kid, status.Code(err), strings.TrimSpace(line))
	}
	wantFetches("after the refusals (no fetch within the interval)", 2)
}
