// Package clientcreds builds the gRPC dial options of an orderd client: TLS
// that trusts orderd's CA, and one of its identities — an API key or JWT
// sent as a bearer token on every call, or a client certificate.
package clientcreds

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// Options say how to reach orderd.
type Options struct {
	// CAFile: PEM certificates to trust for orderd's certificate; empty:
	// the system roots.
	CAFile string
	// CertFile and KeyFile: a client certificate (mutual TLS identity).
	CertFile, KeyFile string
	// Token: an API key or a JWT, sent as "authorization: Bearer ..." on
	// every call (only ever over TLS).
	Token string
	// Plaintext: no TLS and no identity, for an orderd in -insecure mode
	// without a certificate.
	Plaintext bool
}

// Flags registers -ca-file, -cert-file, -key-file, -token-file and
// -plaintext. The token is read from ORDERD_API_KEY when no -token-file is
// given, never from a flag (flags show in ps).
func (o *Options) Flags(fs *flag.FlagSet, tokenFile *string) {
	fs.StringVar(&o.CAFile, "ca-file", os.Getenv("ORDERD_CA_FILE"), "PEM CA that signed orderd's certificate (default: system roots)")
	fs.StringVar(&o.CertFile, "cert-file", os.Getenv("ORDERD_CLIENT_CERT_FILE"), "PEM client certificate (mutual TLS identity)")
	fs.StringVar(&o.KeyFile, "key-file", os.Getenv("ORDERD_CLIENT_KEY_FILE"), "PEM key of -cert-file")
	fs.StringVar(tokenFile, "token-file", "", "file holding an API key or JWT (default: $ORDERD_API_KEY)")
	fs.BoolVar(&o.Plaintext, "plaintext", false, "no TLS, no credentials (orderd -insecure without a certificate)")
}

// ReadToken fills Token from file, or from ORDERD_API_KEY when file is "".
func (o *Options) ReadToken(file string) error {
	if file == "" {
		o.Token = os.Getenv("ORDERD_API_KEY")
		return nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("token file: %w", err)
	}
	o.Token = strings.TrimSpace(string(b))
	return nil
}

// DialOptions are the grpc.NewClient options for o.
func (o Options) DialOptions() ([]grpc.DialOption, error) {
	if o.Plaintext {
		if o.Token != "" || o.CertFile != "" {
			return nil, errors.New("credentials are never sent in plaintext: drop -plaintext or the credentials")
		}
		return []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, nil
	}
	tc, err := o.TLSConfig()
	if err != nil {
		return nil, err
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(tc))}
	if o.Token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(Bearer(o.Token)))
	}
	return opts, nil
}

// TLSConfig is the client TLS of o.
func (o Options) TLSConfig() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("CA file: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s: no PEM certificate in it", o.CAFile)
		}
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		return nil, errors.New("set both the client certificate and its key, or neither")
	}
	if o.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
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
