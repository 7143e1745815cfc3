package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/atlasmart/orderd/internal/adapters/auth"
)

// securityConfig is how serve's gRPC port is secured (docs/security.md).
type securityConfig struct {
	tlsCertFile, tlsKeyFile string
	clientCAFile            string // set: verified client certificates are identities (mTLS)
	apiKeysFile             string
	jwksFile                string
	jwks                    auth.JWKSConfig // URL set: the issuer's key set, fetched and refreshed
	jwtIssuer, jwtAudience  string
	reloadInterval          time.Duration
	insecure                bool   // no authentication: development only
	insecureTenant          string // every caller's tenant in insecure mode
	reflection              bool
}

func (c *securityConfig) flags(fs *flag.FlagSet, cfg *config) {
	fs.StringVar(&c.tlsCertFile, "tls-cert-file", cfg.env("ORDERD_TLS_CERT_FILE", ""), "PEM certificate (chain) of the gRPC port; required unless -insecure")
	fs.StringVar(&c.tlsKeyFile, "tls-key-file", cfg.env("ORDERD_TLS_KEY_FILE", ""), "PEM private key of -tls-cert-file")
	fs.StringVar(&c.clientCAFile, "tls-client-ca-file", cfg.env("ORDERD_TLS_CLIENT_CA_FILE", ""), "PEM CA certificates that sign client certificates; set: mutual TLS identities are accepted (tenant = O, client = CN, permissions = OU)")
	fs.StringVar(&c.apiKeysFile, "api-keys-file", cfg.env("ORDERD_API_KEYS_FILE", ""), "API key file (salted hashes, written by orderd keys); reloaded when it changes")
	fs.StringVar(&c.jwksFile, "jwks-file", cfg.env("ORDERD_JWKS_FILE", ""), "JSON Web Key Set of the JWT issuer (public keys); set: JWTs are accepted; reloaded when it changes")
	fs.StringVar(&c.jwks.URL, "jwks-url", cfg.env("ORDERD_JWKS_URL", ""), "URL of the JWT issuer's JSON Web Key Set (https; instead of -jwks-file): fetched at start and every -jwks-refresh-interval, and at once for a token whose key id it lacks")
	fs.DurationVar(&c.jwks.RefreshInterval, "jwks-refresh-interval", cfg.envDuration("ORDERD_JWKS_REFRESH_INTERVAL", 15*time.Minute), "how often -jwks-url is fetched again: a key the issuer removed verifies until then")
	fs.DurationVar(&c.jwks.UnknownKIDInterval, "jwks-unknown-kid-interval", cfg.envDuration("ORDERD_JWKS_UNKNOWN_KID_INTERVAL", time.Minute), "tokens with a key id -jwks-url lacks fetch it again at most once per this interval (a new key is found at once; made-up key ids cost the issuer little)")
	fs.StringVar(&c.jwtIssuer, "jwt-issuer", cfg.env("ORDERD_JWT_ISSUER", ""), "required iss of JWTs")
	fs.StringVar(&c.jwtAudience, "jwt-audience", cfg.env("ORDERD_JWT_AUDIENCE", "orderd"), "required aud of JWTs")
	fs.DurationVar(&c.reloadInterval, "auth-reload-interval", cfg.envDuration("ORDERD_AUTH_RELOAD_INTERVAL", 2*time.Second), "how often the API key, JWKS and TLS certificate files are checked for changes")
	fs.BoolVar(&c.insecure, "insecure", cfg.envBool("ORDERD_INSECURE", false), "DEVELOPMENT ONLY: no authentication; every caller acts for -insecure-tenant with every permission (and plaintext unless a TLS certificate is set)")
	fs.StringVar(&c.insecureTenant, "insecure-tenant", cfg.env("ORDERD_INSECURE_TENANT", "default"), "the tenant of every call in -insecure mode")
	fs.BoolVar(&c.reflection, "reflection", cfg.envBool("ORDERD_REFLECTION", true), "serve gRPC reflection (the API's schema, for grpcurl); false in production if the schema is not to be discoverable")
}

func (c *securityConfig) validate() error {
	if (c.tlsCertFile == "") != (c.tlsKeyFile == "") {
		return errors.New("set both tls-cert-file and tls-key-file, or neither")
	}
	if c.insecure {
		return auth.ValidTenant(c.insecureTenant)
	}
	if c.tlsCertFile == "" {
		return errors.New("the gRPC port needs TLS: set ORDERD_TLS_CERT_FILE and ORDERD_TLS_KEY_FILE (`orderd dev-setup` makes development ones; `make run` does it for you), or -insecure for a development server without authentication")
	}
	if c.clientCAFile == "" && c.apiKeysFile == "" && c.jwksFile == "" && c.jwks.URL == "" {
		return errors.New("no way to authenticate callers: set ORDERD_API_KEYS_FILE, ORDERD_TLS_CLIENT_CA_FILE, ORDERD_JWKS_FILE or ORDERD_JWKS_URL (or -insecure for development)")
	}
	if c.jwksFile != "" && c.jwks.URL != "" {
		return errors.New("set jwks-file or jwks-url, not both (the issuer's keys come from one place)")
	}
	if (c.jwksFile != "" || c.jwks.URL != "") && c.jwtIssuer == "" {
		return errors.New("a JWKS is set: set jwt-issuer too (the iss every accepted JWT must carry)")
	}
	if c.jwks.URL != "" {
		if err := auth.CheckJWKSURL(c.jwks.URL); err != nil {
			return err
		}
		if c.jwks.RefreshInterval <= 0 || c.jwks.UnknownKIDInterval <= 0 {
			return errors.New("jwks-refresh-interval and jwks-unknown-kid-interval must be positive")
		}
	}
	if c.reloadInterval <= 0 {
		return errors.New("auth-reload-interval must be positive")
	}
	return nil
}

