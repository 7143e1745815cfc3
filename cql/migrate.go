package cql

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/platform/lwt"
)

// Session is what the migrator needs of a connection: statements (through
// the seam a FaultSession can wrap) and the driver's schema agreement wait.
type Session interface {
	cassandra.Session
	AwaitSchemaAgreement(ctx context.Context) error
}

//go:embed *.cql
var files embed.FS

var (
	fileName   = regexp.MustCompile(`^(\d{4})_([a-z0-9_]+)\.cql$`)
	identifier = regexp.MustCompile(`^[a-z][a-z0-9_]{0,47}$`)
)

// Config says where the schema goes.
type Config struct {
	// Keyspace name; default orderd.
	Keyspace string
	// DataCenter whose replication is set; default dc1.
	DataCenter string
	// ReplicationFactor in DataCenter; default 3 (1 for a one-node dev cluster).
	ReplicationFactor int
	// Log receives one line per applied version; default discards.
	Log *slog.Logger
	// LeaseTTL is how long the migration lease outlives a migrator that
	// stopped without releasing it; a run renews it every quarter of this
	// while it lasts. Default 2 minutes; at least 4 seconds.
	LeaseTTL time.Duration
}

func (c Config) withDefaults() (Config, error) {
	if c.Keyspace == "" {
		c.Keyspace = "orderd"
	}
	if c.DataCenter == "" {
		c.DataCenter = "dc1"
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = 3
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = 2 * time.Minute
	}
	if c.LeaseTTL < 4*time.Second {
		return c, fmt.Errorf("migration lease TTL must be at least 4s, got %s", c.LeaseTTL)
	}
	if c.Log == nil {
		c.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if !identifier.MatchString(c.Keyspace) {
		return c, fmt.Errorf("keyspace %q: use lower-case letters, digits and _ (at most 48, starting with a letter)", c.Keyspace)
	}
	if !regexp.MustCompile(`^[A-Za-z0-9_-]+$`).MatchString(c.DataCenter) {
		return c, fmt.Errorf("data centre name %q is not valid", c.DataCenter)
	}
	if c.ReplicationFactor < 1 {
		return c, fmt.Errorf("replication factor must be at least 1, got %d", c.ReplicationFactor)
	}
	return c, nil
}

// Version is one schema file.
type Version struct {
	Number     int
	Name       string
	Checksum   string
	Statements []string
}

// Result says what a migration did.
type Result struct {
	Applied []int // versions applied by this run
	Current int   // highest version recorded after the run
}

// The migrator's statements, by the names they give themselves in a
// leading comment (cassandra.StatementName); the DDL and the schema reads
// have none.
const (
	StmtApplied   cassandra.Stmt = "migrate.applied"
	StmtRecord    cassandra.Stmt = "migrate.record"
	StmtLock      cassandra.Stmt = "migrate.lock"
	StmtLockOwner cassandra.Stmt = "migrate.lock_owner"
	StmtRenew     cassandra.Stmt = "migrate.renew"
	StmtRelease   cassandra.Stmt = "migrate.release"
)

// Statements names every named statement the migrator runs.
var Statements = []cassandra.Stmt{StmtApplied, StmtRecord, StmtLock, StmtLockOwner, StmtRenew, StmtRelease}

const (
	createKeyspace = `CREATE KEYSPACE IF NOT EXISTS %s WITH replication = {'class': 'NetworkTopologyStrategy', '%s': %d}`
	// schema_migrations and schema_lock are written only with LWTs.
	createMigrations = `CREATE TABLE IF NOT EXISTS %s.schema_migrations (
    version int PRIMARY KEY, name text, checksum text, applied_at timestamp)`
	createLock = `CREATE TABLE IF NOT EXISTS %s.schema_lock (
    id text PRIMARY KEY, owner uuid, taken_at timestamp)`

	selectKeyspace   = `SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = ?`
	selectTable      = `SELECT table_name FROM system_schema.tables WHERE keyspace_name = ? AND table_name = ?`
	selectApplied    = `/* ` + string(StmtApplied) + ` */ SELECT version, checksum FROM %s.schema_migrations`
	insertApplied    = `/* ` + string(StmtRecord) + ` */ INSERT INTO %s.schema_migrations (version, name, checksum, applied_at) VALUES (?, ?, ?, ?) IF NOT EXISTS`
	takeLock         = `/* ` + string(StmtLock) + ` */ INSERT INTO %s.schema_lock (id, owner, taken_at) VALUES ('migrate', ?, ?) IF NOT EXISTS USING TTL ?`
	lockOwner        = `/* ` + string(StmtLockOwner) + ` */ SELECT owner, taken_at FROM %s.schema_lock WHERE id = 'migrate'`
	renewLock        = `/* ` + string(StmtRenew) + ` */ UPDATE %s.schema_lock USING TTL ? SET owner = ?, taken_at = ? WHERE id = 'migrate' IF owner = ?`
	releaseLock      = `/* ` + string(StmtRelease) + ` */ DELETE FROM %s.schema_lock WHERE id = 'migrate' IF owner = ?`
	lockWait         = 2 * time.Second
	ddlAttempts      = 4
	lockMaxWaitTotal = 3 * time.Minute
)

// Versions parses the embedded schema files for keyspace, in order.
func Versions(keyspace string) ([]Version, error) {
	entries, err := files.ReadDir(".")
	if err != nil {
		return nil, err
	}
	var out []Version
	for _, e := range entries {
		m := fileName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("schema file %s: name must be NNNN_name.cql", e.Name())
		}
		raw, err := files.ReadFile(e.Name())
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(raw)
		var buf bytes.Buffer
		tmpl, err := template.New(e.Name()).Option("missingkey=error").Parse(string(raw))
		if err != nil {
			return nil, fmt.Errorf("schema file %s: %w", e.Name(), err)
		}
		if err := tmpl.Execute(&buf, map[string]string{"Keyspace": keyspace}); err != nil {
			return nil, fmt.Errorf("schema file %s: %w", e.Name(), err)
		}
		n, _ := strconv.Atoi(m[1])
		if len(out) > 0 && out[len(out)-1].Number == n {
			return nil, fmt.Errorf("schema version %d appears twice", n)
		}
		out = append(out, Version{Number: n, Name: m[2], Checksum: hex.EncodeToString(sum[:8]), Statements: splitStatements(buf.String())})
	}
	slices.SortFunc(out, func(a, b Version) int { return a.Number - b.Number })
	return out, nil
}

