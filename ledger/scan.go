package ledger

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/platform/cassandra"
)

// scanCQL reads the whole ledger in token order: an operator's listing of
// unfinished requests (ListRequests, orderctl requests), never a request's
// path. The outcome blob is not read; the command is, since a PENDING row
// is resolved from it (workflow.Service.Resolve).
const scanCQL = `/* ledger.scan */ SELECT tenant, operation, request_id, entity_id, payload_hash, command, state,
	created_at, completed_at, attempts, last_error, claim_token FROM write_requests_by_id`

const (
	// ScanBudget bounds the ledger rows one Scan reads, matching or not,
	// so a call's cost is bounded however few rows match.
	ScanBudget = 1000
	// scanChunk is the rows one query reads.
	scanChunk = 200
)

// ScanFilter selects the records a Scan returns.
type ScanFilter struct {
	Tenant string
	States []State // the ledger's states; empty: every state
	// Resolve, if set, runs on each chunk's rows that passed Tenant and
	// States, and may change them (a PENDING row resolved to COMPLETE): a
	// ledger row's state is not the whole truth, since a create's
	// completion writes nothing to the ledger.
	Resolve func(context.Context, []Record) error
	// Keep, if set, is the last word on a resolved row.
	Keep func(Record) bool
}

func (f ScanFilter) match(r Record) bool {
	return r.Tenant == f.Tenant && (len(f.States) == 0 || slices.Contains(f.States, r.State))
}

// ScanPage is one slice of a scan.
type ScanPage struct {
	// Records passed the filter; their Outcome is not read.
	Records []Record
	// Next is where the scan resumes, nil when it is done: raw and
	// unauthenticated, like a projection page's paging state
	// (internal/adapters/grpcapi signs it into a page token).
	Next []byte
}

// scanPosition is where a scan resumes: the paging state of a chunk's
// first row (nil: the ledger's start) and how many of the chunk's rows
// were already read. A page can end inside a chunk this way, so a chunk is
// always a full scanChunk rows (a small page_size does not mean one-row
// queries), and the next call reads the chunk again and skips what was
// read. A row inserted into that stretch meanwhile can shift it by one:
// an operator's listing, not an exact snapshot.
type scanPosition struct {
	chunk []byte
	skip  int
}

func (p scanPosition) encode() []byte {
	return append(binary.AppendUvarint(nil, uint64(p.skip)), p.chunk...)
}

var errScanPosition = errors.New("not a ledger scan position")

func decodeScanPosition(b []byte) (scanPosition, error) {
	if len(b) == 0 {
		return scanPosition{}, nil
	}
	skip, n := binary.Uvarint(b)
	if n <= 0 || skip >= scanChunk {
		return scanPosition{}, errScanPosition
	}
	return scanPosition{skip: int(skip), chunk: b[n:]}, nil
}

// Scan reads the ledger from next (nil: the start; else a ScanPage.Next)
// and returns at most limit records that pass f, reading at most
// ScanBudget rows. LOCAL_QUORUM: what an operator sees is what a request's
// own reads would see, short of a claim whose LWT is in flight.
func (c *CassandraStore) Scan(ctx context.Context, f ScanFilter, limit int, next []byte) (ScanPage, error) {
	pos, err := decodeScanPosition(next)
	if err != nil {
		return ScanPage{}, err
	}
	return scan(ctx, f, limit, pos, c.scanChunk)
}

// resolveWindow is the fewest rows of a chunk one call of f.Resolve gets.
// A chunk is filtered a window at a time and the scan stops as soon as the
// page is full, so a page resolves about the rows it lists, not the rest
// of the chunk the next page reads again: with pages of one, resolving
// whole chunks resolved up to scanChunk rows per page listed.
const resolveWindow = 32

// scan is Scan from pos, reading chunks with read.
func scan(ctx context.Context, f ScanFilter, limit int, pos scanPosition,
	read func(context.Context, []byte) ([]Record, []byte, error)) (ScanPage, error) {
	var page ScanPage
	for budget := ScanBudget; budget > 0; {
		rows, after, err := read(ctx, pos.chunk)
		if err != nil {
			return ScanPage{}, err
		}
		rows = rows[min(pos.skip, len(rows)):]
		budget -= len(rows)
		for start := 0; start < len(rows); {
			end := min(len(rows), start+max(resolveWindow, limit-len(page.Records)))
			keep, err := f.apply(ctx, rows[start:end])
			if err != nil {
				return ScanPage{}, err
			}
			for i, r := range rows[start:end] {
				if !keep[i] {
					continue
				}
				page.Records = append(page.Records, r)
				if len(page.Records) < limit {
					continue
				}
				switch read := start + i + 1; {
				case read < len(rows):
					page.Next = scanPosition{chunk: pos.chunk, skip: pos.skip + read}.encode()
				case len(after) > 0:
					page.Next = scanPosition{chunk: after}.encode()
				}
				return page, nil
			}
			start = end
		}
		if len(after) == 0 {
			return page, nil // the whole ledger was read
		}
		pos = scanPosition{chunk: after}
	}
	page.Next = pos.encode()
	return page, nil
}

// scanChunk reads the scanChunk rows from state and returns the paging
// state after them (nil at the end of the ledger).
func (c *CassandraStore) scanChunk(ctx context.Context, state []byte) ([]Record, []byte, error) {
	iter := c.s.Query(scanCQL).Consistency(gocql.LocalQuorum).PageSize(scanChunk).PageState(state).IterContext(ctx)
	var rows []Record
	for {
		r, ok := scanRow(iter)
		if !ok {
			break
		}
		rows = append(rows, r)
	}
	after := iter.PageState()
	if err := iter.Close(); err != nil {
		return nil, nil, cassandra.ReadError("scan the ledger", err)
	}
	return rows, after, nil
}

// apply says which of rows f keeps, resolving the candidates first.
func (f ScanFilter) apply(ctx context.Context, rows []Record) ([]bool, error) {
	keep := make([]bool, len(rows))
	var candidates []Record
	var at []int
	for i, r := range rows {
		// A row past its retention whose row marker outlived its cells
		// (expiredRemnant) has no state: it is not listed.
		if r.State != "" && f.match(r) {
			candidates, at = append(candidates, r), append(at, i)
		}
	}
	if f.Resolve != nil && len(candidates) > 0 {
		if err := f.Resolve(ctx, candidates); err != nil {
			return nil, err
		}
	}
	for j, r := range candidates {
		rows[at[j]] = r
		keep[at[j]] = f.Keep == nil || f.Keep(r)
	}
	return keep, nil
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
