package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// Credentials say how to reach orderd and who the caller is: TLS that
// trusts orderd's CA, and one identity — an API key or JWT sent as a bearer
// token on every call, or a client certificate (mutual TLS).
type Credentials struct {
	// CAFile: PEM certificates to trust for orderd's certificate; empty:
	// the system roots.
	CAFile string
	// CertFile and KeyFile: a client certificate (mutual TLS identity).
	CertFile, KeyFile string
	// Token: an API key or a JWT, sent as "authorization: Bearer ..." on
	// every call (only ever over TLS).
	Token string
	// Plaintext: no TLS and no identity, for an orderd in -insecure mode
	// without a certificate (development only).
	Plaintext bool
}

// DialOptions are the grpc.NewClient options for c.
func (c Credentials) DialOptions() ([]grpc.DialOption, error) {
	if c.Plaintext {
		if c.Token != "" || c.CertFile != "" {
			return nil, errors.New("credentials are never sent in plaintext: drop Plaintext or the credentials")
		}
		return []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, nil
	}
	tc, err := c.TLSConfig()
	if err != nil {
		return nil, err
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(tc))}
	if c.Token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(Bearer(c.Token)))
	}
	return opts, nil
}

// TLSConfig is the client TLS of c.
func (c Credentials) TLSConfig() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("CA file: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s: no PEM certificate in it", c.CAFile)
		}
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return nil, errors.New("set both the client certificate and its key, or neither")
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// Bearer is per-call credentials that send a token as
// "authorization: Bearer <token>", only over a secure transport.
type Bearer string

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (b Bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials: never
// in plaintext.
func (Bearer) RequireTransportSecurity() bool { return true }
