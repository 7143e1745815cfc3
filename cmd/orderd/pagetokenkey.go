package main

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"

	"github.com/atlasmart/orderd/internal/adapters/grpcapi"
)

// keyFlag is the page-token key (ORDERD_PAGE_TOKEN_KEY, -page-token-key):
// hex, or standard or URL-safe base64 with or without padding, of at least
// grpcapi.MinPageTokenKeyLength bytes. It is a secret: String never shows
// it, so `orderd serve -h` prints no default, and no error quotes it.
type keyFlag struct{ key []byte }

func (k *keyFlag) String() string { return "" }

func (k *keyFlag) Set(s string) error {
	key, err := parseKey(s)
	if err != nil {
		return err
	}
	k.key = key
	return nil
}

// parseKey decodes a key. A string of hex digits is read as hex (64 hex
// digits are 32 bytes), anything else as base64.
func parseKey(s string) ([]byte, error) {
	key, err := hex.DecodeString(s)
	if err != nil {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			if key, err = enc.DecodeString(s); err == nil {
				break
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("not hex or base64")
	}
	if len(key) < grpcapi.MinPageTokenKeyLength {
		return nil, fmt.Errorf("%d bytes; need at least %d (e.g. `openssl rand -hex 32`)", len(key), grpcapi.MinPageTokenKeyLength)
	}
	return key, nil
}

// envKey is the key in the environment variable name, if set; a bad value
// is reported by validate, without the value.
func (c *config) envKey(name string) keyFlag {
	c.envRead = append(c.envRead, name)
	var k keyFlag
	if v, ok := os.LookupEnv(name); ok && v != "" {
		if err := k.Set(v); err != nil {
			c.envErrs = append(c.envErrs, fmt.Sprintf("%s: %v", name, err))
		}
	}
	return k
}

// pageTokenKey is the configured key or, when none is set, a random one:
// tokens signed with it do not survive a restart and are refused by every
// other instance, so the client's next page fails with INVALID_ARGUMENT.
func pageTokenKey(configured []byte, log *slog.Logger) ([]byte, error) {
	if len(configured) > 0 {
		return configured, nil
	}
	key := make([]byte, grpcapi.MinPageTokenKeyLength)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("generate a page token key: %w", err)
	}
	log.Warn("ORDERD_PAGE_TOKEN_KEY is not set: page tokens are signed with a random key, so they do not survive a restart " +
		"and other instances refuse them; set the same key on every instance")
	return key, nil
}
