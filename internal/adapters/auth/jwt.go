package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// JWTConfig says which JWTs to accept.
type JWTConfig struct {
	// Issuer and Audience must match the token's iss and aud; both required.
	Issuer, Audience string
	// Leeway is the clock skew allowed on exp, nbf and iat; default 30 s.
	Leeway time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// jwtAlgorithms are the signature algorithms accepted: asymmetric only, so
// orderd holds no secret that could mint tokens, and never "none".
var jwtAlgorithms = []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.ES256, jose.ES384, jose.EdDSA}

// tenantClaims are the claims orderd reads beyond the registered ones.
type tenantClaims struct {
	Tenant      string   `json:"tenant"`
	Permissions []string `json:"permissions"`
}

// JWTVerifier verifies JWTs against a JSON Web Key Set: read from a local
// file (NewJWTVerifier; Load swaps it, no network fetch at call time), or
// fetched from the issuer's URL (NewRemoteJWTVerifier).
type JWTVerifier struct {
	cfg    JWTConfig
	jwks   atomic.Pointer[jose.JSONWebKeySet] // the file's keys
	remote *remoteKeys                        // nil: keys from the file
}

// NewJWTVerifier returns a verifier of a local key set, with no keys until
// Load.
func NewJWTVerifier(cfg JWTConfig) (*JWTVerifier, error) {
	if cfg.Issuer == "" || cfg.Audience == "" {
		return nil, errors.New("jwt: an issuer and an audience are required")
	}
	if cfg.Leeway == 0 {
		cfg.Leeway = 30 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &JWTVerifier{cfg: cfg}, nil
}

// Load replaces the key set with a JWKS document's keys. On error the
// verifier keeps its previous keys.
func (v *JWTVerifier) Load(data []byte) error {
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(data, &set); err != nil {
		return fmt.Errorf("jwks: %w", err)
	}
	for _, k := range set.Keys {
		if k.KeyID == "" {
			return errors.New("jwks: every key needs a kid")
		}
		if !k.IsPublic() {
			return fmt.Errorf("jwks: key %q is not a public key (a JWKS file holds public keys only)", k.KeyID)
		}
	}
	v.jwks.Store(&set)
	return nil
}

// Verify returns the identity a JWT asserts: its signature checked against
// the key set (by kid), its iss, aud, exp (required), nbf and iat checked,
// and its tenant and permissions claims read. ctx bounds a fetch of the
// issuer's key set that an unknown key id causes.
func (v *JWTVerifier) Verify(ctx context.Context, raw string) (Identity, error) {
	tok, err := jwt.ParseSigned(raw, jwtAlgorithms)
	if err != nil {
		return Identity{}, fmt.Errorf("jwt: %w", err)
	}
	key, err := v.key(ctx, tok)
	if err != nil {
		return Identity{}, fmt.Errorf("jwt: %w", err)
	}
	var std jwt.Claims
	var tc tenantClaims
	if err := tok.Claims(key, &std, &tc); err != nil {
		return Identity{}, fmt.Errorf("jwt: %w", err)
	}
	if std.Expiry == nil {
		return Identity{}, errors.New("jwt: no exp claim (tokens must expire)")
	}
	if err := std.ValidateWithLeeway(jwt.Expected{Issuer: v.cfg.Issuer, AnyAudience: jwt.Audience{v.cfg.Audience}, Time: v.cfg.Now()}, v.cfg.Leeway); err != nil {
		return Identity{}, fmt.Errorf("jwt: %w", err)
	}
	if err := ValidTenant(tc.Tenant); err != nil {
		return Identity{}, fmt.Errorf("jwt: tenant claim: %w", err)
	}
	perms, err := ParsePermissions(tc.Permissions)
	if err != nil {
		return Identity{}, fmt.Errorf("jwt: permissions claim: %w", err)
	}
	return Identity{Tenant: tc.Tenant, Name: std.Subject, Method: MethodJWT, Permissions: perms}, nil
}

// key is what verifies tok's signature: the key of tok's kid, from the
// file's set or the issuer's, held to its use and alg as either way.
func (v *JWTVerifier) key(ctx context.Context, tok *jwt.JSONWebToken) (any, error) {
	h := tok.Headers[0]
	if v.remote != nil {
		return v.remote.key(ctx, h)
	}
	set := v.jwks.Load()
	if set == nil {
		return nil, errors.New("no key set loaded")
	}
	if h.KeyID == "" {
		return nil, errors.New("the token names no key (kid)")
	}
	keys := set.Key(h.KeyID)
	if len(keys) == 0 {
		return nil, fmt.Errorf("key id %q is not in the key file", h.KeyID)
	}
	var refused error
	for _, k := range keys {
		if refused = signsFor(k.Use, k.Algorithm, h.Algorithm); refused == nil {
			return k.Key, nil
		}
	}
	return nil, fmt.Errorf("key id %q of the key file %w", h.KeyID, refused)
}

// signsFor is nil if a key whose use and alg (each empty when unset) are
// these may verify a token signed with tokenAlg, and else says why not,
// whichever source the key came from.
func signsFor(use, alg, tokenAlg string) error {
	switch {
	case use != "" && use != "sig":
		return fmt.Errorf("is for %q, not signatures", use)
	case alg != "" && alg != tokenAlg:
		return fmt.Errorf("is for %s, the token says %s", alg, tokenAlg)
	}
	return nil
}

// looksLikeJWT reports whether a bearer token has a compact JWS's shape.
func looksLikeJWT(token string) bool { return strings.Count(token, ".") == 2 }
