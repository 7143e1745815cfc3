// Package devsetup writes a complete development security setup into a
// directory: a throwaway CA, a server certificate for the loopback
// addresses, a client certificate and an API key file. `orderd dev-setup`
// (behind `make run`), the e2e harness and orderbench all use it, so the
// three secure orderd the same way. Never for production.
package devsetup

import (
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/atlasmart/orderd/internal/adapters/auth"
	"github.com/atlasmart/orderd/internal/tools/clientcreds"
	"github.com/atlasmart/orderd/internal/tools/devpki"
)

// Files names the files of a setup in Dir.
type Files struct{ Dir string }

func (f Files) path(name string) string { return filepath.Join(f.Dir, name) }

func (f Files) CA() string         { return f.path("ca.pem") }
func (f Files) ServerCert() string { return f.path("server.pem") }
func (f Files) ServerKey() string  { return f.path("server-key.pem") }
func (f Files) ClientCert() string { return f.path("client.pem") }
func (f Files) ClientKey() string  { return f.path("client-key.pem") }
func (f Files) APIKeys() string    { return f.path("api-keys.json") }

// Exists reports whether a setup was already written to Dir.
func (f Files) Exists() bool {
	_, err := os.Stat(f.CA())
	return err == nil
}

// ServerEnv is the orderd serve settings that use the setup: TLS, client
// certificates signed by the CA, and the API key file.
func (f Files) ServerEnv() []string {
	return []string{
		"ORDERD_TLS_CERT_FILE=" + f.ServerCert(), "ORDERD_TLS_KEY_FILE=" + f.ServerKey(),
		"ORDERD_TLS_CLIENT_CA_FILE=" + f.CA(), "ORDERD_API_KEYS_FILE=" + f.APIKeys(),
	}
}

// Client is a client that trusts the CA and authenticates with token (an
// API key or JWT; "" for none).
func (f Files) Client(token string) clientcreds.Options {
	return clientcreds.Options{CAFile: f.CA(), Token: token}
}

// Write makes a setup in dir for tenant: the client certificate and the one
// API key have every permission. It returns the key, which is stored
// nowhere (the key file keeps its salted hash). The server certificate
// names the loopback addresses and localhost, and extraHosts (addresses or
// DNS names) besides: orderd serving on another address, e.g. 127.0.0.25
// in deploy/docker's host-network layout, needs its address there for
// clients to accept it.
func Write(dir, tenant string, validity time.Duration, extraHosts ...string) (Files, string, error) {
	f := Files{Dir: dir}
	if f.Exists() {
		return f, "", errors.New("a development setup already exists in " + dir)
	}
	all := []string{"create", "read", "admin"}
	ca, err := devpki.NewCA("orderd development CA", validity)
	if err != nil {
		return f, "", err
	}
	server, err := ca.Server(append([]string{"127.0.0.1", "localhost", "::1"}, extraHosts...), validity)
	if err != nil {
		return f, "", err
	}
	client, err := ca.Client(tenant, "developer", all, validity)
	if err != nil {
		return f, "", err
	}
	key, entry, err := auth.NewKey(tenant, "developer", all, time.Now())
	if err != nil {
		return f, "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return f, "", err
	}
	for name, data := range map[string][]byte{
		f.ServerCert(): server.CertPEM, f.ServerKey(): server.KeyPEM,
		f.ClientCert(): client.CertPEM, f.ClientKey(): client.KeyPEM,
	} {
		if err := os.WriteFile(name, data, 0o600); err != nil {
			return f, "", err
		}
	}
	if err := auth.WriteKeyFile(f.APIKeys(), auth.KeyFile{Keys: []auth.KeyEntry{entry}}); err != nil {
		return f, "", err
	}
	// The CA last: Exists means complete.
	if err := os.WriteFile(f.CA(), ca.CertPEM(), 0o644); err != nil {
		return f, "", err
	}
	return f, key, nil
}
