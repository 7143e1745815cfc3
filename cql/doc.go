// Package cql owns orderd's schema: the versioned files NNNN_name.cql
// embedded here, and the one migrator that cmd/orderd, the tests and the e2e
// harness share.
//
// Adding a table is one new file with the next number. Applied versions are
// recorded (with a checksum of the file) in schema_migrations; an applied file
// that was edited afterwards is an error, not silently skipped. Migration
// runs under a lease taken with an LWT, so two migrators never issue DDL at
// once (concurrent DDL on Cassandra 5.0 can leave schema disagreement), and
// waits for schema agreement after every statement. The lease is renewed
// while the run lasts, however long its DDL takes; a run that loses it
// stops before its next statement.
package cql
