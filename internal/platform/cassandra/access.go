package cassandra

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
)

// Access is the login and TLS settings an operator gives a client of the
// cluster. orderd and the reference consumer register the same flags
// (RegisterFlags), so a cluster secured for one is secured for the other.
type Access struct {
	// Username and PasswordFile log in with PasswordAuthenticator; both or
	// neither.
	Username, PasswordFile string
	// TLS is used when its CAFile is set.
	TLS TLS
}

// Defaults supply a flag's default from its name: a binary's environment
// fallback (ORDERD_CASSANDRA_USERNAME for -cassandra-username), or the
// fallback.
type Defaults interface {
	String(flag, fallback string) string
	Bool(flag string, fallback bool) bool
}

// RegisterFlags adds -cassandra-username, -cassandra-password-file and
// -cassandra-tls-* to fs.
func (a *Access) RegisterFlags(fs *flag.FlagSet, def Defaults) {
	fs.StringVar(&a.Username, "cassandra-username", def.String("cassandra-username", ""), "log in to Cassandra as this role (PasswordAuthenticator); empty: no login")
	fs.StringVar(&a.PasswordFile, "cassandra-password-file", def.String("cassandra-password-file", ""), "file holding the Cassandra role's password (never a flag or variable value: those show in ps and -h)")
	fs.StringVar(&a.TLS.CAFile, "cassandra-tls-ca-file", def.String("cassandra-tls-ca-file", ""), "PEM CA of the nodes' certificates; set: every connection to Cassandra uses TLS")
	fs.StringVar(&a.TLS.CertFile, "cassandra-tls-cert-file", def.String("cassandra-tls-cert-file", ""), "PEM client certificate for Cassandra (if the cluster requires one)")
	fs.StringVar(&a.TLS.KeyFile, "cassandra-tls-key-file", def.String("cassandra-tls-key-file", ""), "PEM key of -cassandra-tls-cert-file")
	fs.BoolVar(&a.TLS.SkipHostVerification, "cassandra-tls-skip-host-verification", def.Bool("cassandra-tls-skip-host-verification", false), "accept node certificates that do not name the node's address (still CA-signed)")
}

// Check reports settings that cannot work together, naming the flags.
func (a Access) Check() error {
	if (a.Username == "") != (a.PasswordFile == "") {
		return errors.New("set both cassandra-username and cassandra-password-file, or neither")
	}
	if a.TLS != (TLS{}) && a.TLS.CAFile == "" {
		return errors.New("cassandra TLS settings need cassandra-tls-ca-file")
	}
	return nil
}

// Apply sets cfg's login and TLS; the password is read from its file now.
func (a Access) Apply(cfg *Config) error {
	cfg.Username = a.Username
	if a.PasswordFile != "" {
		b, err := os.ReadFile(a.PasswordFile)
		if err != nil {
			return fmt.Errorf("cassandra password file: %w", err)
		}
		cfg.Password = strings.TrimRight(string(b), "\r\n")
	}
	if a.TLS != (TLS{}) {
		t := a.TLS
		cfg.TLS = &t
	}
	return nil
}
