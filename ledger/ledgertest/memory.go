package ledgertest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/platform/cassandra/memtable"
	"github.com/atlasmart/orderd/ledger"
)

// Config configures a Memory: the store's own settings (same defaults and
// limits as ledger.New) and its clock.
type Config struct {
	ledger.Config
	// Now is the clock that dates writes and expires rows and entries (the
	// cluster's clock, for Requeue); default time.Now. Advance moves the
	// Memory's time on from it.
	Now func() time.Time
}

// Statement is one statement Memory ran or failed, as a FaultSession under
// the CQL table would have seen it.
type Statement struct {
	Name cassandra.Stmt // ledger.StmtClaim, ...
	Key  ledger.Key     // the request it concerns; zero for ledger.StmtDue and ledger.StmtClusterNow
	// Shard and Bucket are the due-queue partition of a queue statement;
	// After and Through the range of due times a ledger.StmtDue read asked for.
	Shard          int
	Bucket         time.Time
	After, Through time.Time
	// Serial: a read at the serial consistency (Get, and the reads that
	// settle an unknown outcome); a Peek's read is not.
	Serial bool
	// Fault is what was served instead of a plain execution; 0 for none.
	Fault cassandra.Fault
	// Applied: the statement ran and, if conditional, its condition held.
	Applied bool
}

// Memory is the ledger on an in-memory table (see the package doc): every
// method of ledger.Ledger is the real one, and what it sent is in the
// table's statement log (Statements), as a cassandra.FaultSession under
// the CQL table would see it. Safe for concurrent use; each statement is
// atomic, an operation of several statements is not, as in the real
// store. Make one with NewMemory.
type Memory struct {
	*ledger.Ledger
	// Faults armed by statement name (ledger.StmtClaim, ...), served as a
	// cassandra.FaultSession serves them: Arm, Hits, Pending.
	*cassandra.Faults
	t *table
}

// NewMemory returns an empty Memory with nothing armed. It panics on a
// Config that ledger.New would refuse. Releases are written at once unless
// cfg sets a ReleaseWindow (nothing in memory gains by waiting).
func NewMemory(cfg Config) *Memory {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ReleaseWindow == 0 {
		cfg.ReleaseWindow = -1
	}
	t := &table{rt: memtable.New(cfg.Now), rows: map[ledger.Key]row{}, entries: map[entryKey]memtable.Expiring[entry]{}}
	cfg.Config.Now = t.rt.Now
	l, err := ledger.New(t, cfg.Config)
	if err != nil {
		panic("ledgertest: " + err.Error())
	}
	return &Memory{Ledger: l, Faults: t.rt.Faults, t: t}
}

// ---------------------------------------------------------------- clock and faults

// Now is the Memory's time: Config.Now plus everything Advance added.
func (m *Memory) Now() time.Time { return m.t.rt.Now() }

// Advance moves the Memory's time on by d (rows and entries whose time is
// up disappear).
func (m *Memory) Advance(d time.Duration) { m.t.rt.Advance(d) }

// SetIntercept makes fn decide, for every statement no armed fault claims,
// which fault it gets (0 for none), knowing what the statement concerns
// (its request, its due-queue partition): a test can fail the reads of one
// request or one bucket alone. fn runs without Memory's lock and may call
// it. nil removes it.
func (m *Memory) SetIntercept(fn func(Statement) cassandra.Fault) {
	if fn == nil {
		m.t.rt.SetIntercept(nil)
		return
	}
	m.t.rt.SetIntercept(func(_ cassandra.Stmt, about any) cassandra.Fault { return fn(about.(Statement)) })
}

// Statements lists the statements run (or failed) so far, in order; only
// those named name unless name is "".
func (m *Memory) Statements(name cassandra.Stmt) []Statement {
	var out []Statement
	for _, l := range m.t.rt.Log(name) {
		st := l.About.(Statement)
		st.Fault, st.Applied = l.Fault, l.Applied
		out = append(out, st)
	}
	return out
}

// ---------------------------------------------------------------- the table

