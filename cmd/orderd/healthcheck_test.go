package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/atlasmart/orderd/internal/tools/devsetup"
)

// healthServer serves gRPC health on a loopback port over serve's TLS
// (serverTLS) with the certificate of files, the way serve does, and
// returns its address and statuses.
func healthServer(t *testing.T, files devsetup.Files) (string, *health.Server) {
	t.Helper()
	tc, _, err := serverTLS(&securityConfig{tlsCertFile: files.ServerCert(), tlsKeyFile: files.ServerKey()})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(tc)))
	h := health.NewServer()
	healthpb.RegisterHealthServer(srv, h)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String(), h
}

func TestHealthcheckExitsZeroOnlyWhenOrderdIsServing(t *testing.T) {
	files, _, err := devsetup.Write(t.TempDir(), "default", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	addr, h := healthServer(t, files)
	_, port, _ := net.SplitHostPort(addr)
	// serve's settings in a container: a wildcard listen address
	args := []string{"healthcheck", "-grpc-addr", "0.0.0.0:" + port, "-tls-cert-file", files.ServerCert(), "-timeout", "2s"}

	var out bytes.Buffer
	if err := run(args, &out); err != nil {
		t.Fatalf("orderd healthcheck while SERVING: %v", err)
	}
	if !strings.Contains(out.String(), "SERVING") {
		t.Errorf("orderd healthcheck printed %q, want it to say SERVING", out.String())
	}

	h.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	err = run(args, &out)
	if err == nil || !strings.Contains(err.Error(), "NOT_SERVING") {
		t.Errorf("orderd healthcheck while NOT_SERVING = %v, want an error saying NOT_SERVING", err)
	}
}

func TestHealthcheckAcceptsOnlyServesCertificate(t *testing.T) {
	files, _, err := devsetup.Write(t.TempDir(), "default", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := devsetup.Write(t.TempDir(), "default", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := healthServer(t, files)
	err = run([]string{"healthcheck", "-grpc-addr", addr, "-tls-cert-file", other.ServerCert(), "-timeout", "2s"}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "not the one in") {
		t.Errorf("orderd healthcheck against another certificate = %v, want it refused as not serve's certificate", err)
	}
}

func TestHealthcheckSaysWhenNothingAnswers(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close() // a port nothing listens on
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cfg := &config{grpcAddr: addr, healthTimeout: time.Second}
	err = healthcheck(ctx, cfg, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "no answer from orderd at "+addr) {
		t.Errorf("healthcheck of a closed port = %v, want it to say no answer from orderd at %s", err, addr)
	}
}
