// Package ledgertest holds the ledger's contract (Run) and the in-memory
// ledger the unit tests of other packages use in its place (Memory).
//
// Run is one suite that runs unchanged against the ledger on the real
// three-node cluster (e2e/contract_ledger_test.go) and against Memory
// (ledger/memory_test.go). When the real store surprises a test, the
// surprise becomes a subtest here.
//
// Memory is not a second implementation of the ledger: it is ledger.Ledger,
// the store's own protocol (claims after their entries, unknown outcomes
// settled by reads, bounded resends, lwt.Do), on an in-memory ledger.Table.
// So the contract proves that the two tables agree, statement by
// statement:
//
//   - a claim inserts the row (PENDING, attempts 0) if none exists; every
//     later update is conditional on the row's state and claim token (and,
//     for an attempt, its attempts) and rewrites every cell with the time
//     left until the claim's expiry instant; rows and entries disappear
//     when their time is up (by Memory's clock: Config.Now, moved on by
//     Advance), and a row whose cells expired before its marker is a
//     remnant, as Cassandra keeps it;
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
// The table keeps one copy of each row, so both consistencies read the
// same thing; releases are written at once unless the Config sets a window.
package ledgertest