// table is ledger.Table in memory: rows with their TTLs and the due queue,
// each statement atomic, conditions evaluated as Cassandra evaluates them.
// It knows nothing of the protocol (ledger.Ledger runs that on it).
type table struct {
	rt      *memtable.Runtime
	rows    map[ledger.Key]row
	entries map[entryKey]memtable.Expiring[entry]
}

var _ ledger.Table = (*table)(nil)

// row is one ledger row. The claim's INSERT gives the row its marker; every
// write sets every cell that holds a value, with one TTL. A row lives while
// its marker or its cells do; a row whose cells expired before its marker
// reads as a row without a state (a remnant), as Cassandra returns it.
type row struct {
	rec           ledger.Record
	markerExpires time.Time
	cellsExpire   time.Time
}

// entryKey is the primary key of a due-queue entry.
type entryKey struct {
	shard     int
	bucket    int64 // due_bucket, Unix milliseconds
	notBefore int64 // Unix milliseconds
	key       ledger.Key
	token     uuid.UUID
}

// entry is a due-queue row; a done one is a removed entry, as the table
// keeps it (listed by no read).
type entry struct {
	e    ledger.DueEntry
	done bool
}

// exec runs one conditional write as the CQL table's session would
// (memtable.Exec), st telling what it concerns.
func (t *table) exec(ctx context.Context, st Statement, op string, do func(now time.Time) bool) (bool, error) {
	return t.rt.Exec(ctx, st.Name, st, op, true, do)
}

// read and write run a read and an unconditional write the same way.
func (t *table) read(ctx context.Context, st Statement, op string, do func(now time.Time)) error {
	return t.rt.Read(ctx, st.Name, st, op, do)
}

func (t *table) write(ctx context.Context, st Statement, op string, do func(now time.Time)) error {
	return t.rt.Write(ctx, st.Name, st, op, do)
}

func keyStmt(name cassandra.Stmt, key ledger.Key) Statement { return Statement{Name: name, Key: key} }

func entryStmt(name cassandra.Stmt, e ledger.DueEntry) Statement {
	return Statement{Name: name, Key: e.Key, Shard: e.Shard, Bucket: e.Due.UTC()}
}

func cloneRecord(r ledger.Record) ledger.Record {
	r.Command = slices.Clone(r.Command)
	r.Outcome = slices.Clone(r.Outcome)
	return r
}

// stored is rec as the table holds it.
func stored(rec ledger.Record) ledger.Record {
	rec = cloneRecord(rec)
	rec.CreatedAt, rec.CompletedAt = memtable.MS(rec.CreatedAt), memtable.MS(rec.CompletedAt)
	return rec
}

// rowLocked is the row of key as a read returns it, remnants included
// (their cells expired: no state, no fingerprint); ok false if there is
// none (or its time is up).
func (t *table) rowLocked(key ledger.Key, now time.Time) (ledger.Record, bool) {
	r, ok := t.rows[key]
	switch {
	case !ok:
		return ledger.Record{}, false
	case !now.Before(r.markerExpires) && !now.Before(r.cellsExpire):
		delete(t.rows, key)
		return ledger.Record{}, false
	case !now.Before(r.cellsExpire):
		return ledger.Record{Key: key}, true
	}
	return cloneRecord(r.rec), true
}

// rowsLocked is every row as a read returns it, by key; remnants only if
// remnants.
func (t *table) rowsLocked(now time.Time, remnants bool) []ledger.Record {
	var out []ledger.Record
	for k := range t.rows {
		if rec, ok := t.rowLocked(k, now); ok && (remnants || !ledger.Remnant(rec)) {
			out = append(out, rec)
		}
	}
	slices.SortFunc(out, compareRecords)
	return out
}

// liveLocked is rowLocked without remnants.
func (t *table) liveLocked(key ledger.Key, now time.Time) (ledger.Record, bool) {
	rec, ok := t.rowLocked(key, now)
	return rec, ok && !ledger.Remnant(rec)
}

func seconds(ttl int) time.Duration { return time.Duration(ttl) * time.Second }

