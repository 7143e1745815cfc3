package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// healthcheck asks the orderd serving this machine's settings whether it is
// ready (the health service's "" service: SERVING once it reaches a quorum
// of its cluster), and fails unless it says SERVING. It is the image's
// HEALTHCHECK: it runs in serve's container, with serve's environment.
//
// It asks the plaintext health listener when there is one (-health-addr),
// else the gRPC port: over TLS when serve has a certificate, accepting only
// that certificate (the one in -tls-cert-file; a check from inside the
// container needs no CA, and the certificate need not name the loopback
// address it dials). The health service needs no credentials.
func healthcheck(ctx context.Context, cfg *config, stdout io.Writer) error {
	addr, creds, err := healthTarget(cfg)
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return fmt.Errorf("healthcheck of %s: %w", addr, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, cfg.healthTimeout)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return fmt.Errorf("healthcheck: no answer from orderd at %s within %s: %w", addr, cfg.healthTimeout, err)
	}
	if st := resp.GetStatus(); st != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("healthcheck: orderd at %s is %s: not ready (it cannot reach a quorum of its cluster, or it is shutting down)", addr, st)
	}
	fmt.Fprintf(stdout, "orderd at %s: SERVING\n", addr)
	return nil
}

// healthTarget is the address the check dials and how: the health
// listener in plaintext, or the gRPC port with serve's TLS.
func healthTarget(cfg *config) (string, credentials.TransportCredentials, error) {
	if cfg.healthAddr != "" {
		return dialable(cfg.healthAddr), insecure.NewCredentials(), nil
	}
	if cfg.sec.tlsCertFile == "" {
		return dialable(cfg.grpcAddr), insecure.NewCredentials(), nil
	}
	leaf, err := leafCertificate(cfg.sec.tlsCertFile)
	if err != nil {
		return "", nil, err
	}
	tc := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// No CA and host name check: the certificate is pinned instead
		// (VerifyPeerCertificate), to the one serve serves.
		InsecureSkipVerify: true,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 || !bytes.Equal(raw[0], leaf) {
				return fmt.Errorf("the server's certificate is not the one in %s (tls-cert-file, ORDERD_TLS_CERT_FILE)", cfg.sec.tlsCertFile)
			}
			return nil
		},
	}
	return dialable(cfg.grpcAddr), credentials.NewTLS(tc), nil
}

// leafCertificate is the DER of the first certificate in a PEM file.
func leafCertificate(file string) ([]byte, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("healthcheck: serve's certificate: %w", err)
	}
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return nil, fmt.Errorf("healthcheck: no PEM certificate in %s", file)
		}
		if block.Type == "CERTIFICATE" {
			return block.Bytes, nil
		}
	}
}

// dialable turns a listen address into one to dial from the same machine:
// a wildcard or empty host (0.0.0.0:8080, [::]:8080, :8080) is the loopback.
func dialable(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen // grpc's own error names it
	}
	ip := net.ParseIP(host)
	switch {
	case host == "" || (ip != nil && ip.Equal(net.IPv4zero)):
		host = "127.0.0.1"
	case ip != nil && ip.Equal(net.IPv6unspecified):
		host = "::1"
	}
	return net.JoinHostPort(host, port)
}
