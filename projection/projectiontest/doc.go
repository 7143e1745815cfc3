// Package projectiontest holds the projection store's contract and the
// in-memory store the unit tests use in its place.
//
// Run is the contract: one suite that runs unchanged against
// projection.Store on the real cluster (e2e/contract_projection_test.go) and
// against Memory (this package's own test). A behaviour the suite does not
// pin down is one a fake may get wrong without anyone noticing, so when the
// real store surprises a test, the surprise becomes a subtest here.
//
// Memory is not a second implementation of the store: it is
// projection.Store, the store's own protocol (which rows a Write and a
// WriteChange write, in what order, at what write time; the normalisation
// of values; what a read makes of the rows), on an in-memory
// projection.Table. So the contract proves that the two tables agree,
// statement by statement:
//
//   - each table is keyed as in cql/ (orders_by_id and
//     order_events_by_order: 0001; orders_by_customer_time: 0005), and
//     every cell keeps the write time of the write that set it: the larger
//     write time wins, so a replay changes nothing and an older write never
//     overwrites a newer one; of two writes at one write time, each cell
//     keeps the larger value, as Cassandra does. A write under another
//     customer, month or creation time (to the millisecond) is another row
//     of the listing;
//
//   - a listing partition's rows come in the table's clustering order:
//     created_at descending, orders of one millisecond by order id (the
//     bytes: Cassandra's order of uuids of one version, which order ids all
//     are); a full page always has a next state;
//
//   - values come back as Cassandra returns them: timestamps in UTC to the
//     millisecond, decimals in inf.Dec's form, no lines in a listing, nil
//     lines for none, null cells as zero values;
//
//   - Arm injects the faults a cassandra.FaultSession injects, by the same
//     statement names, with the same error kinds: a write that is refused
//     (FaultUnavailable) is Unavailable and not applied; a write that times
//     out (FaultTimeout) is OutcomeUnknown and not applied; a write whose
//     response is lost (FaultLoseResponse) is OutcomeUnknown and applied; a
//     read with any fault is Unavailable. A statement run with an ended
//     context fails as a timeout would, without applying.
//
// Page states are opaque and differ between the two tables: only a state
// the same store returned may be passed back. The in-memory table writes
// each row alone: the CQL table's grouping of rows and reads that meet is
// covered by projection's own tests.
//
// This package imports projection, never workflow: workflow's own tests use
// Memory.
package projectiontest