// InsertClaim implements ledger.Table.
func (t *table) InsertClaim(ctx context.Context, rec ledger.Record, ttl int, _ bool) (bool, ledger.Record, error) {
	var existing ledger.Record
	applied, err := t.exec(ctx, keyStmt(ledger.StmtClaim, rec.Key), "claim request", func(now time.Time) bool {
		if cur, ok := t.rowLocked(rec.Key, now); ok {
			existing = cur
			return false
		}
		rec := stored(rec)
		rec.State, rec.Attempts, rec.CompletedAt, rec.Outcome, rec.LastError = ledger.Pending, 0, time.Time{}, nil, ""
		exp := memtable.ExpiresAt(now, ttl)
		t.rows[rec.Key] = row{rec: rec, markerExpires: exp, cellsExpire: exp}
		return true
	})
	return applied, existing, err
}

// Update implements ledger.Table: the condition on the row as it is (a
// remnant has no state), then every cell rewritten with one TTL, or the row
// deleted.
func (t *table) Update(ctx context.Context, u ledger.Update) (bool, error) {
	key := u.Row.Key
	return t.exec(ctx, keyStmt(ledger.UpdateStatement(u.Kind), key), string(u.Kind)+" request", func(now time.Time) bool {
		cur, ok := t.rowLocked(key, now)
		if !ok || !u.Holds(cur) {
			return false
		}
		if u.Kind == ledger.UpdateWithdraw {
			delete(t.rows, key)
			return true
		}
		r := t.rows[key]
		r.rec, r.cellsExpire = stored(u.Row), memtable.ExpiresAt(now, u.TTL)
		t.rows[key] = r
		return true
	})
}

// Read implements ledger.Table (both consistencies read the one copy).
func (t *table) Read(ctx context.Context, key ledger.Key, serial bool) (ledger.Record, error) {
	var (
		rec   ledger.Record
		found bool
	)
	err := t.read(ctx, Statement{Name: ledger.StmtGet, Key: key, Serial: serial}, "read request", func(now time.Time) {
		rec, found = t.liveLocked(key, now)
	})
	switch {
	case err != nil:
		return ledger.Record{}, err
	case !found:
		return ledger.Record{}, ledger.ErrNotFound
	}
	return rec, nil
}

// ReadMany implements ledger.Table: one statement, named as the single read.
func (t *table) ReadMany(ctx context.Context, tenant, operation string, ids []uuid.UUID) ([]ledger.Record, error) {
	var out []ledger.Record
	err := t.read(ctx, Statement{Name: ledger.StmtGet}, "read request", func(now time.Time) {
		for _, id := range ids {
			if rec, ok := t.liveLocked(ledger.Key{Tenant: tenant, Operation: operation, RequestID: id}, now); ok {
				out = append(out, rec)
			}
		}
	})
	return out, err
}

// ScanChunk implements ledger.Table: rows in key order, the position a
// count of rows read.
func (t *table) ScanChunk(ctx context.Context, from []byte) ([]ledger.Record, []byte, error) {
	skip, _ := binary.Uvarint(from)
	var (
		out   []ledger.Record
		after []byte
	)
	err := t.read(ctx, Statement{Name: ledger.StmtScan}, "scan the ledger", func(now time.Time) {
		all := t.rowsLocked(now, true)
		for i := range all {
			all[i].Outcome = nil // the scan reads no outcome
		}
		end := min(len(all), int(skip)+ledger.ScanChunk)
		out = all[min(len(all), int(skip)):end]
		if end < len(all) {
			after = binary.AppendUvarint(nil, uint64(end))
		}
	})
	return out, after, err
}

// ClusterNow implements ledger.Table: the table's clock is the cluster's.
func (t *table) ClusterNow(ctx context.Context) (time.Time, error) {
	var at time.Time
	err := t.read(ctx, Statement{Name: ledger.StmtClusterNow}, "read the cluster's clock", func(now time.Time) {
		at = memtable.MS(now)
	})
	return at, err
}

func keyOf(e ledger.DueEntry) entryKey {
	return entryKey{shard: e.Shard, bucket: e.Due.UnixMilli(), notBefore: e.NotBefore.UnixMilli(), key: e.Key, token: e.ClaimToken}
}

