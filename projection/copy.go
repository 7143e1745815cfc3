package projection

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"golang.org/x/sync/errgroup"
	"gopkg.in/inf.v0"

	"github.com/atlasmart/orderd/internal/platform/cassandra"
)

// ordersByCustomer is the customer listing before migration 0005, keyed by
// order id within a month. Nothing writes or reads it any more but
// CopyListing, which copies it into OrdersByCustomerTime.
const ordersByCustomer = "orders_by_customer"

const (
	// Every group of cells keeps its own write time: the creation's
	// (total, currency, request_id, created_at) carry the claim time, a
	// change's (status, updated_at, version) the creation's write time +
	// the version (ChangeTimestamp). A row written before migration 0004
	// has no version; a row that holds a change's cells only (an instance
	// older than 0005 projected a change onto an order a newer instance
	// created, which wrote no row here) has no creation cells.
	copyReadCQL = `/* projection.copy_listing.read */ SELECT tenant, customer_id, order_month, order_id, created_at,
		total, currency, request_id, status, updated_at, version,
		WRITETIME(total), WRITETIME(status), WRITETIME(version)
		FROM orders_by_customer`
	// A row without created_at (a change's cells only) takes its order's.
	copyCreatedAtCQL = `/* projection.copy_listing.created_at */ SELECT created_at FROM orders_by_id WHERE tenant = ? AND order_id = ?`
	// A row whose cells all carry one write time: one write.
	copyRowCQL = `/* projection.copy_listing.row */ INSERT INTO orders_by_customer_time
		(tenant, customer_id, order_month, created_at, order_id, status, total, currency, request_id, updated_at, version)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	// Otherwise each group apart, at its own write time.
	copyCreationCQL = `/* projection.copy_listing.creation */ INSERT INTO orders_by_customer_time
		(tenant, customer_id, order_month, created_at, order_id, total, currency, request_id)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`
	copyStateCQL = `/* projection.copy_listing.state */ UPDATE orders_by_customer_time SET status = ?, updated_at = ?
		WHERE tenant = ? AND customer_id = ? AND order_month = ? AND created_at = ? AND order_id = ?`
	copyVersionCQL = `/* projection.copy_listing.version */ UPDATE orders_by_customer_time SET version = ?
		WHERE tenant = ? AND customer_id = ? AND order_month = ? AND created_at = ? AND order_id = ?`
)

// CopyConfig tunes CopyListing.
type CopyConfig struct {
	// Concurrency is how many rows are written at once; default 32.
	Concurrency int
	// PageSize is how many rows one read of orders_by_customer returns; default 500.
	PageSize int
	// Log receives progress every 10,000 rows and each row left out; default discards.
	Log *slog.Logger
}

// CopyStats says what CopyListing did.
type CopyStats struct {
	Read    int // rows of orders_by_customer
	Copied  int // rows written to orders_by_customer_time
	Skipped int // rows with no creation time, whose order has no orders_by_id row either
}

// CopyListing copies every row of orders_by_customer into
// orders_by_customer_time, on a session whose keyspace holds both
// (migration 0005 applied). It is `orderd copy-listing`: the one-off step
// of the upgrade to 0005 (docs/operations.md "Upgrading").
//
// Each cell is written USING TIMESTAMP the write time it has in
// orders_by_customer, never an invented one: with every key deterministic
// (created_at is the claim time Write and WriteChange key the row by), a
// copied cell is exactly the cell Write or WriteChange wrote, or will
// write, with the same write time. So the copy is idempotent, may run
// while orderd serves and any number of times, and never overwrites a
// newer cell; a newer one, written before or after it, wins. It writes no
// null (no tombstone): a cell missing in the source stays missing.
//
// A row without created_at (only a change's cells: a change projected by an
// instance older than 0005 onto an order listed only in the new table)
// takes its order's created_at from orders_by_id; without that row it is
// left out and counted in Skipped.
//
// It reads the whole table in one pass; an error ends it (nothing is lost:
// run it again).
func CopyListing(ctx context.Context, s cassandra.Session, cfg CopyConfig) (CopyStats, error) {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 32
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = 500
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	var (
		stats           CopyStats
		copied, skipped atomic.Int64
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cfg.Concurrency)
	iter := s.Query(copyReadCQL).PageSize(cfg.PageSize).IterContext(gctx)
	var r copyRow
	for gctx.Err() == nil && iter.Scan(&r.tenant, &r.customer, &r.month, &r.orderID, &r.createdAt, &r.total, &r.currency, &r.requestID,
		&r.status, &r.updatedAt, &r.version, &r.wtCreation, &r.wtState, &r.wtVersion) {
		stats.Read++
		row := r
		g.Go(func() error {
			ok, err := row.copy(gctx, s)
			if err != nil {
				return err
			}
			if !ok {
				skipped.Add(1)
				cfg.Log.Warn("listing row left out: no creation time, and its order has no orders_by_id row",
					"tenant", row.tenant, "customer_id", row.customer, "order_month", row.month.Format(time.DateOnly), "order_id", row.orderID.String())
				return nil
			}
			copied.Add(1)
			return nil
		})
		if stats.Read%10_000 == 0 {
			cfg.Log.Info("copying the customer listing", "read", stats.Read, "copied", copied.Load())
		}
		r = copyRow{}
	}
	readErr := iter.Close()
	writeErr := g.Wait() // a failed write ends the reading too: report it
	stats.Copied, stats.Skipped = int(copied.Load()), int(skipped.Load())
	if writeErr != nil {
		return stats, writeErr
	}
	if readErr != nil {
		return stats, cassandra.ReadError("read "+ordersByCustomer, readErr)
	}
	return stats, ctx.Err() // the reading stops early when ctx ends
}

// copyRow is one row of orders_by_customer with its write times (µs).
type copyRow struct {
	tenant, customer               string
	month                          time.Time
	orderID, requestID             gocql.UUID
	createdAt, updatedAt           *time.Time
	total                          *inf.Dec
	currency, status               *string
	version                        *int64
	wtCreation, wtState, wtVersion *int64
}

// copy writes r into orders_by_customer_time; false if r has no creation
// time and its order none either.
func (r copyRow) copy(ctx context.Context, s cassandra.Session) (bool, error) {
	created := r.createdAt
	if created == nil {
		var at time.Time
		switch err := s.Query(copyCreatedAtCQL, r.tenant, r.orderID.String()).ScanContext(ctx, &at); {
		case errors.Is(err, gocql.ErrNotFound):
			return false, nil
		case err != nil:
			return false, cassandra.ReadError("read the creation time of order "+r.orderID.String(), err)
		}
		created = &at
	}
	key := []any{r.tenant, r.customer, r.month, *created, r.orderID.String()}
	if r.wtCreation != nil && r.wtState != nil && *r.wtState == *r.wtCreation && (r.wtVersion == nil || *r.wtVersion == *r.wtCreation) {
		return true, r.write(ctx, s, *r.wtCreation, copyRowCQL, append(key,
			orUnset(r.status), r.total, orUnset(r.currency), r.requestID.String(), orUnset(r.updatedAt), orUnset(r.version))...)
	}
	if r.wtCreation != nil {
		if err := r.write(ctx, s, *r.wtCreation, copyCreationCQL, append(key, r.total, orUnset(r.currency), r.requestID.String())...); err != nil {
			return false, err
		}
	}
	if r.wtState != nil {
		if err := r.write(ctx, s, *r.wtState, copyStateCQL, append([]any{orUnset(r.status), orUnset(r.updatedAt)}, key...)...); err != nil {
			return false, err
		}
	}
	if r.wtVersion != nil {
		if err := r.write(ctx, s, *r.wtVersion, copyVersionCQL, append([]any{*r.version}, key...)...); err != nil {
			return false, err
		}
	}
	return true, nil
}

func (r copyRow) write(ctx context.Context, s cassandra.Session, ts int64, stmt string, args ...any) error {
	if err := s.Query(stmt, args...).WithTimestamp(ts).Idempotent(true).ExecContext(ctx); err != nil {
		return cassandra.WriteError(fmt.Sprintf("copy the listing row of order %s", r.orderID), err)
	}
	return nil
}

// orUnset is *v, or gocql.UnsetValue for nil: a missing cell is left
// unwritten, not written as a tombstone.
func orUnset[T any](v *T) any {
	if v == nil {
		return gocql.UnsetValue
	}
	return *v
}
