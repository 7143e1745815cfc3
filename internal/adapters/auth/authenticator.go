package auth

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
)

// Authenticator turns a call's credentials into an Identity. Its zero
// fields turn a method off.
type Authenticator struct {
	// ClientCerts accepts verified client certificates (mutual TLS).
	ClientCerts bool
	// Keys, if set, accepts API keys.
	Keys *KeyRing
	// JWT, if set, accepts JWTs.
	JWT *JWTVerifier
	// Insecure, if set, is every caller's identity and nothing is checked:
	// the explicit no-authentication mode for development.
	Insecure *Identity
}

// ErrNoCredentials: the call carried neither a bearer token nor a verified
// client certificate.
var ErrNoCredentials = errors.New("no credentials")

// Authenticate returns the identity of a call that presented bearer (the
// token of an "authorization: Bearer ..." header, "" if none) and cert (the
// leaf of a client certificate chain the TLS handshake verified, nil if
// none). A bearer token, when present, decides: it is checked even when a
// certificate is also presented, and a bad one is refused. ctx is the
// call's (it bounds a fetch of a JWT issuer's keys).
func (a *Authenticator) Authenticate(ctx context.Context, bearer string, cert *x509.Certificate) (Identity, error) {
	if a.Insecure != nil {
		return *a.Insecure, nil
	}
	switch {
	case bearer != "" && isAPIKey(bearer):
		if a.Keys == nil {
			return Identity{}, errors.New("api keys are not accepted by this server")
		}
		return a.Keys.Verify(bearer)
	case bearer != "" && looksLikeJWT(bearer):
		if a.JWT == nil {
			return Identity{}, errors.New("jwts are not accepted by this server")
		}
		return a.JWT.Verify(ctx, bearer)
	case bearer != "":
		return Identity{}, errors.New("bearer token is neither an api key nor a jwt")
	case cert != nil && a.ClientCerts:
		id, err := FromCertificate(cert)
		if err != nil {
			return Identity{}, fmt.Errorf("client certificate: %w", err)
		}
		return id, nil
	}
	return Identity{}, ErrNoCredentials
}