// storedEntry is e as the table holds it.
func storedEntry(e ledger.DueEntry) ledger.DueEntry {
	e.Due, e.CreatedAt, e.NotBefore = memtable.MS(e.Due), memtable.MS(e.CreatedAt), memtable.MS(e.NotBefore)
	return e
}

// ttlsOf is each entry's TTL, computed before the table's lock is taken
// (the store's clock is the table's).
func ttlsOf(entries []ledger.DueEntry, ttl func(ledger.DueEntry) int) []int {
	out := make([]int, len(entries))
	for i, e := range entries {
		out[i] = ttl(e)
	}
	return out
}

// WriteEntries implements ledger.Table: one statement, whose fault (named
// by the first entry) applies to the whole batch.
func (t *table) WriteEntries(ctx context.Context, entries []ledger.DueEntry, ttl func(ledger.DueEntry) int) error {
	ttls := ttlsOf(entries, ttl)
	return t.write(ctx, entryStmt(ledger.StmtEnqueue, entries[0]), "enqueue pending requests", func(now time.Time) {
		for i, e := range entries {
			k := keyOf(e)
			// The insert writes no done cell, and no owed_order cell for an
			// entry that owes nothing: a removed entry stays removed, an
			// owed one stays owed.
			cur := t.entries[k].V
			if e.Owed == uuid.Nil {
				e.Owed = cur.e.Owed
			}
			t.entries[k] = memtable.Expire(entry{e: storedEntry(e), done: cur.done}, now, ttls[i])
		}
	})
}

// RemoveEntries implements ledger.Table: an upsert of done, creating a
// done row where there was none.
func (t *table) RemoveEntries(ctx context.Context, entries []ledger.DueEntry, ttl func(ledger.DueEntry) int) error {
	ttls := ttlsOf(entries, ttl)
	return t.write(ctx, entryStmt(ledger.StmtRemove, entries[0]), "remove pending entries", func(now time.Time) {
		for i, e := range entries {
			k := keyOf(e)
			r, ok := t.entries[k]
			if !ok {
				r.V.e = storedEntry(e)
			}
			t.entries[k] = memtable.Expire(entry{e: r.V.e, done: true}, now, ttls[i])
		}
	})
}

