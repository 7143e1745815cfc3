package client

import (
	"context"
	"testing"
)

func TestCredentialsAreNeverSentInPlaintext(t *testing.T) {
	if _, err := (Credentials{Plaintext: true, Token: "odk_x"}).DialOptions(); err == nil {
		t.Error("plaintext with a token accepted")
	}
	if _, err := (Credentials{Plaintext: true}).DialOptions(); err != nil {
		t.Errorf("plaintext without credentials: %v", err)
	}
	if !Bearer("t").RequireTransportSecurity() {
		t.Error("the bearer token would be sent without TLS")
	}
	md, err := Bearer("tok").GetRequestMetadata(context.Background())
	if err != nil || md["authorization"] != "Bearer tok" {
		t.Errorf("metadata = %v, %v", md, err)
	}
	if _, err := (Credentials{CertFile: "c.pem"}).DialOptions(); err == nil {
		t.Error("a certificate without its key accepted")
	}
	if _, err := (Credentials{CAFile: "/nonexistent"}).DialOptions(); err == nil {
		t.Error("a missing CA file accepted")
	}
}
