package localcluster

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/atlasmart/orderd/internal/tools/devsetup"
)

func TestNewerVersion(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"4.4.0", "4.10.0", false},
		{"4.10.0", "4.4.0", true},
		{"5.0.10", "5.0.9", true},
		{"5.0.9", "5.0.9", false},
		{"4.1", "4.1.0", false},
	} {
		if got := newerVersion(c.a, c.b); got != c.want {
			t.Errorf("newerVersion(%s, %s) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// The cache holds several runtimes: the newest complete one of the right
// kind is used, or exactly the pinned one. Complete means the server jar
// and every jar the runtime needs (a runtime an older pom fetched without
// the logging binding is fetched again).
func TestCachedRuntimePicksTheNewestCompleteOne(t *testing.T) {
	cache := t.TempDir()
	put := func(dir string, jars ...string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(cache, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, jar := range jars {
			if err := os.WriteFile(filepath.Join(cache, dir, jar), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	const binding = "log4j-slf4j-impl-2.24.3.jar"
	put("kafka-4.4.0", "kafka_2.13-4.4.0.jar", binding)
	put("kafka-4.10.1", "kafka_2.13-4.10.1.jar", binding)
	put("kafka-4.11.0")                                                          // an interrupted fetch: no server jar
	put("kafka-4.12.0", "kafka_2.13-4.12.0.jar", "log4j-slf4j2-impl-2.24.3.jar") // an older pom's: no SLF4J 1.x binding
	put("kafka-3.9.0", "kafka_2.13-3.9.0.jar", binding)                          // not 4.x
	put("cassandra-5.0.9", "cassandra-all-5.0.9.jar")

	dir, ok := cachedRuntime(cache, kafkaRuntime, "")
	if !ok || filepath.Base(dir) != "kafka-4.10.1" {
		t.Errorf("newest Kafka = %s, %v; want kafka-4.10.1", dir, ok)
	}
	dir, ok = cachedRuntime(cache, kafkaRuntime, "4.4.0")
	if !ok || filepath.Base(dir) != "kafka-4.4.0" {
		t.Errorf("pinned 4.4.0 = %s, %v", dir, ok)
	}
	if _, ok := cachedRuntime(cache, kafkaRuntime, "4.2.0"); ok {
		t.Error("a pinned version that is not cached was found")
	}
	if _, ok := cachedRuntime(cache, kafkaRuntime, "4.12.0"); ok {
		t.Error("a pinned runtime without the SLF4J 1.x binding was taken as complete")
	}
	dir, ok = cachedRuntime(cache, cassandraRuntime, "")
	if !ok || filepath.Base(dir) != "cassandra-5.0.9" {
		t.Errorf("Cassandra = %s, %v; want cassandra-5.0.9", dir, ok)
	}
}

func TestBrokerConfig(t *testing.T) {
	state := t.TempDir()
	b, err := NewBroker(KafkaConfig{StateDir: state, CacheDir: t.TempDir(), Addr: "127.0.0.1:29092", ControllerAddr: "127.0.0.1:29093", Plaintext: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.writeConfig(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(b.confPath())
	if err != nil {
		t.Fatal(err)
	}
	conf := string(raw)
	for _, want := range []string{
		"process.roles=broker,controller",
		"listeners=PLAINTEXT://127.0.0.1:29092,CONTROLLER://127.0.0.1:29093",
		"advertised.listeners=PLAINTEXT://127.0.0.1:29092",
		"controller.quorum.bootstrap.servers=127.0.0.1:29093",
		"log.dirs=" + filepath.Join(state, "data"),
		"offsets.topic.replication.factor=1",
	} {
		if !strings.Contains(conf, want+"\n") {
			t.Errorf("server.properties lacks %q:\n%s", want, conf)
		}
	}
	logConf, err := os.ReadFile(filepath.Join(state, "conf", "log4j2.properties"))
	if err != nil || !strings.Contains(string(logConf), filepath.Join(state, "logs", "server.log")) {
		t.Errorf("log4j2.properties does not log to the state folder: %v\n%s", err, logConf)
	}
	if _, err := NewBroker(KafkaConfig{StateDir: state, Addr: "no-port"}); err == nil {
		t.Error("an address without a port was accepted")
	}
}

func TestClusterIDIsWhatKRaftAccepts(t *testing.T) {
	for range 1000 {
		id, err := clusterID(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		if len(id) != 22 || strings.ContainsAny(id, "+/=") || id[0] == '-' {
			t.Fatalf("cluster id %q: want 22 characters of base64url, not starting with '-'", id)
		}
	}
}

// An id starting with '-' is what the storage tool reads as an option; the
// next 16 bytes are drawn instead.
func TestClusterIDNeverStartsWithADash(t *testing.T) {
	dash := bytes.Repeat([]byte{0xf8}, 16) // 111110.. encodes as '-' first
	next := bytes.Repeat([]byte{0x01}, 16)
	id, err := clusterID(bytes.NewReader(append(dash, next...)))
	if err != nil {
		t.Fatal(err)
	}
	if want := base64.RawURLEncoding.EncodeToString(next); id != want {
		t.Errorf("cluster id %q, want %q (the draw after the one starting with '-')", id, want)
	}
	if _, err := clusterID(bytes.NewReader(dash)); err == nil {
		t.Error("no error when the random source ran out")
	}
}

// By default the client listener is SASL_SSL: SCRAM-SHA-512 over TLS with
// the development setup's certificate (checked against the real broker by
// the e2e suite); a PLAINTEXT listener only when asked; an address the
// certificate does not name, or no setup at all, is refused before the
// broker starts.
func TestBrokerConfigSASLSSL(t *testing.T) {
	dev := t.TempDir()
	if _, _, err := devsetup.Write(dev, "default", time.Hour); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	b, err := NewBroker(KafkaConfig{StateDir: state, CacheDir: t.TempDir(), DevDir: dev,
		Addr: "127.0.0.1:29092", ControllerAddr: "127.0.0.1:29093", PlaintextAddr: "127.0.0.1:29094"})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.makeUsers(); err != nil {
		t.Fatal(err)
	}
	if err := b.writeConfig(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(b.confPath())
	if err != nil {
		t.Fatal(err)
	}
	pass, _ := b.password(brokerUser)
	for _, want := range []string{
		"listeners=SASL_SSL://127.0.0.1:29092,CONTROLLER://127.0.0.1:29093,PLAINTEXT://127.0.0.1:29094",
		"listener.security.protocol.map=CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT",
		"sasl.enabled.mechanisms=SCRAM-SHA-512",
		`listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="` + pass + `";`,
		"ssl.keystore.location=" + filepath.Join(state, "tls", "broker.pem"),
	} {
		if !strings.Contains(string(raw), want+"\n") {
			t.Errorf("server.properties lacks %q:\n%s", want, raw)
		}
	}
	if c := b.Conn(OrderdUser); c.Plaintext || c.Username != "orderd" || c.PasswordFile != filepath.Join(state, "users", "orderd.password") {
		t.Errorf("orderd's connection = %+v", c)
	}

	elsewhere, err := NewBroker(KafkaConfig{StateDir: state, DevDir: dev, Addr: "127.0.0.9:29092"})
	if err != nil {
		t.Fatal(err)
	}
	if err := elsewhere.writeConfig(); err == nil || !strings.Contains(err.Error(), "-hosts 127.0.0.9") {
		t.Errorf("an address the certificate does not name: %v, want refused naming the fix", err)
	}
	none, err := NewBroker(KafkaConfig{StateDir: state, DevDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := none.writeConfig(); err == nil || !strings.Contains(err.Error(), "make dev-setup") {
		t.Errorf("no development setup: %v, want refused naming make dev-setup", err)
	}
}
