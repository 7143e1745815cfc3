// Package kafkaconn is how orderd's Kafka clients (the event publisher and
// the reference consumer) reach the brokers: TLS with SCRAM-SHA-512 logins
// (the SASL_SSL security protocol) unless plaintext is asked for. Both
// binaries register the same flags (Settings.RegisterFlags) and turn them
// into the same client options (Settings.ClientOpts), so a broker secured
// for one is secured for the other.
package kafkaconn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Settings say how a client connects. The zero value is SASL_SSL with no
// login yet, which Check refuses: a client is secured unless asked not to be.
type Settings struct {
	// Plaintext connects without TLS and without a login (the PLAINTEXT
	// security protocol), for a broker that serves only that.
	Plaintext bool
	// Username and PasswordFile are the SCRAM-SHA-512 login. The file is
	// read at every new connection's login, so a rotated password is used
	// without a restart.
	Username, PasswordFile string
	// CAFile holds the PEM certificates that sign the brokers'
	// certificates; empty: the system's roots.
	CAFile string
	// CertFile and KeyFile are a client certificate, for brokers that ask
	// for one; optional.
	CertFile, KeyFile string
}

// Defaults supply a flag's default from its name: a binary's environment
// fallback (ORDERD_KAFKA_USERNAME for -kafka-username), or the fallback.
type Defaults interface {
	String(flag, fallback string) string
	Bool(flag string, fallback bool) bool
}

// RegisterFlags adds -kafka-plaintext, -kafka-username,
// -kafka-password-file and -kafka-tls-{ca,cert,key}-file to fs.
func (s *Settings) RegisterFlags(fs *flag.FlagSet, def Defaults) {
	fs.BoolVar(&s.Plaintext, "kafka-plaintext", def.Bool("kafka-plaintext", false), "connect to Kafka without TLS and without a login (a PLAINTEXT listener); default: SASL_SSL, SCRAM-SHA-512 over TLS")
	fs.StringVar(&s.Username, "kafka-username", def.String("kafka-username", ""), "SCRAM-SHA-512 user to log in to Kafka as")
	fs.StringVar(&s.PasswordFile, "kafka-password-file", def.String("kafka-password-file", ""), "file holding the Kafka user's password, read at every new connection (never a flag or variable value: those show in ps and -h)")
	fs.StringVar(&s.CAFile, "kafka-tls-ca-file", def.String("kafka-tls-ca-file", ""), "PEM CA of the brokers' certificates; empty: the system's roots")
	fs.StringVar(&s.CertFile, "kafka-tls-cert-file", def.String("kafka-tls-cert-file", ""), "PEM client certificate for Kafka (if the brokers ask for one)")
	fs.StringVar(&s.KeyFile, "kafka-tls-key-file", def.String("kafka-tls-key-file", ""), "PEM key of -kafka-tls-cert-file")
}

// Check reports settings that cannot work together, naming the flags.
func (s Settings) Check() error {
	secured := s.Username != "" || s.PasswordFile != "" || s.CAFile != "" || s.CertFile != "" || s.KeyFile != ""
	switch {
	case s.Plaintext && secured:
		return errors.New("kafka-plaintext is set with Kafka login or TLS settings: choose one")
	case s.Plaintext:
		return nil
	case s.Username == "" || s.PasswordFile == "":
		return errors.New("kafka is reached over SASL_SSL (SCRAM-SHA-512 over TLS) unless asked otherwise: set kafka-username and kafka-password-file, or kafka-plaintext for a broker without TLS and login")
	case (s.CertFile == "") != (s.KeyFile == ""):
		return errors.New("set both kafka-tls-cert-file and kafka-tls-key-file, or neither")
	}
	return nil
}

// Protocol is the Kafka security protocol the settings speak, for logs.
func (s Settings) Protocol() string {
	if s.Plaintext {
		return "PLAINTEXT"
	}
	return "SASL_SSL"
}

// ClientOpts are the franz-go options that connect as s says: none for
// plaintext; else a TLS dialer and the SCRAM-SHA-512 login. The files are
// read now, so a missing or unreadable one fails at start, not at the
// first connection.
func (s Settings) ClientOpts() ([]kgo.Opt, error) {
	if err := s.Check(); err != nil {
		return nil, err
	}
	if s.Plaintext {
		return nil, nil
	}
	tc, err := s.tlsConfig()
	if err != nil {
		return nil, err
	}
	if _, err := s.password(); err != nil {
		return nil, err
	}
	login := scram.Sha512(func(context.Context) (scram.Auth, error) {
		pass, err := s.password()
		return scram.Auth{User: s.Username, Pass: pass}, err
	})
	// DialTLSConfig names the dialled broker as the server to verify.
	return []kgo.Opt{kgo.DialTLSConfig(tc), kgo.SASL(login)}, nil
}

func (s Settings) password() (string, error) {
	b, err := os.ReadFile(s.PasswordFile)
	if err != nil {
		return "", fmt.Errorf("kafka password file: %w", err)
	}
	pass := strings.TrimRight(string(b), "\r\n")
	if pass == "" {
		return "", fmt.Errorf("kafka password file %s is empty", s.PasswordFile)
	}
	return pass, nil
}

func (s Settings) tlsConfig() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.CAFile != "" {
		pem, err := os.ReadFile(s.CAFile)
		if err != nil {
			return nil, fmt.Errorf("kafka TLS CA file: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("kafka TLS CA file %s holds no PEM certificate", s.CAFile)
		}
	}
	if s.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("kafka TLS client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
