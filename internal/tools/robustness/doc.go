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
// Reads may lag a decided write until it is answered (orderd writes the
// order row last, after the claim or version check that decides the
// write): a read may show any version from the newest one answered before
// it was sent (Input.Floor, which the caller fills in) to the decided one.
//
// The package knows no transport: the e2e suite turns gRPC calls and Kafka
// records into Operations and Events.
package robustness
