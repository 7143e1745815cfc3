// Package leasestest holds the contract of the reconciler's lease
// coordinator and the in-memory coordinator the unit tests use in its place.
//
// RunCoordinator is the contract: one suite that runs unchanged against
// leases.Leases on the CQL table on the real cluster
// (e2e/contract_coord_test.go) and against MemoryCoordinator (this package's
// own test).
//
// MemoryCoordinator is leases.Leases, the coordinator's own protocol, on an
// in-memory leases.Table. The table holds rows and conditions and nothing
// of the protocol, and answers as Cassandra does, at the level the
// protocol can observe:
//
//   - leases and memberships expire after their TTL (whole seconds, as the
//     protocol rounds them), on the clock it is given; a renew extends a
//     lease from the time it applies;
//   - Arm injects the faults a cassandra.FaultSession injects, by the same
//     statement names ("coord.acquire", "coord.lease", ...), served through
//     cassandra.Served as every in-memory table serves them: a refused
//     write (FaultUnavailable) is an Unavailable error and not applied; a
//     write that times out (FaultTimeout) is not applied and a write whose
//     response is lost (FaultLoseResponse) is applied, both OutcomeUnknown
//     (which the protocol settles for a lease LWT by reading the lease); a
//     read with any fault is Unavailable;
//   - cursors and lease times come back in UTC, to the millisecond.
//
// Cassandra's TTLs are counted in whole seconds from the second a write
// lands, so a lease given n seconds lives between n-1 and n seconds there,
// and in the in-memory table too (memtable counts TTLs the same way); the
// suite asserts a lease is held only right after it was taken and expired
// only after its full TTL, so both tables pass whatever the sub-second.
package leasestest
