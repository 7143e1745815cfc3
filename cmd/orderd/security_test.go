package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/atlasmart/orderd/internal/adapters/auth"
	"github.com/atlasmart/orderd/internal/tools/devsetup"
)

func TestServeRefusesToStartWithoutTLSOrAWayToAuthenticate(t *testing.T) {
	files, _, err := devsetup.Write(t.TempDir(), "default", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	withTLS := securityConfig{tlsCertFile: files.ServerCert(), tlsKeyFile: files.ServerKey(), reloadInterval: time.Second}
	jwks := auth.JWKSConfig{URL: "https://idp.test/jwks.json", RefreshInterval: time.Minute, UnknownKIDInterval: time.Minute}
	cases := []struct {
		name string
		c    securityConfig
		want string // "" = valid
	}{
		{"nothing", securityConfig{reloadInterval: time.Second}, "needs TLS"},
		{"tls without a way to authenticate", withTLS, "no way to authenticate"},
		{"certificate without key", securityConfig{tlsCertFile: "x", reloadInterval: time.Second}, "both tls-cert-file and tls-key-file"},
		{"jwks without issuer", func() securityConfig { c := withTLS; c.jwksFile = "j"; return c }(), "jwt-issuer"},
		{"jwks url without issuer", func() securityConfig { c := withTLS; c.jwks = jwks; return c }(), "jwt-issuer"},
		{"jwks url", func() securityConfig { c := withTLS; c.jwks, c.jwtIssuer = jwks, "https://idp.test"; return c }(), ""},
		{"jwks url in the clear", func() securityConfig {
			c := withTLS
			c.jwks, c.jwtIssuer = jwks, "https://idp.test"
			c.jwks.URL = "http://idp.test/jwks.json"
			return c
		}(), "use https"},
		{"jwks file and url", func() securityConfig {
			c := withTLS
			c.jwks, c.jwksFile, c.jwtIssuer = jwks, "j", "https://idp.test"
			return c
		}(), "not both"},
		{"api keys", func() securityConfig { c := withTLS; c.apiKeysFile = files.APIKeys(); return c }(), ""},
		{"client certificates", func() securityConfig { c := withTLS; c.clientCAFile = files.CA(); return c }(), ""},
		{"insecure", securityConfig{insecure: true, insecureTenant: "default", reloadInterval: time.Second}, ""},
		{"insecure with a bad tenant", securityConfig{insecure: true, insecureTenant: "Not OK"}, "tenant"},
	}
	for _, c := range cases {
		err := c.c.validate()
		if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: validate = %v, want %q", c.name, err, c.want)
		}
	}
}

func TestInsecureModeWarnsAtStart(t *testing.T) {
	var logs bytes.Buffer
	s, err := newSecurity(context.Background(), &securityConfig{insecure: true, insecureTenant: "default"}, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if s.creds != nil || s.authn.Insecure == nil || s.authn.Insecure.Tenant != "default" {
		t.Errorf("insecure security = %+v", s)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "INSECURE") {
		t.Errorf("no warning logged:\n%s", logs.String())
	}
}

func TestSecurityLoadsTheKeyFileAtStart(t *testing.T) {
	files, key, err := devsetup.Write(t.TempDir(), "acme", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c := &securityConfig{tlsCertFile: files.ServerCert(), tlsKeyFile: files.ServerKey(), clientCAFile: files.CA(), apiKeysFile: files.APIKeys()}
	s, err := newSecurity(context.Background(), c, slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if id, err := s.authn.Authenticate(context.Background(), key, nil); err != nil || id.Tenant != "acme" {
		t.Errorf("the dev key: %+v, %v", id, err)
	}
	if s.creds == nil || !s.authn.ClientCerts || len(s.loaders) != 3 { // the key file, the certificate and its key
		t.Errorf("security = %+v", s)
	}
	c.apiKeysFile = files.Dir + "/missing.json"
	if _, err := newSecurity(context.Background(), c, slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))); err == nil {
		t.Error("a missing key file was accepted")
	}
}

func TestKeysCommandAddsListsAndRevokes(t *testing.T) {
	file := t.TempDir() + "/keys.json"
	var out bytes.Buffer
	if err := keysCommand([]string{"add", "-file", file, "-tenant", "acme", "-name", "gw", "-permissions", "create"}, &out); err != nil {
		t.Fatal(err)
	}
	m := strings.Fields(out.String())
	if len(m) < 3 || m[0] != "key" || m[1] != "id" {
		t.Fatalf("add printed %q", out.String())
	}
	id := m[2]
	out.Reset()
	if err := keysCommand([]string{"list", "-file", file}, &out); err != nil || !strings.Contains(out.String(), id) || strings.Contains(out.String(), "odk_") {
		t.Errorf("list: %v\n%s", err, out.String())
	}
	if err := keysCommand([]string{"revoke", "-file", file, id}, &out); err != nil {
		t.Fatal(err)
	}
	if err := keysCommand([]string{"revoke", "-file", file, id}, &out); err == nil {
		t.Error("revoking twice succeeded")
	}
	if err := keysCommand([]string{"add", "-file", file, "-tenant", "acme", "-name", "gw", "-permissions", "delete"}, &out); err == nil {
		t.Error("an unknown permission was accepted")
	}
}

// A renewed server certificate is served without a restart, once both of
// its files are replaced; until then the previous one stays.
func TestServerCertificateIsReloadedWhenItsFilesChange(t *testing.T) {
	old, _, err := devsetup.Write(t.TempDir(), "default", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	renewed, _, err := devsetup.Write(t.TempDir(), "default", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c := &securityConfig{tlsCertFile: old.ServerCert(), tlsKeyFile: old.ServerKey()}
	tc, loaders, err := serverTLS(c)
	if err != nil {
		t.Fatal(err)
	}
	served := func() []byte {
		cert, err := tc.GetCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		return cert.Certificate[0]
	}
	first := served()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, l := range loaders {
		go func() { _ = l.Watch(ctx, 5*time.Millisecond, log) }()
	}
	copyFile := func(from, to string) {
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(renewed.ServerCert(), old.ServerCert()) // the key does not match yet
	time.Sleep(50 * time.Millisecond)
	if !bytes.Equal(served(), first) {
		t.Fatal("a certificate without its key was served")
	}
	copyFile(renewed.ServerKey(), old.ServerKey())
	deadline := time.Now().Add(5 * time.Second)
	for bytes.Equal(served(), first) {
		if time.Now().After(deadline) {
			t.Fatal("the renewed certificate was not served within 5 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