// ListDue implements ledger.Table.
func (t *table) ListDue(ctx context.Context, shard int, bucket, after, through time.Time) ([]ledger.DueEntry, error) {
	lo, hi := after.UnixMilli(), through.UnixMilli() // bound as the driver binds them
	var out []ledger.DueEntry
	err := t.read(ctx, Statement{Name: ledger.StmtDue, Shard: shard, Bucket: bucket, After: after, Through: through},
		fmt.Sprintf("read due entries of shard %d at %s", shard, bucket.Format(time.RFC3339)), func(now time.Time) {
			out = t.entriesLocked(now, func(k entryKey) bool {
				return k.shard == shard && k.bucket == bucket.UnixMilli() && k.notBefore > lo && k.notBefore <= hi
			})
		})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// entriesLocked lists the live entries not done whose key matches, by due
// time; it forgets those whose time is up.
func (t *table) entriesLocked(now time.Time, match func(entryKey) bool) []ledger.DueEntry {
	var out []ledger.DueEntry
	for k, er := range memtable.Live(t.entries, now) {
		if !er.V.done && match(k) {
			out = append(out, er.V.e)
		}
	}
	slices.SortFunc(out, func(a, b ledger.DueEntry) int {
		return cmp.Or(a.Due.Compare(b.Due), a.NotBefore.Compare(b.NotBefore), compareEntries(a, b))
	})
	return out
}

// DropBucket implements ledger.Table.
func (t *table) DropBucket(ctx context.Context, shard int, bucket time.Time) error {
	return t.write(ctx, Statement{Name: ledger.StmtDropBucket, Shard: shard, Bucket: bucket},
		fmt.Sprintf("drop due bucket of shard %d at %s", shard, bucket.Format(time.RFC3339)), func(time.Time) {
			for k := range t.entries {
				if k.shard == shard && k.bucket == bucket.UnixMilli() {
					delete(t.entries, k)
				}
			}
		})
}

func compareEntries(a, b ledger.DueEntry) int {
	return cmp.Or(
		strings.Compare(a.Tenant, b.Tenant),
		strings.Compare(a.Operation, b.Operation),
		bytes.Compare(a.RequestID[:], b.RequestID[:]),
		bytes.Compare(a.ClaimToken[:], b.ClaimToken[:]),
	)
}

func compareRecords(a, b ledger.Record) int {
	return cmp.Or(strings.Compare(a.Tenant, b.Tenant), strings.Compare(a.Operation, b.Operation),
		bytes.Compare(a.RequestID[:], b.RequestID[:]))
}

// ---------------------------------------------------------------- seeding and inspection

// Put stores rec as the row of its key, as it is (no statement runs, nothing
// is armed or logged, no entry is written), expiring at
// rec.ExpiresAt(Retention) like any row of a claim at rec.CreatedAt. It
// panics on a record the store could not hold: without a state or
// fingerprint, or past its retention.
func (m *Memory) Put(rec ledger.Record) {
	if rec.State == "" || rec.Fingerprint == "" {
		panic(fmt.Sprintf("ledgertest: Put of request %s without a state or fingerprint", rec.RequestID))
	}
	m.seed("Put", rec.RequestID, rec.CreatedAt, func(expires time.Time) {
		m.t.rows[rec.Key] = row{rec: stored(rec), markerExpires: expires, cellsExpire: expires}
	})
}

// PutEntry stores a due-queue entry as it is, in the minute of its
// NotBefore (every writer puts it there; e.Due is ignored), expiring with its
// request's retention. It panics on an entry past it.
func (m *Memory) PutEntry(e ledger.DueEntry) {
	e.Due = ledger.BucketOf(e.NotBefore)
	m.seed("PutEntry", e.RequestID, e.CreatedAt, func(expires time.Time) {
		m.t.entries[keyOf(e)] = memtable.Expiring[entry]{V: entry{e: storedEntry(e)}, Expires: expires}
	})
}

// seed runs put under the table's lock with the expiry a write now gives
// the cells of a request claimed at created; it panics (naming what) if
// that request is past its retention.
func (m *Memory) seed(what string, id uuid.UUID, created time.Time, put func(expires time.Time)) {
	ttl := seconds(m.TTLFrom(created))
	m.t.rt.Locked(func(now time.Time) {
		if !now.Before(created.Add(m.Retention())) {
			panic(fmt.Sprintf("ledgertest: %s of request %s claimed at %s, past its retention at %s", what, id, created, now))
		}
		put(now.Add(ttl))
	})
}

// Delete forgets the row of key, as its TTL would; its entries stay.
func (m *Memory) Delete(key ledger.Key) {
	m.t.rt.Locked(func(time.Time) { delete(m.t.rows, key) })
}

// Record returns the row of key as a read would (false if there is none),
// without running a statement.
func (m *Memory) Record(key ledger.Key) (rec ledger.Record, ok bool) {
	m.t.rt.Locked(func(now time.Time) { rec, ok = m.t.liveLocked(key, now) })
	return rec, ok
}

// Records returns every live row, by key.
func (m *Memory) Records() (out []ledger.Record) {
	m.t.rt.Locked(func(now time.Time) { out = m.t.rowsLocked(now, false) })
	return out
}

// Entries lists the live due-queue entries of key, in any bucket, by due
// time.
func (m *Memory) Entries(key ledger.Key) []ledger.DueEntry {
	return m.entriesWhere(func(k entryKey) bool { return k.key == key })
}

// AllEntries lists every live due-queue entry, by due time.
func (m *Memory) AllEntries() []ledger.DueEntry {
	return m.entriesWhere(func(entryKey) bool { return true })
}

func (m *Memory) entriesWhere(match func(entryKey) bool) (out []ledger.DueEntry) {
	m.t.rt.Locked(func(now time.Time) { out = m.t.entriesLocked(now, match) })
	return out
}
