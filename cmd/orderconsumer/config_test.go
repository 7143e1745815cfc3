package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/atlasmart/orderd/internal/platform/kafkaconn"
)

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func TestConfigDefaults(t *testing.T) {
	c, err := parseConfig([]string{"-kafka-plaintext"}, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := config{brokers: "127.0.0.1:19092", topic: "atlasmart.orders.v1.events", group: "orderconsumer", fromStart: true,
		kafka:     kafkaconn.Settings{Plaintext: true},
		cassandra: "127.0.0.1,127.0.0.2,127.0.0.3", localDC: "dc1", keyspace: "orderconsumer", replicationFactor: 3,
		logFormat: "json", logLevel: "info", tracing: "off", shutdownGrace: 20 * time.Second, sessionTimeout: 45 * time.Second}
	if c != want {
		t.Fatalf("defaults\n got %+v\nwant %+v", c, want)
	}
}

// Like orderd, the consumer reaches Kafka over SASL_SSL unless plaintext is
// asked for, and takes orderd's Cassandra login and TLS settings.
func TestConfigKafkaAndCassandraLogins(t *testing.T) {
	if _, err := parseConfig(nil, env(nil), io.Discard); err == nil || !strings.Contains(err.Error(), "kafka-username and kafka-password-file") {
		t.Fatalf("no Kafka login: %v, want refused naming the settings", err)
	}
	c, err := parseConfig(nil, env(map[string]string{
		"ORDERCONSUMER_KAFKA_USERNAME":          "orderconsumer",
		"ORDERCONSUMER_KAFKA_PASSWORD_FILE":     "/run/secrets/kafka",
		"ORDERCONSUMER_KAFKA_TLS_CA_FILE":       "/run/ca.pem",
		"ORDERCONSUMER_CASSANDRA_USERNAME":      "consumer",
		"ORDERCONSUMER_CASSANDRA_PASSWORD_FILE": "/run/secrets/cassandra",
		"ORDERCONSUMER_CASSANDRA_TLS_CA_FILE":   "/run/cassandra-ca.pem",
	}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.kafka.Username != "orderconsumer" || c.kafka.CAFile != "/run/ca.pem" || c.cassandraAccess.Username != "consumer" || c.cassandraAccess.TLS.CAFile != "/run/cassandra-ca.pem" {
		t.Fatalf("config %+v", c)
	}
	if _, err := parseConfig([]string{"-kafka-plaintext", "-cassandra-username", "consumer"}, env(nil), io.Discard); err == nil {
		t.Fatal("a Cassandra user without a password file: accepted, want refused")
	}
}

// The environment fills what the command line leaves out; a flag wins.
func TestConfigEnvironmentThenFlags(t *testing.T) {
	c, err := parseConfig([]string{"-topic", "from-flag", "-kafka-plaintext"}, env(map[string]string{
		"ORDERCONSUMER_TOPIC":              "from-env",
		"ORDERCONSUMER_GROUP":              "g2",
		"ORDERCONSUMER_FROM_START":         "false",
		"ORDERCONSUMER_REPLICATION_FACTOR": "1",
		"ORDERCONSUMER_METRICS_ADDR":       "127.0.0.1:9999",
	}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.topic != "from-flag" || c.group != "g2" || c.fromStart || c.replicationFactor != 1 || c.metricsAddr != "127.0.0.1:9999" {
		t.Fatalf("config %+v", c)
	}
}

func TestConfigRefusesBadValues(t *testing.T) {
	if _, err := parseConfig([]string{"-kafka-plaintext"}, env(map[string]string{"ORDERCONSUMER_REPLICATION_FACTOR": "three"}), io.Discard); err == nil {
		t.Error("a non-numeric ORDERCONSUMER_REPLICATION_FACTOR was accepted")
	}
	if _, err := parseConfig([]string{"-kafka-plaintext", "extra"}, env(nil), io.Discard); err == nil {
		t.Error("a positional argument was accepted")
	}
	c, err := parseConfig([]string{"-kafka-plaintext", "-log-format", "xml"}, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.logger(io.Discard); err == nil {
		t.Error("log format xml was accepted")
	}
	c, err = parseConfig([]string{"-kafka-plaintext", "-log-level", "loud"}, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.logger(io.Discard); err == nil {
		t.Error("log level loud was accepted")
	}
}
