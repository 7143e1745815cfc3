package main

import (
	"io"
	"testing"
	"time"
)

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func TestConfigDefaults(t *testing.T) {
	c, err := parseConfig(nil, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := config{brokers: "127.0.0.1:19092", topic: "atlasmart.orders.v1.events", group: "orderconsumer", fromStart: true,
		cassandra: "127.0.0.1,127.0.0.2,127.0.0.3", localDC: "dc1", keyspace: "orderconsumer", replicationFactor: 3,
		logFormat: "json", logLevel: "info", tracing: "off", shutdownGrace: 20 * time.Second, sessionTimeout: 45 * time.Second}
	if c != want {
		t.Fatalf("defaults\n got %+v\nwant %+v", c, want)
	}
}

// The environment fills what the command line leaves out; a flag wins.
func TestConfigEnvironmentThenFlags(t *testing.T) {
	c, err := parseConfig([]string{"-topic", "from-flag"}, env(map[string]string{
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
	if _, err := parseConfig(nil, env(map[string]string{"ORDERCONSUMER_REPLICATION_FACTOR": "three"}), io.Discard); err == nil {
		t.Error("a non-numeric ORDERCONSUMER_REPLICATION_FACTOR was accepted")
	}
	if _, err := parseConfig([]string{"extra"}, env(nil), io.Discard); err == nil {
		t.Error("a positional argument was accepted")
	}
	c, err := parseConfig([]string{"-log-format", "xml"}, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.logger(io.Discard); err == nil {
		t.Error("log format xml was accepted")
	}
	c, err = parseConfig([]string{"-log-level", "loud"}, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.logger(io.Discard); err == nil {
		t.Error("log level loud was accepted")
	}
}
