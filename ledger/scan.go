package ledger

import (
	"context"
	"slices"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/cassandra"
)

// scanCQL reads the whole ledger in token order: an operator's listing of
// unfinished requests (ListRequests, orderctl requests), never a request's
// path. The outcome blob is not read; the command is, since a PENDING row
// is resolved from it (workflow.Service.Resolve).
const scanCQL = `/* ledger.scan */ SELECT tenant, operation, request_id, entity_id, payload_hash, command, state,
	created_at, completed_at, attempts, last_error, claim_token FROM write_requests_by_id`

// ScanBudget bounds the ledger rows one Scan reads, matching or not, so a
// call's cost is bounded however few rows match.
const ScanBudget = 2000

// ScanFilter selects the records a Scan returns.
type ScanFilter struct {
	Tenant string
	States []State // the ledger's states; empty: every state
	// Keep, if set, runs on each slice of rows that passed Tenant and
	// States and returns those to keep (it may change them: a PENDING row
	// resolved to COMPLETE). A ledger row's state is not the whole truth:
	// a create's completion writes nothing to the ledger.
	Keep func(context.Context, []Record) ([]Record, error)
}

func (f ScanFilter) match(r Record) bool {
	return r.Tenant == f.Tenant && (len(f.States) == 0 || slices.Contains(f.States, r.State))
}

// ScanPage is one slice of a scan.
type ScanPage struct {
	// Records passed the filter; their Outcome is not read.
	Records []Record
	// NextState is Cassandra's paging state after the last row read, nil
	// when the scan is done. Raw and unauthenticated, like a projection
	// page's (internal/grpcapi signs it into a page token).
	NextState []byte
}

// Scan reads the ledger from state (nil: the start) and returns at most
// limit records that pass f, reading at most ScanBudget rows. It asks
// Cassandra for no more rows than it may still return, so it always stops
// at a page boundary and the next call resumes exactly after the last row
// it read. LOCAL_QUORUM: what an operator sees is what a request's own
// reads would see, short of a claim whose LWT is in flight.
func (c *CassandraStore) Scan(ctx context.Context, f ScanFilter, limit int, state []byte) (ScanPage, error) {
	var page ScanPage
	for read := 0; len(page.Records) < limit && read < ScanBudget; {
		fetch := min(limit-len(page.Records), ScanBudget-read)
		iter := c.s.Query(scanCQL).Consistency(gocql.LocalQuorum).PageSize(fetch).PageState(state).IterContext(ctx)
		var slice []Record
		for {
			r, ok := scanRow(iter)
			if !ok {
				break
			}
			read++
			// A row past its retention whose row marker outlived its cells
			// (expiredRemnant) has no state: it is not listed.
			if r.State != "" && f.match(r) {
				slice = append(slice, r)
			}
		}
		state = iter.PageState()
		if err := iter.Close(); err != nil {
			return ScanPage{}, cassandra.ReadError("scan the ledger", err)
		}
		if f.Keep != nil && len(slice) > 0 {
			var err error
			if slice, err = f.Keep(ctx, slice); err != nil {
				return ScanPage{}, err
			}
		}
		page.Records = append(page.Records, slice...)
		if len(state) == 0 {
			return page, nil // the whole ledger was read
		}
	}
	page.NextState = state
	return page, nil
}

// scanRow reads one row of scanCQL.
func scanRow(iter cassandra.Iter) (Record, bool) {
	var r Record
	var st string
	var requestID, entityID, claimToken gocql.UUID
	var completed time.Time
	if !iter.Scan(&r.Tenant, &r.Operation, &requestID, &entityID, &r.Fingerprint, &r.Command, &st,
		&r.CreatedAt, &completed, &r.Attempts, &r.LastError, &claimToken) {
		return Record{}, false
	}
	r.RequestID, r.EntityID, r.ClaimToken = uuid.UUID(requestID), uuid.UUID(entityID), uuid.UUID(claimToken)
	r.State, r.CreatedAt = State(st), r.CreatedAt.UTC()
	if completed.Unix() > 0 {
		r.CompletedAt = completed.UTC()
	}
	return r, true
}