// splitStatements splits a file on ';' at line ends, dropping '--' comments.
func splitStatements(src string) []string {
	var stmts []string
	var cur strings.Builder
	for _, line := range strings.Split(src, "\n") {
		if i := strings.Index(line, "--"); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimRight(line, " \t\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		cur.WriteString(line + "\n")
		if strings.HasSuffix(line, ";") {
			stmts = append(stmts, strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"))
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		stmts = append(stmts, s)
	}
	return stmts
}

// Migrate brings keyspace cfg.Keyspace to the newest version. It is
// idempotent: with everything applied it issues no DDL at all.
func Migrate(ctx context.Context, s Session, cfg Config) (Result, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return Result{}, err
	}
	versions, err := Versions(cfg.Keyspace)
	if err != nil {
		return Result{}, err
	}
	if err := ensureBookkeeping(ctx, s, cfg); err != nil {
		return Result{}, err
	}
	applied, err := appliedVersions(ctx, s, cfg.Keyspace, versions)
	if err != nil {
		return Result{}, err
	}
	res := Result{Current: maxKey(applied)}
	if len(applied) == len(versions) {
		return res, nil
	}
	l, err := takeLease(ctx, s, cfg.Keyspace, cfg.LeaseTTL)
	if err != nil {
		return res, err
	}
	defer l.release(ctx)
	held := l.keep(ctx)
	// Another migrator may have finished while we waited for the lease.
	if applied, err = appliedVersions(held, s, cfg.Keyspace, versions); err != nil {
		return res, leaseCause(held, err)
	}
	for _, v := range versions {
		if _, done := applied[v.Number]; done {
			continue
		}
		for _, stmt := range v.Statements {
			if err := execDDL(held, s, stmt); err != nil {
				return res, fmt.Errorf("schema version %04d_%s: %w", v.Number, v.Name, leaseCause(held, err))
			}
		}
		if err := record(held, s, cfg.Keyspace, v, versions); err != nil {
			return res, fmt.Errorf("record schema version %d: %w", v.Number, leaseCause(held, err))
		}
		cfg.Log.Info("applied schema version", "keyspace", cfg.Keyspace, "version", v.Number, "name", v.Name)
		res.Applied = append(res.Applied, v.Number)
		res.Current = v.Number
	}
	return res, nil
}

// leaseCause is err, or the reason the run's lease ended if it ended (a
// statement cut short by a lost lease fails with the context's error).
func leaseCause(held context.Context, err error) error {
	if cause := context.Cause(held); cause != nil && !errors.Is(err, cause) {
		return fmt.Errorf("%w: %w", cause, err)
	}
	return err
}

// ensureBookkeeping creates the keyspace and the migrator's own tables when
// they are missing, checking first so that a migrated cluster sees no DDL.
func ensureBookkeeping(ctx context.Context, s Session, cfg Config) error {
	var name string
	err := s.Query(selectKeyspace, cfg.Keyspace).ScanContext(ctx, &name)
	switch {
	case errors.Is(err, gocql.ErrNotFound):
		if err := execDDL(ctx, s, fmt.Sprintf(createKeyspace, cfg.Keyspace, cfg.DataCenter, cfg.ReplicationFactor)); err != nil {
			return fmt.Errorf("create keyspace %s: %w", cfg.Keyspace, err)
		}
		cfg.Log.Info("created keyspace", "keyspace", cfg.Keyspace, "dc", cfg.DataCenter, "replication_factor", cfg.ReplicationFactor)
	case err != nil:
		return fmt.Errorf("look up keyspace %s: %w", cfg.Keyspace, err)
	}
	for table, ddl := range map[string]string{"schema_migrations": createMigrations, "schema_lock": createLock} {
		err := s.Query(selectTable, cfg.Keyspace, table).ScanContext(ctx, &name)
		if errors.Is(err, gocql.ErrNotFound) {
			err = execDDL(ctx, s, fmt.Sprintf(ddl, cfg.Keyspace))
		}
		if err != nil {
			return fmt.Errorf("create %s.%s: %w", cfg.Keyspace, table, err)
		}
	}
	return nil
}

// record notes v as applied. The insert is an LWT: an unknown outcome is
// settled by reading the versions back at LOCAL_SERIAL (re-sent if absent;
// it is IF NOT EXISTS, so re-sending is safe).
func record(ctx context.Context, s Session, keyspace string, v Version, versions []Version) error {
	_, err := lwt.Do(ctx, lwt.Write[bool]{
		Op: "record schema version",
		Send: func(ctx context.Context) (bool, bool, error) {
			// Not applied: another migrator recorded v first, which is as good.
			_, err := s.Query(fmt.Sprintf(insertApplied, keyspace), v.Number, v.Name, v.Checksum, time.Now().UTC()).
				SerialConsistency(s.Serial()).MapScanCASContext(ctx, map[string]any{})
			return true, false, cassandra.WriteError("record schema version", err)
		},
		Read: func(ctx context.Context) (bool, error) {
			applied, err := appliedVersions(ctx, s, keyspace, versions)
			_, recorded := applied[v.Number]
			return recorded, err
		},
		Applied: func(recorded bool) bool { return recorded },
		Awaits:  func(recorded bool) bool { return !recorded }, // IF NOT EXISTS: safe to send again
		Sends:   ddlAttempts,
	})
	return err
}

// appliedVersions reads the recorded versions at LOCAL_SERIAL (the table is
// written only with LWTs; a serial read also finishes any in flight).
func appliedVersions(ctx context.Context, s cassandra.Session, keyspace string, versions []Version) (map[int]string, error) {
	applied := map[int]string{}
	iter := s.Query(fmt.Sprintf(selectApplied, keyspace)).Consistency(s.Serial()).IterContext(ctx)
	var (
		v   int
		sum string
	)
	for iter.Scan(&v, &sum) {
		applied[v] = sum
	}
	if err := iter.Close(); err != nil {
		// Unavailable when the cluster did not answer (a timeout, no
		// host); Internal when the statement itself was refused (no
		// schema_migrations table: a keyspace never migrated).
		return nil, cassandra.ReadError("read applied schema versions", err)
	}
	for _, ver := range versions {
		if sum, ok := applied[ver.Number]; ok && sum != ver.Checksum {
			return nil, fmt.Errorf("schema version %04d_%s was edited after it was applied (checksum %s, applied %s): add a new version instead", ver.Number, ver.Name, ver.Checksum, sum)
		}
	}
	return applied, nil
}

// Check returns an error unless every version this binary knows is applied
// to keyspace. orderd serves (and reconciles) only on a fully migrated
// keyspace: a version half applied and then re-run must not find requests
// written in between (0002 re-run would move every reconciler cursor past
// their due entries).
//
// An error of kind fault.Unavailable means the cluster did not answer the
// read (a timeout, no host): the keyspace may well be migrated, and asking
// again later can pass. Any other error names what is wrong with the
// keyspace (not migrated, behind, a version edited after it was applied).
func Check(ctx context.Context, s cassandra.Session, keyspace string) error {
	versions, err := Versions(keyspace)
	if err != nil {
		return err
	}
	applied, err := appliedVersions(ctx, s, keyspace, versions)
	switch {
	case fault.KindOf(err) == fault.Unavailable:
		// The cluster did not answer: migrating would not help.
		return fmt.Errorf("keyspace %s: %w", keyspace, err)
	case err != nil:
		return fmt.Errorf("keyspace %s: %w (run `orderd migrate`)", keyspace, err)
	}
	var missing []string
	for _, v := range versions {
		if _, ok := applied[v.Number]; !ok {
			missing = append(missing, fmt.Sprintf("%04d_%s", v.Number, v.Name))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("keyspace %s lacks schema versions %s: run `orderd migrate` first", keyspace, strings.Join(missing, ", "))
	}
	return nil
}

// execDDL runs one idempotent DDL statement (IF NOT EXISTS) and waits for
// schema agreement. Just after a node restarts, the cluster may still be
// exchanging schema and refuse DDL (e.g. "Unknown CF"): it waits for
// agreement and tries again, a few times.
func execDDL(ctx context.Context, s Session, stmt string) error {
	var err error
	for attempt := 1; attempt <= ddlAttempts; attempt++ {
		if err = s.AwaitSchemaAgreement(ctx); err != nil {
			err = fmt.Errorf("wait for schema agreement: %w", err)
		} else if err = s.Query(stmt).ExecContext(ctx); err == nil {
			if err = s.AwaitSchemaAgreement(ctx); err != nil {
				return fmt.Errorf("wait for schema agreement: %w", err)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt) * 2 * time.Second):
		}
	}
	return err
}

func maxKey(m map[int]string) int {
	best := 0
	for k := range m {
		best = max(best, k)
	}
	return best
}
