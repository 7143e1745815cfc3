// Package store owns the reference consumer's two tables on Cassandra: the
// inbox, which records each event id once (the exactly-once record), and
// orders, the consumer's own view of each order, which never goes back to an
// older version. Cassandra is the only implementation; storetest holds the
// in-memory fake and the contract both must pass.
//
// What it promises:
//   - RecordEvent writes an event's inbox row at most once, whatever the
//     retries: a lightweight transaction (INSERT ... IF NOT EXISTS at
//     LOCAL_SERIAL) decides, so of any number of concurrent or repeated
//     calls for one event id exactly one reports "first".
//   - UpsertOrder writes a version of an order only over an older one (or
//     none); an equal or newer stored version wins and nothing is written.
//     Calling it again with the same order is a no-op, so it may be re-run
//     after any failure.
//   - A failed write says whether it may have applied (ErrOutcomeUnknown) or
//     certainly did not (ErrNotApplied). Callers must not guess: they run the
//     same call again, and the lightweight transaction's answer then covers
//     whatever the lost attempt did.
//
// Why this is a package of its own under cmd/orderconsumer, which the
// repository's style otherwise keeps to wiring: the e2e suite runs the same
// contract (storetest.Run) against the real tables, so it must import the
// store, and the consumer is meant to be copied as one folder.
package store
