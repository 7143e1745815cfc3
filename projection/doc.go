// Package projection owns the read tables an order is projected into:
// orders_by_customer, orders_by_id and order_events_by_order. There is one
// writer per table and every write is safe to replay:
//
//   - primary keys are deterministic (order id from tenant and request id,
//     event id = request id), so a replay hits the same row;
//   - every value comes from the order, which derives from the ledger row, so
//     a replay writes the same values;
//   - every write is USING TIMESTAMP the claim time, so a replay never
//     overwrites a later change to the same cells (a later status change
//     carries a later timestamp);
//   - writes are plain LOCAL_QUORUM upserts marked idempotent (the driver may
//     retry them), issued concurrently, never one logged batch across
//     partitions.
package projection
