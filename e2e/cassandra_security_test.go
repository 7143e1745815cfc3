package e2e

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/inf.v0"

	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/tools/devpki"
	"github.com/atlasmart/orderd/internal/tools/localcluster"
)

// testLog writes a cluster launcher's progress lines to the test log.
type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// orderd reaches a cluster that requires a login and TLS: it logs in with
// the password read from its file, over TLS checked against the cluster's
// CA, and serves; a wrong password stops it at once with a clear error that
// never shows the password, and a client without TLS is refused. The
// cluster is a second, one-node cluster on 127.0.0.4 with
// PasswordAuthenticator and client encryption, started by the local
// launcher beside the run's main cluster.
func TestOrderdLogsInToASecuredClusterOverTLS(t *testing.T) {
	isolated(t)
	if _, ok := cluster.(*localCluster); !ok {
		failInCIElseSkip(t, "the secured cluster needs the local launcher; this run uses "+cluster.Describe())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	ca, err := devpki.NewCA("secured cluster CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	node, err := ca.Server([]string{"127.0.0.4"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) string { return writeSecret(t, dir, name, data) }
	keystore := write("node.pem", append(append([]byte{}, node.KeyPEM...), node.CertPEM...))
	caFile := write("ca.pem", ca.CertPEM())

	c, err := localcluster.New(localcluster.Config{Nodes: 1, FirstAddress: 4, StateDir: filepath.Join(dir, "cluster"), HeapMB: 512,
		Security: &localcluster.Security{PasswordAuth: true, ClientTLSKeystore: keystore}, Log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Up(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Down(context.Background()); err != nil {
			t.Error(err)
		}
	})
	hosts := c.ContactPoints()
	tlsCfg := &cassandra.TLS{CAFile: caFile}

	// Without TLS, even the right password gets nowhere.
	if s, err := cassandra.NewSession(cassandra.Config{Hosts: hosts, Username: "cassandra", Password: "cassandra", ConnectTimeout: 5 * time.Second}); err == nil {
		s.Close()
		t.Fatal("a plaintext client reached the TLS-only cluster")
	}
	// The superuser, over TLS, makes orderd's role (the default superuser
	// can take a few seconds to be created after the node starts).
	const password = "e2e-secret-Zq7"
	deadline := time.Now().Add(60 * time.Second)
	for {
		s, err := cassandra.NewSession(cassandra.Config{Hosts: hosts, Username: "cassandra", Password: "cassandra", TLS: tlsCfg})
		if err == nil {
			err = s.Query(`CREATE ROLE IF NOT EXISTS orderd WITH PASSWORD = '` + password + `' AND LOGIN = true`).ExecContext(ctx)
			s.Close()
			if err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("create orderd's role as the superuser over TLS: %v", err)
		}
		time.Sleep(time.Second)
	}

	secure := []string{"ORDERD_CASSANDRA_CONTACT_POINTS=127.0.0.4", "ORDERD_KEYSPACE=secured", "ORDERD_REPLICATION_FACTOR=1",
		"ORDERD_CASSANDRA_USERNAME=orderd", "ORDERD_CASSANDRA_PASSWORD_FILE=" + write("password", []byte(password+"\n")),
		"ORDERD_CASSANDRA_TLS_CA_FILE=" + caFile, "ORDERD_CONNECT_WAIT=20s"}
	wrong := append(append([]string{}, secure...), "ORDERD_CASSANDRA_PASSWORD_FILE="+write("wrong", []byte("not-it")))
	start := time.Now()
	out, err := runOrderdEnv(ctx, wrong, "migrate")
	if err == nil || !strings.Contains(out, "refused the login") || strings.Contains(out, "not-it") {
		t.Fatalf("migrate with a wrong password: %v\n%s\nwant a refusal naming the role, not the password", err, out)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("a wrong password took %s to fail: it must not be retried", took)
	}
	if out, err := runOrderdEnv(ctx, secure, "migrate"); err != nil {
		t.Fatalf("migrate over TLS with a login: %v\n%s", err, out)
	}
	help, _ := runOrderdEnv(ctx, secure, "serve", "-h")
	p := startOrderd(t, append(secure, "ORDERD_DELIVERY=false", "ORDERD_RECONCILER=false")...)
	req := newRequest("16.00")
	resp, _, err := create(t, p.client, req)
	if err != nil {
		t.Fatalf("CreateOrder against the secured cluster: %v", err)
	}
	s, err := cassandra.NewSession(cassandra.Config{Hosts: hosts, Keyspace: "secured", Username: "orderd", Password: password, TLS: tlsCfg})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var total *inf.Dec
	if err := s.Query(`SELECT total FROM orders_by_id WHERE tenant = ? AND order_id = ?`, tenant, resp.Order.OrderId).ScanContext(ctx, &total); err != nil || total.String() != "16.00" {
		t.Errorf("the order in the secured cluster: total %v, %v; want 16.00", total, err)
	}
	for what, text := range map[string]string{"serve -h": help, "orderd's log": p.output.String()} {
		if strings.Contains(text, password) {
			t.Errorf("%s shows the Cassandra password", what)
		}
	}

	// The reference consumer takes the same settings (ORDERCONSUMER_*): it
	// logs in over TLS and creates its keyspace there.
	consumer := startConsumer(t, buildConsumer(t), "-brokers", broker.Addr(), "-topic", eventsTopic, "-group", "secured",
		"-cassandra", "127.0.0.4", "-local-dc", "dc1", "-keyspace", "consumer_secured", "-replication-factor", "1",
		"-cassandra-username", "orderd", "-cassandra-password-file", write("consumer-password", []byte(password+"\n")),
		"-cassandra-tls-ca-file", caFile, "-log-format", "text")
	if _, err := eventually(time.Minute, func() error {
		if !strings.Contains(consumer.output.String(), "msg=consuming") {
			return errors.New("the consumer is not consuming")
		}
		return nil
	}); err != nil {
		t.Fatalf("%v:\n%s", err, consumer.output)
	}
	var ks string
	if err := s.Query(`SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = 'consumer_secured'`).ScanContext(ctx, &ks); err != nil {
		t.Errorf("the consumer's keyspace in the secured cluster: %v", err)
	}
}
