package kafkaconn

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/atlasmart/orderd/internal/tools/devpki"
)

// A client is secured unless it asks not to be: no login is refused, and
// so is plaintext with a login (one of them is a mistake).
func TestCheck(t *testing.T) {
	for _, c := range []struct {
		s    Settings
		want string // "" for accepted
	}{
		{Settings{}, "set kafka-username and kafka-password-file, or kafka-plaintext"},
		{Settings{Username: "orderd"}, "set kafka-username and kafka-password-file"},
		{Settings{Username: "orderd", PasswordFile: "p"}, ""},
		{Settings{Username: "orderd", PasswordFile: "p", CertFile: "c"}, "both kafka-tls-cert-file and kafka-tls-key-file"},
		{Settings{Plaintext: true}, ""},
		{Settings{Plaintext: true, CAFile: "ca.pem"}, "choose one"},
	} {
		err := c.s.Check()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+v: %v, want %q", c.s, err, c.want)
		}
	}
}

// The files are read at start, so a wrong path fails before the first
// connection; plaintext needs no option.
func TestClientOpts(t *testing.T) {
	dir := t.TempDir()
	ca, err := devpki.NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caFile, pass := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "password")
	if err := os.WriteFile(caFile, ca.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pass, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if opts, err := (Settings{Username: "orderd", PasswordFile: pass, CAFile: caFile}).ClientOpts(); err != nil || len(opts) != 2 {
		t.Fatalf("SASL_SSL: %d options, %v; want the TLS dialer and the login", len(opts), err)
	}
	if opts, err := (Settings{Plaintext: true}).ClientOpts(); err != nil || len(opts) != 0 {
		t.Fatalf("plaintext: %d options, %v; want none", len(opts), err)
	}
	for name, s := range map[string]Settings{
		"kafka password file":          {Username: "orderd", PasswordFile: filepath.Join(dir, "missing"), CAFile: caFile},
		"kafka TLS CA file":            {Username: "orderd", PasswordFile: pass, CAFile: filepath.Join(dir, "missing")},
		"holds no PEM certificate":     {Username: "orderd", PasswordFile: pass, CAFile: pass},
		"kafka TLS client certificate": {Username: "orderd", PasswordFile: pass, CertFile: caFile, KeyFile: pass},
	} {
		if _, err := s.ClientOpts(); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%+v: %v, want an error naming %q", s, err, name)
		}
	}
}
