// Package ledger owns the request ledger (table write_requests_by_id): a
// request's scoped identity (tenant, operation, request_id), the claim that
// makes one attempt its owner, its state (PENDING, COMPLETE, FAILED), the
// stored command anyone can finish it from, and its recorded outcome.
//
// Every write to the ledger is a lightweight transaction at the session's
// serial consistency (LOCAL_SERIAL; SERIAL with ORDERD_SERIAL_CONSISTENCY=serial):
// the claim is INSERT ... IF NOT EXISTS, every later change is UPDATE ... IF
// state = .... Plain writes never touch these rows (LWT writes carry ballot
// timestamps; mixing them with plain writes can lose updates). Every write
// carries the remaining retention as its TTL so that no cell outlives the row.
//
// A write whose outcome is unknown (timeout, CAS unknown, dropped connection)
// is settled before returning with a serial read at the same level, which completes or
// invalidates any paxos round in flight. The claim stores a per-attempt token
// so that read tells whether this attempt won.
package ledger