// security is serve's authentication, built from securityConfig.
type security struct {
	authn   *auth.Authenticator
	creds   grpc.ServerOption // nil: plaintext (insecure mode without a certificate)
	loaders []*auth.FileLoader
}

// newSecurity builds serve's authentication; the issuer's key set (when
// fetched from a URL) is refreshed until ctx ends.
func newSecurity(ctx context.Context, c *securityConfig, log *slog.Logger) (*security, error) {
	s := &security{authn: &auth.Authenticator{}}
	if c.tlsCertFile != "" {
		tc, loaders, err := serverTLS(c)
		if err != nil {
			return nil, err
		}
		s.creds, s.loaders = grpc.Creds(credentials.NewTLS(tc)), loaders
	}
	if c.insecure {
		id := auth.Identity{Tenant: c.insecureTenant, Name: "insecure", Method: auth.MethodNone, Permissions: auth.Create | auth.Read | auth.Admin}
		s.authn.Insecure = &id
		log.Warn("INSECURE: authentication is off; every caller acts for one tenant with every permission. Never run this way outside development.",
			"tenant", c.insecureTenant, "tls", s.creds != nil)
		return s, nil
	}
	s.authn.ClientCerts = c.clientCAFile != ""
	if c.apiKeysFile != "" {
		ring := &auth.KeyRing{}
		l, err := auth.NewFileLoader(c.apiKeysFile, "api keys", ring.Load)
		if err != nil {
			return nil, err
		}
		s.authn.Keys, s.loaders = ring, append(s.loaders, l)
	}
	if c.jwksFile != "" {
		v, err := auth.NewJWTVerifier(auth.JWTConfig{Issuer: c.jwtIssuer, Audience: c.jwtAudience})
		if err != nil {
			return nil, err
		}
		l, err := auth.NewFileLoader(c.jwksFile, "jwks", v.Load)
		if err != nil {
			return nil, err
		}
		s.authn.JWT, s.loaders = v, append(s.loaders, l)
	}
	if c.jwks.URL != "" {
		v, err := auth.NewRemoteJWTVerifier(ctx, auth.JWTConfig{Issuer: c.jwtIssuer, Audience: c.jwtAudience}, c.jwks, log)
		if err != nil {
			return nil, err
		}
		s.authn.JWT = v
		log.Info("JWT keys from the issuer's key set", "jwks_url", c.jwks.URL, "refresh", c.jwks.RefreshInterval.String(),
			"unknown_kid_refresh", c.jwks.UnknownKIDInterval.String())
	}
	keys := 0
	if s.authn.Keys != nil {
		keys = s.authn.Keys.Len()
	}
	log.Info("authentication", "client_certs", s.authn.ClientCerts, "api_keys", keys, "jwt", s.authn.JWT != nil)
	return s, nil
}

// watch reloads the key, JWKS and certificate files in g until ctx ends.
func (s *security) watch(ctx context.Context, g *errgroup.Group, every time.Duration, log *slog.Logger) {
	for _, l := range s.loaders {
		g.Go(func() error { return l.Watch(ctx, every, log) })
	}
}

// serverTLS is the gRPC port's TLS: 1.2 or later, and, with a client CA,
// client certificates verified when presented (callers with a bearer token
// need none; one that presents a certificate the CA did not sign fails the
// handshake). The server certificate is reloaded when its files change, so
// a renewed certificate is served without a restart: the loaders returned
// watch both files, and a pair that does not match yet (one file replaced,
// the other not) keeps the previous certificate until both are new.
func serverTLS(c *securityConfig) (*tls.Config, []*auth.FileLoader, error) {
	var current atomic.Pointer[tls.Certificate]
	load := func([]byte) error {
		cert, err := tls.LoadX509KeyPair(c.tlsCertFile, c.tlsKeyFile)
		if err != nil {
			return err
		}
		current.Store(&cert)
		return nil
	}
	var loaders []*auth.FileLoader
	for _, f := range []string{c.tlsCertFile, c.tlsKeyFile} {
		l, err := auth.NewFileLoader(f, "tls certificate", load)
		if err != nil {
			return nil, nil, err
		}
		loaders = append(loaders, l)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return current.Load(), nil }}
	if c.clientCAFile != "" {
		pem, err := os.ReadFile(c.clientCAFile)
		if err != nil {
			return nil, nil, fmt.Errorf("client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("client CA %s: no PEM certificate in it", c.clientCAFile)
		}
		tc.ClientCAs, tc.ClientAuth = pool, tls.VerifyClientCertIfGiven
	}
	return tc, loaders, nil
}
