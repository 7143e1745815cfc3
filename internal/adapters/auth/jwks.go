package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/go-jose/go-jose/v4"
	"golang.org/x/time/rate"
)

// JWKSConfig says where a JWT verifier fetches its issuer's keys and how
// often. Zero durations take defaults.
type JWKSConfig struct {
	// URL is the issuer's JSON Web Key Set: https, or http to a loopback
	// host only (a key set fetched in the clear could be replaced).
	URL string
	// RefreshInterval is how often the set is fetched again, which is how a
	// key the issuer removed stops verifying; default 15 min.
	RefreshInterval time.Duration
	// UnknownKIDInterval: a token whose key id the set does not hold
	// fetches the set again at once (the issuer rotated in a new key), at
	// most once per interval, so tokens with made-up key ids cost the
	// issuer one fetch per interval; default 1 min.
	UnknownKIDInterval time.Duration
	// Timeout bounds one fetch; default 10 s.
	Timeout time.Duration
}

func (c JWKSConfig) withDefaults() JWKSConfig {
	if c.RefreshInterval == 0 {
		c.RefreshInterval = 15 * time.Minute
	}
	if c.UnknownKIDInterval == 0 {
		c.UnknownKIDInterval = time.Minute
	}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	return c
}

// CheckJWKSURL refuses a key set URL that is not https, unless it names a
// loopback host.
func CheckJWKSURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("jwks url: %w", err)
	}
	switch {
	case u.Scheme == "https" && u.Host != "":
		return nil
	case u.Scheme == "http" && isLoopback(u.Hostname()):
		return nil
	}
	return fmt.Errorf("jwks url %q: use https (http only to a loopback host)", raw)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// remoteKeys are an issuer's keys, fetched from its key set URL by jwkset
// (github.com/MicahParks/jwkset, the key store of keyfunc) and held in
// memory between fetches; go-jose verifies the token with the key found.
type remoteKeys struct {
	url        string
	cached     jwkset.Storage // the last fetch's keys: reading fetches nothing
	refreshing jwkset.Storage // the same keys; a read of an unknown key id fetches the set again
	unknown    *rate.Limiter  // the fetches unknown key ids may cause
	every      time.Duration  // the limiter's interval, for messages
}

// NewRemoteJWTVerifier returns a verifier whose keys come from src.URL.
// The set is fetched once now: a failure is logged, not returned (the
// issuer may be back before the first token comes; until a fetch works,
// tokens are refused). jwkset's goroutine fetches the set again every
// src.RefreshInterval until ctx ends; a fetch that fails is logged and the
// keys of the last one stay in force.
func NewRemoteJWTVerifier(ctx context.Context, cfg JWTConfig, src JWKSConfig, log *slog.Logger) (*JWTVerifier, error) {
	v, err := NewJWTVerifier(cfg)
	if err != nil {
		return nil, err
	}
	if err := CheckJWKSURL(src.URL); err != nil {
		return nil, err
	}
	src = src.withDefaults()
	onError := func(ctx context.Context, err error) {
		log.WarnContext(ctx, "could not fetch the JWT issuer's key set; the keys fetched last stay in force",
			"jwks_url", src.URL, "error", err)
	}
	cached, err := jwkset.NewStorageFromHTTP(src.URL, jwkset.HTTPClientStorageOptions{
		Client:                    &http.Client{Timeout: src.Timeout},
		Ctx:                       ctx,
		HTTPTimeout:               src.Timeout,
		NoErrorReturnFirstHTTPReq: true,
		RefreshErrorHandler:       onError,
		RefreshInterval:           src.RefreshInterval,
	})
	if err != nil {
		return nil, fmt.Errorf("jwks %s: %w", src.URL, err)
	}
	// The rate limit is ours (unknown), so that a refused token says why;
	// once it allows a fetch, this client fetches at once.
	refreshing, err := jwkset.NewHTTPClient(jwkset.HTTPClientOptions{
		HTTPURLs:          map[string]jwkset.Storage{src.URL: cached},
		RefreshUnknownKID: rate.NewLimiter(rate.Inf, 1),
	})
	if err != nil {
		return nil, fmt.Errorf("jwks %s: %w", src.URL, err)
	}
	v.remote = &remoteKeys{url: src.URL, cached: cached, refreshing: refreshing,
		unknown: rate.NewLimiter(rate.Every(src.UnknownKIDInterval), 1), every: src.UnknownKIDInterval}
	return v, nil
}

// key is the public key that verifies a token signed with h's kid and alg.
func (r *remoteKeys) key(ctx context.Context, h jose.Header) (any, error) {
	if h.KeyID == "" {
		return nil, fmt.Errorf("the token has no kid header: keys of %s are found by kid", r.url)
	}
	jwk, err := r.cached.KeyRead(ctx, h.KeyID)
	if errors.Is(err, jwkset.ErrKeyNotFound) {
		if !r.unknown.Allow() {
			return nil, fmt.Errorf("key id %q is not in the key set of %s (not fetched again for it: unknown key ids fetch the set at most once every %s)",
				h.KeyID, r.url, r.every)
		}
		jwk, err = r.refreshing.KeyRead(ctx, h.KeyID)
		if errors.Is(err, jwkset.ErrKeyNotFound) {
			return nil, fmt.Errorf("key id %q is not in the key set of %s, fetched again for it (a failed fetch is logged)", h.KeyID, r.url)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("key id %q of %s: %w", h.KeyID, r.url, err)
	}
	m := jwk.Marshal()
	if err := signsFor(string(m.USE), string(m.ALG), h.Algorithm); err != nil {
		return nil, fmt.Errorf("key id %q of %s %w", h.KeyID, r.url, err)
	}
	switch k := jwk.Key().(type) {
	case *rsa.PublicKey, *ecdsa.PublicKey, ed25519.PublicKey:
		return k, nil
	}
	return nil, fmt.Errorf("key id %q of %s is not a public signature key (%T)", h.KeyID, r.url, jwk.Key())
}
