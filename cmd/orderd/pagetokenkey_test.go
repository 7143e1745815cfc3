package main

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"log/slog"
	"strings"
	"testing"
)

func TestParseKey(t *testing.T) {
	key := bytes.Repeat([]byte{0xfb, 0xef, 0x01}, 11)[:32]
	for _, s := range []string{
		hex.EncodeToString(key),
		strings.ToUpper(hex.EncodeToString(key)),
		base64.StdEncoding.EncodeToString(key),
		base64.RawStdEncoding.EncodeToString(key),
		base64.URLEncoding.EncodeToString(key),
		base64.RawURLEncoding.EncodeToString(key),
	} {
		got, err := parseKey(s)
		if err != nil || !bytes.Equal(got, key) {
			t.Errorf("parseKey(%q) = %x, %v; want %x", s, got, err, key)
		}
	}
	for _, s := range []string{
		"",
		hex.EncodeToString(key[:31]),
		base64.StdEncoding.EncodeToString(key[:31]),
		"not a key: neither hex nor base64!",
	} {
		if got, err := parseKey(s); err == nil {
			t.Errorf("parseKey(%q) = %x, want an error", s, got)
		} else if s != "" && strings.Contains(err.Error(), s) {
			t.Errorf("the error %q quotes the secret", err)
		}
	}
}

// The key is a secret: -h prints no default, and a bad value in the
// environment is reported without the value.
func TestPageTokenKeyIsNotPrinted(t *testing.T) {
	secret := strings.Repeat("ab", 32)
	t.Setenv("ORDERD_PAGE_TOKEN_KEY", secret)
	cfg := &config{}
	fs := cfg.flags("serve")
	var help bytes.Buffer
	fs.SetOutput(&help)
	fs.PrintDefaults()
	if !strings.Contains(help.String(), "page-token-key") || strings.Contains(help.String(), secret) {
		t.Errorf("-h output lacks the flag or shows the key:\n%s", help.String())
	}
	if !bytes.Equal(cfg.pageTokenKey.key, bytes.Repeat([]byte{0xab}, 32)) {
		t.Errorf("key from the environment = %x", cfg.pageTokenKey.key)
	}

	bad := "0123456789abcdef-too-short"
	t.Setenv("ORDERD_PAGE_TOKEN_KEY", bad)
	cfg = &config{}
	cfg.flags("serve")
	err := cfg.validate("serve")
	if err == nil || !strings.Contains(err.Error(), "ORDERD_PAGE_TOKEN_KEY") || strings.Contains(err.Error(), bad) {
		t.Errorf("validate with a bad key: %v; want an error naming the variable, not its value", err)
	}
}

func TestPageTokenKeyDefaultIsRandom(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	a, err := pageTokenKey(nil, log)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pageTokenKey(nil, log)
	if len(a) != 32 || bytes.Equal(a, b) {
		t.Errorf("generated keys %x and %x: want two random 32-byte keys", a, b)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "ORDERD_PAGE_TOKEN_KEY") {
		t.Errorf("no warning logged:\n%s", logs.String())
	}
	set := bytes.Repeat([]byte{7}, 40)
	if got, _ := pageTokenKey(set, log); !bytes.Equal(got, set) {
		t.Errorf("configured key replaced: %x", got)
	}
}
