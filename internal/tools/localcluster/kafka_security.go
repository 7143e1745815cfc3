package localcluster

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/atlasmart/orderd/internal/platform/kafkaconn"
	"github.com/atlasmart/orderd/internal/tools/devsetup"
)

// The SCRAM-SHA-512 users the broker's storage is formatted with: orderd's
// publisher, the reference consumer, and the broker itself (its
// inter-broker listener is the SASL_SSL one). Kafka keeps SCRAM
// credentials in its metadata log, so they are made once, at format time
// (kafka-storage format --add-scram), each with a random password in
// users/<name>.password under the state folder.
const (
	OrderdUser   = "orderd"
	ConsumerUser = "orderconsumer"
	brokerUser   = "broker"
)

var scramUsers = []string{OrderdUser, ConsumerUser, brokerUser}

// PasswordFile is the file holding user's password (OrderdUser or
// ConsumerUser), for a client's -kafka-password-file.
func (b *Broker) PasswordFile(user string) string {
	return filepath.Join(b.cfg.StateDir, "users", user+".password")
}

// CAFile is the CA certificate the broker's TLS certificate is signed by
// (a copy of the development setup's, made at each start), for a client's
// -kafka-tls-ca-file.
func (b *Broker) CAFile() string { return filepath.Join(b.cfg.StateDir, "tls", "ca.pem") }

// Plaintext reports whether the client listener is PLAINTEXT.
func (b *Broker) Plaintext() bool { return b.cfg.Plaintext }

// PlaintextAddr is the extra PLAINTEXT listener's address, "" if none.
func (b *Broker) PlaintextAddr() string { return b.cfg.PlaintextAddr }

// Conn is how user (OrderdUser or ConsumerUser) connects to the broker.
func (b *Broker) Conn(user string) kafkaconn.Settings {
	if b.cfg.Plaintext {
		return kafkaconn.Settings{Plaintext: true}
	}
	return kafkaconn.Settings{Username: user, PasswordFile: b.PasswordFile(user), CAFile: b.CAFile()}
}

func (b *Broker) keystorePath() string { return filepath.Join(b.cfg.StateDir, "tls", "broker.pem") }

func (b *Broker) password(user string) (string, error) {
	p, err := os.ReadFile(b.PasswordFile(user))
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("the broker's storage in %s was formatted without SCRAM users (by an older kafka-local): `kafka-local wipe` and start again, or ORDERD_KAFKA_PLAINTEXT=true", b.dataDir())
	}
	if err != nil {
		return "", fmt.Errorf("read the broker's %s password: %w", user, err)
	}
	return strings.TrimSpace(string(p)), nil
}

// makeUsers writes a fresh random password for every SCRAM user, before
// the storage is formatted with them.
func (b *Broker) makeUsers() error {
	if err := os.MkdirAll(filepath.Dir(b.PasswordFile(OrderdUser)), 0o700); err != nil {
		return fmt.Errorf("create the users folder: %w", err)
	}
	for _, u := range scramUsers {
		var raw [24]byte
		if _, err := rand.Read(raw[:]); err != nil {
			return fmt.Errorf("make a password: %w", err)
		}
		if err := os.WriteFile(b.PasswordFile(u), []byte(hex.EncodeToString(raw[:])+"\n"), 0o600); err != nil {
			return fmt.Errorf("write %s's password: %w", u, err)
		}
	}
	return nil
}

// format formats the storage (what kafka-storage.sh format does) with the
// SCRAM users.
func (b *Broker) format(ctx context.Context, classpath string) error {
	id, err := clusterID(rand.Reader)
	if err != nil {
		return err
	}
	args := []string{"-cp", classpath, "kafka.tools.StorageTool", "format", "-t", id, "-c", b.confPath(), "--standalone"}
	for _, u := range scramUsers {
		pass, err := b.password(u)
		if err != nil {
			return err
		}
		args = append(args, "--add-scram", fmt.Sprintf("SCRAM-SHA-512=[name=%s,password=%s]", u, pass))
	}
	if out, err := javaOutput(ctx, args...); err != nil {
		return fmt.Errorf("format the broker's storage in %s: %w\n%s", b.dataDir(), err, tail(out, 20))
	}
	return nil
}

// writeTLS writes the broker's PEM key store (the development setup's
// server key and certificate in one file, as Kafka's PEM key store wants
// them) and a copy of its CA, after checking the certificate names the
// host clients dial: they verify it.
func (b *Broker) writeTLS() error {
	dev := devsetup.Files{Dir: b.cfg.DevDir}
	if !dev.Exists() {
		return fmt.Errorf("the broker serves SASL_SSL with the development certificates, and %s holds none: run `make dev-setup` (orderd dev-setup -dir %s) first, or set ORDERD_KAFKA_PLAINTEXT=true for a plaintext broker", b.cfg.DevDir, b.cfg.DevDir)
	}
	cert, err := os.ReadFile(dev.ServerCert())
	if err != nil {
		return err
	}
	key, err := os.ReadFile(dev.ServerKey())
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(dev.CA())
	if err != nil {
		return err
	}
	host, _, _ := net.SplitHostPort(b.cfg.Addr)
	if err := namesHost(cert, host); err != nil {
		return fmt.Errorf("%s: %w (make a setup that names it: orderd dev-setup -hosts %s)", dev.ServerCert(), err, host)
	}
	if err := os.MkdirAll(filepath.Dir(b.CAFile()), 0o700); err != nil {
		return fmt.Errorf("create the tls folder: %w", err)
	}
	if err := os.WriteFile(b.keystorePath(), append(key, cert...), 0o600); err != nil {
		return fmt.Errorf("write the broker's key store: %w", err)
	}
	if err := os.WriteFile(b.CAFile(), ca, 0o644); err != nil {
		return fmt.Errorf("write the broker's CA: %w", err)
	}
	return nil
}

func namesHost(certPEM []byte, host string) error {
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return errors.New("no PEM certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return err
	}
	return cert.VerifyHostname(host)
}
