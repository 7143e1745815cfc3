package auth

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/atlasmart/orderd/internal/adapters/auth/authtest"
	"github.com/atlasmart/orderd/internal/tools/devpki"
)

func newRing(t *testing.T, entries ...KeyEntry) *KeyRing {
	t.Helper()
	data, err := json.Marshal(KeyFile{Keys: entries})
	if err != nil {
		t.Fatal(err)
	}
	r := &KeyRing{}
	if err := r.Load(data); err != nil {
		t.Fatalf("Load: %v", err)
	}
	return r
}

func TestAPIKeyVerifiesOnlyItsExactSecret(t *testing.T) {
	key, entry, err := NewKey("acme", "mobile-gateway", []string{"create", "read"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(entry.Hash+entry.Salt+entry.ID, key[len(keyPrefix)+keyIDLength+1:]) {
		t.Fatal("the stored entry contains the secret")
	}
	r := newRing(t, entry)
	id, err := r.Verify(key)
	if err != nil {
		t.Fatalf("Verify(own key): %v", err)
	}
	if id.Tenant != "acme" || id.Name != "mobile-gateway" || id.Method != MethodAPIKey || id.Permissions != Create|Read {
		t.Errorf("identity = %+v", id)
	}
	other, _, _ := NewKey("acme", "x", []string{"read"}, time.Now())
	for name, bad := range map[string]string{
		"last character changed": key[:len(key)-1] + string(rune(key[len(key)-1]^1)),
		"unknown id":             other,
		"truncated":              key[:20],
		"no prefix":              strings.TrimPrefix(key, keyPrefix),
		"empty":                  "",
		"other id, own secret":   other[:len(keyPrefix)+keyIDLength+1] + key[len(keyPrefix)+keyIDLength+1:],
	} {
		if _, err := r.Verify(bad); !errors.Is(err, ErrBadKey) {
			t.Errorf("%s: Verify = %v, want ErrBadKey", name, err)
		}
	}
}

func TestKeyFileThatDoesNotLoadKeepsThePreviousKeys(t *testing.T) {
	key, entry, _ := NewKey("acme", "a", []string{"create"}, time.Now())
	r := newRing(t, entry)
	bad := entry
	bad.Tenant = "Not A Tenant"
	for name, data := range map[string]string{
		"not json":       "{",
		"bad tenant":     mustJSON(t, KeyFile{Keys: []KeyEntry{bad}}),
		"bad permission": strings.Replace(mustJSON(t, KeyFile{Keys: []KeyEntry{entry}}), `"create"`, `"delete"`, 1),
		"duplicate id":   mustJSON(t, KeyFile{Keys: []KeyEntry{entry, entry}}),
	} {
		if err := r.Load([]byte(data)); err == nil {
			t.Errorf("%s: Load succeeded", name)
		}
		if _, err := r.Verify(key); err != nil {
			t.Errorf("%s: the loaded key no longer verifies: %v", name, err)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A key removed from the file stops verifying at the next reload, with no
// restart; a file that does not parse leaves the keys as they were.
func TestWatchedKeyFileRevokesWithoutRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.json")
	keep, keepEntry, _ := NewKey("acme", "keep", []string{"read"}, time.Now())
	revoke, revokeEntry, _ := NewKey("acme", "revoke", []string{"read"}, time.Now())
	if err := WriteKeyFile(path, KeyFile{Keys: []KeyEntry{keepEntry, revokeEntry}}); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", st.Mode().Perm())
	}
	r := &KeyRing{}
	fl, err := NewFileLoader(path, "api keys", r.Load)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if _, err := r.Verify(revoke); err != nil {
		t.Fatalf("before revoking: %v", err)
	}
	if err := WriteKeyFile(path, KeyFile{Keys: []KeyEntry{keepEntry}}); err != nil {
		t.Fatal(err)
	}
	if err := fl.reload(log); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if _, err := r.Verify(revoke); !errors.Is(err, ErrBadKey) {
		t.Errorf("revoked key: %v, want ErrBadKey", err)
	}
	if err := os.WriteFile(path, []byte("{broken"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := fl.reload(log); err == nil {
		t.Error("reload of a broken file succeeded")
	}
	if err := fl.reload(log); err != errUnchanged {
		t.Errorf("second look at the same broken file = %v, want it skipped", err)
	}
	if _, err := r.Verify(keep); err != nil {
		t.Errorf("after a broken file: %v, want the kept key to verify", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- fl.Watch(ctx, time.Millisecond, log) }()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Watch after cancel = %v", err)
	}
}

func TestJWTIsVerifiedAgainstTheKeySetAndItsClaims(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	good := authtest.NewKey(t, "k1")
	stranger := authtest.NewKey(t, "k1") // same kid, key not in the set
	v, err := NewJWTVerifier(JWTConfig{Issuer: "https://idp.test", Audience: "orderd", Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{good.Public()}})
	if err := v.Load(jwks); err != nil {
		t.Fatalf("Load: %v", err)
	}
	valid := jwt.Claims{Issuer: "https://idp.test", Audience: jwt.Audience{"orderd"}, Subject: "svc-checkout",
		Expiry: jwt.NewNumericDate(now.Add(time.Hour)), IssuedAt: jwt.NewNumericDate(now)}
	perms := tenantClaims{Tenant: "acme", Permissions: []string{"create"}}

	id, err := v.Verify(context.Background(), good.Sign(t, valid, perms))
	if err != nil {
		t.Fatalf("valid token: %v", err)
	}
	if id.Tenant != "acme" || id.Name != "svc-checkout" || id.Method != MethodJWT || id.Permissions != Create {
		t.Errorf("identity = %+v", id)
	}

	expired, wrongIss, wrongAud, noExp := valid, valid, valid, valid
	expired.Expiry = jwt.NewNumericDate(now.Add(-time.Minute))
	wrongIss.Issuer = "https://evil.test"
	wrongAud.Audience = jwt.Audience{"other"}
	noExp.Expiry = nil
	for name, tok := range map[string]string{
		"expired":        good.Sign(t, expired, perms),
		"wrong issuer":   good.Sign(t, wrongIss, perms),
		"wrong audience": good.Sign(t, wrongAud, perms),
		"no exp":         good.Sign(t, noExp, perms),
		"unknown signer": stranger.Sign(t, valid, perms),
		"no tenant":      good.Sign(t, valid, tenantClaims{Permissions: []string{"create"}}),
		"bad permission": good.Sign(t, valid, tenantClaims{Tenant: "acme", Permissions: []string{"root"}}),
		"alg none":       unsignedJWT(t, valid, perms),
		"garbage":        "a.b.c",
	} {
		if id, err := v.Verify(context.Background(), tok); err == nil {
			t.Errorf("%s: verified as %+v", name, id)
		}
	}
	private, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: good.Private, KeyID: "k1"}}})
	if err := v.Load(private); err == nil {
		t.Error("a JWKS with a private key loaded")
	}
}

// unsignedJWT is a token with alg "none": it must never verify.
func unsignedJWT(t *testing.T, std jwt.Claims, tc tenantClaims) string {
	t.Helper()
	hdr := `{"alg":"none","typ":"JWT"}`
	claims := mustJSON(t, map[string]any{"iss": std.Issuer, "aud": std.Audience, "exp": std.Expiry, "tenant": tc.Tenant, "permissions": tc.Permissions})
	return b64(hdr) + "." + b64(claims) + "."
}

func TestClientCertificateNamesTenantNameAndPermissions(t *testing.T) {
	ca, err := devpki.NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, tenant string
		ous          []string
		want         Permissions
		ok           bool
	}{
		{"reader", "acme", []string{"read", "engineering"}, Read, true},
		{"all", "acme", []string{"create", "read", "admin"}, Create | Read | Admin, true},
		{"no-perms", "acme", nil, 0, true},
		{"bad-tenant", "Acme Corp", []string{"read"}, 0, false},
	}
	for _, c := range cases {
		p, err := ca.Client(c.tenant, c.name, c.ous, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		cert := parseCert(t, p.CertPEM)
		id, err := FromCertificate(cert)
		if (err == nil) != c.ok {
			t.Errorf("%s: err = %v, want ok=%v", c.name, err, c.ok)
			continue
		}
		if c.ok && (id.Tenant != c.tenant || id.Name != c.name || id.Permissions != c.want || id.Method != MethodClientCert) {
			t.Errorf("%s: identity = %+v", c.name, id)
		}
	}
}

func parseCert(t *testing.T, p []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(p)
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestAuthenticatorPicksTheMethodTheCallUsed(t *testing.T) {
	key, entry, _ := NewKey("acme", "gw", []string{"create"}, time.Now())
	ca, _ := devpki.NewCA("test CA", time.Hour)
	p, _ := ca.Client("globex", "svc", []string{"read"}, time.Hour)
	cert := parseCert(t, p.CertPEM)

	a := &Authenticator{ClientCerts: true, Keys: newRing(t, entry)}
	if id, err := a.Authenticate(context.Background(), key, nil); err != nil || id.Tenant != "acme" {
		t.Errorf("api key: %+v, %v", id, err)
	}
	if id, err := a.Authenticate(context.Background(), "", cert); err != nil || id.Tenant != "globex" {
		t.Errorf("client cert: %+v, %v", id, err)
	}
	if _, err := a.Authenticate(context.Background(), key+"x", cert); err == nil {
		t.Error("a bad bearer token beside a good certificate was accepted")
	}
	if _, err := a.Authenticate(context.Background(), "", nil); !errors.Is(err, ErrNoCredentials) {
		t.Errorf("nothing: %v, want ErrNoCredentials", err)
	}
	if _, err := a.Authenticate(context.Background(), "x.y.z", nil); err == nil {
		t.Error("a JWT was accepted with JWTs off")
	}
	if _, err := (&Authenticator{Keys: newRing(t, entry)}).Authenticate(context.Background(), "", cert); !errors.Is(err, ErrNoCredentials) {
		t.Errorf("client cert with client certs off: %v, want ErrNoCredentials", err)
	}
	dev := Identity{Tenant: "default", Method: MethodNone, Permissions: Create | Read | Admin}
	if id, err := (&Authenticator{Insecure: &dev}).Authenticate(context.Background(), "", nil); err != nil || id != dev {
		t.Errorf("insecure mode: %+v, %v", id, err)
	}
}

func TestPermissionsParseAndPrint(t *testing.T) {
	p, err := ParsePermissions([]string{"read", " Create "})
	if err != nil || p != Create|Read || p.String() != "create,read" || !p.Has(Read) || p.Has(Admin) {
		t.Errorf("ParsePermissions = %v (%s), %v", p, p, err)
	}
	if _, err := ParsePermissions([]string{"write"}); err == nil {
		t.Error("unknown permission accepted")
	}
	for _, bad := range []string{"", "Acme", "-x", strings.Repeat("a", 64), "a b"} {
		if ValidTenant(bad) == nil {
			t.Errorf("tenant %q accepted", bad)
		}
	}
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
