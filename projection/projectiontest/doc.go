// Package projectiontest holds the projection store's contract and the
// in-memory store the unit tests use in its place.
//
// Run is the contract: one suite that runs unchanged against
// projection.Store on the real cluster (e2e/contract_projection_test.go) and
// against Memory (this package's own test). A behaviour the suite does not
// pin down is one a fake may get wrong without anyone noticing, so when the
// real store surprises a test, the surprise becomes a subtest here.
//
// Memory answers as projection.Store does, at the level its callers can
// observe:
//
//   - each table is an upsert keyed as in cql/ (orders_by_id and
//     order_events_by_order: 0001; orders_by_customer_time: 0005); the write
//     with the larger timestamp (the order's CreatedAt, to the microsecond)
//     wins, so a replay changes nothing and an older write never overwrites
//     a newer one; a newer write under another customer, month or creation
//     time (to the millisecond) adds a row to that listing and leaves the
//     old one (a different primary key);
//
//   - a listing comes newest first: created_at descending, orders of one
//     millisecond by order id (the bytes: Cassandra's order of uuids of one
//     version, which order ids all are); a row that holds a change's cells
//     but not its creation's is not listed;
//
//   - values come back as Cassandra returns them: timestamps in UTC to the
//     millisecond, decimals in inf.Dec's form, no lines in a listing, nil
//     lines for none;
//
//   - orders_by_id is written last, and only once the other two are
//     confirmed: a failure in either leaves it unwritten;
//
//   - Arm injects the faults a cassandra.FaultSession injects, by the same
//     statement names, with the same error kinds: a write that is refused
//     (FaultUnavailable) is Unavailable and not applied; a write that times
//     out (FaultTimeout) is OutcomeUnknown and not applied; a write whose
//     response is lost (FaultLoseResponse) is OutcomeUnknown and applied; a
//     read with any fault is Unavailable.
//
//   - two writes of a change's cells at one timestamp (one version) with
//     different values resolve as Cassandra resolves them: cell by cell,
//     the larger value, whichever landed last. The protocol never writes
//     such a pair (every finisher projects the change its version row
//     holds), but a store that resolved them otherwise would hide it if it
//     did.
//
// Page states are opaque and differ between the two stores: only a state
// the same store returned may be passed back.
//
// This package imports projection, never workflow: workflow's own tests use
// Memory.
package projectiontest
