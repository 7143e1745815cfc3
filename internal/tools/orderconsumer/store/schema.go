package store

import (
	"context"
	"fmt"
	"regexp"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// The tables, created IF NOT EXISTS in the keyspace given to CreateSchema
// (%[1]s): DDL cannot bind a keyspace name, so it is checked (validName)
// before it is put into the text.
const (
	createKeyspaceCQL = `CREATE KEYSPACE IF NOT EXISTS %s
		WITH replication = {'class': 'NetworkTopologyStrategy', '%s': %d}`

	// inbox is the exactly-once record: one row per event id, written once
	// by an LWT. It is never read on the hot path: the LWT's answer is the
	// read.
	createInboxCQL = `CREATE TABLE IF NOT EXISTS %[1]s.inbox (
		event_id uuid PRIMARY KEY,
		order_id uuid,
		order_version bigint,
		event_type text,
		topic text,
		partition int,
		offset bigint,
		occurred_at timestamp,
		applied_at timestamp)`

	// orders is the consumer's view: the newest version of each order seen.
	createOrdersCQL = `CREATE TABLE IF NOT EXISTS %[1]s.orders (
		order_id uuid PRIMARY KEY,
		version bigint,
		tenant text,
		customer_id text,
		status text,
		total text,
		currency text,
		last_event_id uuid,
		updated_at timestamp)`
)

// Cassandra identifiers (keyspaces) and data centre names we accept
// unquoted; anything else is refused rather than escaped.
var (
	validName = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9_]{0,47}$`)
	validDC   = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,64}$`)
)

// CreateSchema creates keyspace (NetworkTopologyStrategy, rf replicas in
// localDC) and its tables if they do not exist, then waits until every node
// has the same schema, so that the first statement on any coordinator finds
// the tables. s must not be bound to keyspace (it may not exist yet).
//
// Several consumers starting at once on an empty keyspace may race their
// CREATE TABLEs; Cassandra 5 can then disagree on a table's id. Start one
// instance first (or create the schema out of band) when deploying the first
// time.
func CreateSchema(ctx context.Context, s *gocql.Session, keyspace, localDC string, rf int) error {
	if !validName.MatchString(keyspace) {
		return fmt.Errorf("keyspace %q: want a letter, then letters, digits or _ (at most 48)", keyspace)
	}
	if !validDC.MatchString(localDC) {
		return fmt.Errorf("data centre %q: want letters, digits, _ . or -", localDC)
	}
	if rf < 1 {
		return fmt.Errorf("replication factor %d: want at least 1", rf)
	}
	stmts := []string{
		fmt.Sprintf(createKeyspaceCQL, keyspace, localDC, rf),
		fmt.Sprintf(createInboxCQL, keyspace),
		fmt.Sprintf(createOrdersCQL, keyspace),
	}
	for _, stmt := range stmts {
		// Each statement refers to what the one before created: wait until
		// every node has it before going on.
		if err := s.Query(stmt).ExecContext(ctx); err != nil {
			return fmt.Errorf("create schema of %s: %w", keyspace, err)
		}
		if err := s.AwaitSchemaAgreement(ctx); err != nil {
			return fmt.Errorf("create schema of %s: wait for schema agreement: %w", keyspace, err)
		}
	}
	return nil
}
