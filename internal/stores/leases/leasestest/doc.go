// Package leasestest holds the contract of the reconciler's lease
// coordinator and the in-memory coordinator the unit tests use in its place.
//
// RunCoordinator is the contract: one suite that runs unchanged against
// leases.CassandraCoordinator on the real cluster
// (e2e/contract_coord_test.go) and against MemoryCoordinator (this package's
// own test).
//
// MemoryCoordinator answers as CassandraCoordinator does, at the level its
// callers can observe:
//
//   - leases and memberships expire after their TTL in whole seconds (at
//     least one), as Cassandra's TTLs do, on the clock it is given; a renew
//     extends a lease from the time it applies;
//   - Arm injects the faults a cassandra.FaultSession injects, by the same
//     statement names ("coord.acquire", "coord.lease", ...), with the same
//     results: a refused write (FaultUnavailable) is an Unavailable error and
//     not applied; a write that times out (FaultTimeout) is not applied and a
//     write whose response is lost (FaultLoseResponse) is applied, and for
//     both a plain write answers OutcomeUnknown while a lease LWT settles the
//     outcome by reading the lease ("coord.lease"), so it answers what the
//     lease shows, or, when that read fails too, OutcomeUnknown and "not
//     held"; a read with any fault is Unavailable;
//   - cursors come back in UTC, to the millisecond.
//
// Cassandra's TTLs are counted in whole seconds from the second a write
// lands, so a lease given n seconds lives between n-1 and n seconds there;
// the suite asserts a lease is held only right after it was taken and
// expired only after its full TTL, so both stores pass.
//
// MemoryCoordinator settles its lease LWTs with the coordinator's own
// leases.LeaseWrite through lwt.Do, and serves faults through
// cassandra.Served, as every in-memory table does.
package leasestest
