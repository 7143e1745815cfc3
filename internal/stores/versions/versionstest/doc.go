// Package versionstest holds the in-memory versions.Store that unit tests
// use and the contract suite (Run) that it and the store on the CQL table
// (e2e/contract_versions_test.go) are both held to.
//
// Memory is versions.Versions, the store's own protocol, on an in-memory
// versions.Table: one partition per order, each statement atomic (so one
// LWT at a time per order), conditions evaluated as Cassandra evaluates
// them, rows and records written once. Faults armed by statement name
// (versions.StmtApply, ...) are served through cassandra.Served, as a
// FaultSession serves them: Unavailable and Timeout do not apply,
// LoseResponse applies, and the caller sees the driver's error.
package versionstest
