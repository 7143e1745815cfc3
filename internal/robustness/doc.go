// Package robustness checks what a robustness run observed against what
// orderd promises: a history of calls (each with its invoke and return time
// and its answer) is checked for linearizability against a sequential model
// of the service with porcupine, and the events topic read after the run is
// checked against the acknowledged orders and changes.
//
// The model (model.go) is one order per partition: the order a tenant's
// CreateOrder request id names, with the changes sent to it and the reads of
// it. Per (tenant, request_id) the first accepted command decides: the same
// payload gets the same order, another payload REQUEST_ID_REUSED; a change
// is accepted against expected_version once, and a retry of it answers what
// its first decision answered, for good. An answer that says nothing about
// the outcome (UNAVAILABLE, DEADLINE_EXCEEDED, ...) is an operation that may
// or may not have happened, at any time after it was sent: its return time
// is the end of time and the model lets it apply or not.
//
// Reads may lag a write whose outcome its client never learned (orderd
// writes the order row last, after its version check or claim): the model
// keeps, beside the decided state, the version every read must at least
// show (raised by acknowledged writes and by reads), and a read may show any
// version between that and the decided one.
//
// The package knows no transport: the e2e suite turns gRPC calls and Kafka
// records into Operations and Events.
package robustness
