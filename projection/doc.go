// Package projection owns the read tables an order is projected into:
// orders_by_customer_time (the customer listing, newest first; migration
// 0005), orders_by_id and order_events_by_order. There is one writer per
// table and every write is safe to replay:
//
//   - primary keys are deterministic (order id from tenant and request id,
//     event id = request id, the listing's created_at = the claim time), so
//     a replay hits the same row;
//   - every value comes from the order, which derives from the ledger row, so
//     a replay writes the same values;
//   - every write is USING TIMESTAMP the claim time, so a replay never
//     overwrites a later change to the same cells (a later status change
//     carries a later timestamp);
//   - writes are plain LOCAL_QUORUM upserts marked idempotent (the driver may
//     retry them), never one logged batch across partitions. The rows of
//     one table from orders written at the same moment are group-committed
//     (Config.Batch, internal/platform/groupcommit): an unlogged batch of that
//     table's upsert, each row with its own write time, which a failure
//     fails for every order in it (docs/architecture.md, "Group-committed
//     projection rows and grouped reads"). Reads by id that meet share one
//     query likewise.
//
// The listing before 0005, orders_by_customer (keyed by order id, so a
// month's page came back in no useful order), is neither written nor read
// by orderd; CopyListing (`orderd copy-listing`, the upgrade's one-off step)
// copies it into orders_by_customer_time, every cell with the write time it
// has there, so that it writes only what Write and WriteChange wrote or
// would write: it is not a second writer with values of its own.
//
// Store is the protocol (which rows an order and a change write, in what
// order, at what write time; what a read makes of the rows) on a Table,
// one method per statement: the CQL table (cql.go, which also groups the
// rows and reads that meet) in production, projectiontest's in-memory
// table in unit tests.
package projection
