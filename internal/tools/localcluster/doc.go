// Package localcluster runs a real Apache Cassandra 5.0 cluster on one machine
// without Docker: each node is a plain JVM process on its own loopback
// address (node i on 127.0.0.i), built from the cassandra-all artifacts on
// Maven Central.
//
// The package owns the whole life of that cluster: fetching the server jars
// into a cache outside the repository, writing each node's configuration from
// the templates embedded here, starting nodes detached from the caller (so a
// test runner that waits for end-of-output never hangs on them), waiting until
// every node is Up/Normal, and stopping, killing, pausing (SIGSTOP) and
// restarting single nodes for fault tests. Node state (data, logs, pid files)
// lives under one state folder that survives restarts of the launcher; a pid
// file left by a killed run is recognised as stale and ignored.
//
// The nodes form one data centre (dc1, a rack per node) unless Config.DCs
// splits them into several (dc1, dc2, ...: consecutive nodes, a rack per
// node within its DC, each DC's tokens balanced on their own). With
// FirstAddress past the main cluster's nodes and a StateDir of its own, a
// second cluster (say two DCs on 127.0.0.4-7, JMX ports 7400-7700) runs
// beside the main one without sharing a port or a file with it.
//
// Each node logs once, to logs/system.log, rolled at 20 MB and capped at
// 200 MB of rolled files; logs/stdout.log holds only what the JVM prints
// outside logging (a failed start); logs/gc.log holds every garbage
// collection with its wall-clock time (G1 by default, Config.GC), which
// cmd/orderbench reads its rounds' pauses from. The settings are chosen so that a node
// being down costs the others nothing: see the role-setup delay in
// templates/jvm17.options.tmpl and docs/faults.md for the figures.
//
// It also runs a single-node Apache Kafka 4.x broker (KRaft mode, broker and
// controller in one JVM) from the kafka_2.13 artifacts the same way: Broker,
// with its own state folder, log and pid file (kafka.go).
//
// cmd/cassandra-local and cmd/kafka-local are its command-line fronts; the
// e2e harness uses the same package for node and broker control.
package localcluster
