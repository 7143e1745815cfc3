package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"google.golang.org/grpc"

	"github.com/atlasmart/orderd/internal/tools/clientcreds"
	"github.com/atlasmart/orderd/internal/tools/devsetup"
	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

// The JWT issuer and audience every orderd of the run accepts.
const (
	jwtIssuer   = "https://idp.e2e.test"
	jwtAudience = "orderd"
)

// tenant is the tenant of the run's default credentials: every test acts
// for it unless it says otherwise.
const tenant = "default"

// runSecurity is how every orderd of the run is secured, as in production:
// TLS with a server certificate of a run-local CA, client certificates of
// that CA, an API key file and a JWKS file (docs/security.md).
type runSecurity struct {
	files      devsetup.Files
	defaultKey string // tenant "default", every permission
	jwks       string // the JWKS file's path
	jwtSigner  jose.Signer
}

var sec runSecurity

func setUpSecurity(dir string) error {
	files, key, err := devsetup.Write(filepath.Join(dir, "security"), tenant, 24*time.Hour)
	if err != nil {
		return err
	}
	signKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: signKey},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "e2e-1"))
	if err != nil {
		return err
	}
	set, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &signKey.PublicKey, KeyID: "e2e-1", Algorithm: "ES256", Use: "sig"}}})
	if err != nil {
		return err
	}
	jwks := filepath.Join(files.Dir, "jwks.json")
	if err := os.WriteFile(jwks, set, 0o644); err != nil {
		return err
	}
	sec = runSecurity{files: files, defaultKey: key, jwks: jwks, jwtSigner: signer}
	return nil
}

// serverEnv is the security settings of every orderd the run starts.
func (s runSecurity) serverEnv() []string {
	return append(s.files.ServerEnv(), "ORDERD_JWKS_FILE="+s.jwks, "ORDERD_JWT_ISSUER="+jwtIssuer,
		"ORDERD_JWT_AUDIENCE="+jwtAudience, "ORDERD_AUTH_RELOAD_INTERVAL=200ms")
}

// defaultClient is the credentials of the run's default caller: the
// tenant "default" API key with every permission.
func (s runSecurity) defaultClient() clientcreds.Options { return s.files.Client(s.defaultKey) }

// jwtFor signs a JWT for tenant with permissions, valid until exp.
func (s runSecurity) jwtFor(t *testing.T, tenant string, perms []string, exp time.Time) string {
	t.Helper()
	raw, err := jwt.Signed(s.jwtSigner).Claims(jwt.Claims{Issuer: jwtIssuer, Audience: jwt.Audience{jwtAudience},
		Subject: "e2e", Expiry: jwt.NewNumericDate(exp), IssuedAt: jwt.NewNumericDate(time.Now().Add(-time.Minute))}).
		Claims(map[string]any{"tenant": tenant, "permissions": perms}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// dial opens a client connection to addr with creds.
func dial(addr string, creds clientcreds.Options) (*grpc.ClientConn, error) {
	opts, err := creds.DialOptions()
	if err != nil {
		return nil, err
	}
	return grpc.NewClient(addr, opts...)
}

// dialAs is an OrderService client of addr with creds, closed when the test ends.
func dialAs(t *testing.T, addr string, creds clientcreds.Options) ordersv1.OrderServiceClient {
	t.Helper()
	conn, err := dial(addr, creds)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return ordersv1.NewOrderServiceClient(conn)
}

// dialClient is an OrderService client of addr as the run's default caller.
func dialClient(t *testing.T, addr string) ordersv1.OrderServiceClient {
	t.Helper()
	return dialAs(t, addr, sec.defaultClient())
}

// writeSecret writes a file only its owner can read into dir.
func writeSecret(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
