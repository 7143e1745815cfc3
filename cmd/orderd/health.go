package main

import (
	"context"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/atlasmart/orderd/internal/cassandra"
)

// quorumProbeCQL reads one partition of the keyspace's schema_migrations
// table, bound to quorumProbeVersion (the first migration, present in every
// migrated keyspace; the read needs its replicas, not the row).
const quorumProbeCQL = `/* health.quorum_probe */ SELECT version FROM schema_migrations WHERE version = ?`

const quorumProbeVersion = 1

// quorumProbe is serve's health ping (grpcapi.HealthProbe): a LOCAL_QUORUM
// read of one row of schema_migrations, through the stores' own session.
//
// What it proves: a coordinator in the local DC reached a LOCAL_QUORUM of
// the replicas of one partition of orderd's keyspace within the probe's
// timeout. schema_migrations is replicated like the data tables (same
// keyspace, same replication factor), so with RF 3 two replicas must answer:
// with two of three nodes down the probe fails, which is exactly when
// LOCAL_QUORUM writes and LOCAL_SERIAL claims fail. (The old ping read
// system.local at ONE and said SERVING then.)
//
// What it does not prove: it covers one token range. On a cluster with more
// nodes than the replication factor another range can have lost its quorum
// while this one has not, and requests for it fail while health says
// SERVING. It reads: a replica that answers reads but cannot write (disk
// full, commit log failure) passes. And it says nothing of latency under
// load or of paxos contention.
func quorumProbe(s cassandra.Session) func(context.Context) error {
	return func(ctx context.Context) error {
		return s.Query(quorumProbeCQL, quorumProbeVersion).Consistency(gocql.LocalQuorum).ExecContext(ctx)
	}
}
