// Package ledgertest holds the ledger's contract (Run) and the in-memory
// ledger the unit tests of other packages use in its place (Memory).
//
// Run is one suite that runs unchanged against ledger.CassandraStore on the
// real three-node cluster (e2e/contract_ledger_test.go) and against Memory
// (ledger/memory_test.go). A fake earns its place only by passing it: when
// the real store surprises a test, the surprise becomes a subtest here.
//
// Memory answers as CassandraStore does, statement by statement, at the
// level its callers can observe:
//
//   - a claim writes its due entry first (a plain write), then the row
//     (PENDING, attempts 0) if none exists; a claim that lost removes its
//     own entry;
//   - every later change is conditional on the state and on the claim's
//     token, so a record of an earlier claim of the same request id never
//     changes a newer claim; each rewrites every cell of the row with the
//     time left until the claim's expiry instant (CreatedAt + Retention),
//     and rows and entries disappear when their time is up (by Memory's
//     clock: Config.Now, moved on by Advance);
//   - a change whose outcome is unknown is settled as the real store settles
//     it: reads of the row (each one a "ledger.get"), a resend while the row
//     still awaits it (up to SettleAttempts sends, then Unavailable), and an
//     OutcomeUnknown error when the reads fail too;
//   - Arm injects the faults a cassandra.FaultSession injects, by the same
//     statement names, with the same error kinds: a write that is refused
//     (FaultUnavailable) is Unavailable and not applied; a write that times
//     out (FaultTimeout) is OutcomeUnknown and not applied; a write whose
//     response is lost (FaultLoseResponse) is OutcomeUnknown and applied; a
//     read with any fault is Unavailable. A statement run with an ended
//     context fails as a timeout would, without applying;
//   - values come back as Cassandra returns them: timestamps in UTC to the
//     millisecond, "" for a null text, nil for a null blob.
//
// Memory does not pause between settling reads (the real store backs off
// for a few hundred milliseconds): nothing in memory changes by waiting.
package ledgertest
