package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/atlasmart/orderd/internal/adapters/auth/authtest"
)

// tokenBy is a JWT for the run's tenant with create and read, signed by k.
func tokenBy(t *testing.T, k *authtest.Key) string {
	return k.Sign(t, jwt.Claims{Issuer: jwtIssuer, Audience: jwt.Audience{jwtAudience}, Subject: "e2e-" + k.KID,
		Expiry: jwt.NewNumericDate(time.Now().Add(time.Hour)), IssuedAt: jwt.NewNumericDate(time.Now().Add(-time.Minute))},
		map[string]any{"tenant": tenant, "permissions": []string{"create", "read"}})
}

// orderd takes its JWT keys from the issuer's key set URL
// (ORDERD_JWKS_URL) and follows a rotation: after the issuer replaces k1
// by k2, a token signed by k2 is accepted (its unknown key id fetches the
// set at once), one signed by the removed k1 is refused UNAUTHENTICATED,
// and so is one of a key id never published, without another fetch (one
// per interval); each refusal's log line says which key id and why, and
// nothing is written for a refused call.
func TestJWTKeysFromTheIssuersURLFollowItsRotation(t *testing.T) {
	k1, k2, k3 := authtest.NewKey(t, "rot-1"), authtest.NewKey(t, "rot-2"), authtest.NewKey(t, "rot-3")
	is := authtest.NewIssuer(t, k1)
	p := startOrderd(t, "ORDERD_JWKS_FILE=", "ORDERD_JWKS_URL="+is.URL(),
		"ORDERD_JWKS_REFRESH_INTERVAL=1h", "ORDERD_JWKS_UNKNOWN_KID_INTERVAL=1h")
	createAs := func(k *authtest.Key) (string, error) {
		req := newRequest("17.00")
		_, _, err := create(t, dialAs(t, p.addr, sec.files.Client(tokenBy(t, k))), req)
		return req.RequestId, err
	}
	wantFetches := func(when string, n int64) {
		t.Helper()
		if got := is.Fetches(); got != n {
			t.Errorf("%s: orderd fetched the key set %d times, want %d", when, got, n)
		}
	}

	if _, err := createAs(k1); err != nil {
		t.Fatalf("k1 before the rotation: %v", err)
	}
	wantFetches("after start and a k1 call", 1)
	is.Publish(t, k2)
	if _, err := createAs(k2); err != nil {
		t.Fatalf("k2 after the rotation: %v", err)
	}
	wantFetches("after the first k2 call", 2)
	for _, c := range []struct {
		key  *authtest.Key
		says string
	}{
		{k1, `key id \"rot-1\" is not in the key set`},
		{k3, `key id \"rot-3\" is not in the key set`},
	} {
		id, err := createAs(c.key)
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("%s: %v, want UNAUTHENTICATED", c.key.KID, err)
		}
		nothingWritten(t, id, tenant)
		line := waitLine(t, "orderd", p.output, `msg="request refused"`, c.says)
		t.Logf("%s -> %s; log: %s", c.key.KID, status.Code(err), strings.TrimSpace(line))
	}
	wantFetches("after the refusals (no fetch within the interval)", 2)
}
