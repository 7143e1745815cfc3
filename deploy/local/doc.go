// Package local runs a real Apache Cassandra 5.0 cluster on one machine
// without Docker: each node is a plain JVM process on its own loopback
// address (node i on 127.0.0.i), built from the cassandra-all artifacts on
// Maven Central.
//
// The package owns the whole life of that cluster: fetching the server jars
// into a cache outside the repository, writing each node's configuration from
// the templates embedded here, starting nodes detached from the caller (so a
// test runner that waits for end-of-output never hangs on them), waiting until
// every node is Up/Normal, and stopping, killing and restarting single nodes
// for fault tests. Node state (data, logs, pid files) lives under one state
// folder that survives restarts of the launcher; a pid file left by a killed
// run is recognised as stale and ignored.
//
// cmd/cassandra-local is its command-line front; the e2e harness uses the
// same package for node control.
package local
