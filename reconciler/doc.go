// Package reconciler finds requests left PENDING (by a crash, a failed
// projection write, a timeout) and finishes them from what the ledger stored.
//
// It reads the ledger's due queue, never the ledger itself: each pass scans,
// per shard it owns, the due-queue minutes from its cursor up to now, so its
// cost grows with the pending requests and the minutes scanned, not with the
// number of requests ever made (docs/reconciler.md). For each due entry it
// reads the request at LOCAL_SERIAL and
//   - drops the entry if the request is settled, gone, or owned by another
//     attempt's entry;
//   - otherwise finishes it with the same code the handler uses
//     (workflow.Service.Finish), which is safe to race against a live handler
//     or another reconciler;
//   - on failure, reschedules the entry with exponential backoff and jitter,
//     and after MaxAttempts moves the request to FAILED (the dead letter),
//     where GetRequest shows it with its last error until an operator
//     requeues it (orderd requeue).
//
// Several instances split the shards with leases taken by LWT with a TTL;
// each takes its fair share of the live instances it counts, and the shards
// of an instance that died are taken over when its leases expire.
package reconciler
