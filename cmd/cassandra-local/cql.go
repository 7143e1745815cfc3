package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// runCQL is a small stand-in for cqlsh (which needs Python and is not in
// Maven Central): it runs each statement at LOCAL_QUORUM / LOCAL_SERIAL and
// prints any rows as a table.
func runCQL(ctx context.Context, hosts []string, args []string) error {
	cluster := gocql.NewCluster(hosts...)
	cluster.Consistency = gocql.LocalQuorum
	cluster.SerialConsistency = gocql.LocalSerial
	session, err := cluster.CreateSession()
	if err != nil {
		return fmt.Errorf("connect to %v: %w", hosts, err)
	}
	defer session.Close()

	stmts := args
	if len(args) == 0 {
		stmts, err = readStatements()
		if err != nil {
			return err
		}
	}
	for _, stmt := range stmts {
		if err := execCQL(ctx, session, stmt); err != nil {
			return err
		}
	}
	return nil
}

func readStatements() ([]string, error) {
	var stmts []string
	var cur strings.Builder
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "--") {
			continue
		}
		cur.WriteString(line + " ")
		if strings.HasSuffix(line, ";") {
			stmts = append(stmts, cur.String())
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		stmts = append(stmts, s)
	}
	return stmts, sc.Err()
}

func execCQL(ctx context.Context, s *gocql.Session, stmt string) error {
	stmt = strings.TrimSuffix(strings.TrimSpace(stmt), ";")
	iter := s.Query(stmt).IterContext(ctx)
	cols := iter.Columns()
	if len(cols) > 0 {
		w := tabwriter.NewWriter(os.Stdout, 0, 2, 2, ' ', 0)
		for i, c := range cols {
			if i > 0 {
				fmt.Fprint(w, "\t")
			}
			fmt.Fprint(w, c.Name)
		}
		fmt.Fprintln(w)
		for {
			row := map[string]any{}
			if !iter.MapScan(row) {
				break
			}
			for i, c := range cols {
				if i > 0 {
					fmt.Fprint(w, "\t")
				}
				fmt.Fprint(w, formatValue(row[c.Name]))
			}
			fmt.Fprintln(w)
		}
		w.Flush()
	}
	if err := iter.Close(); err != nil {
		return fmt.Errorf("%s: %w", stmt, err)
	}
	return nil
}

func formatValue(v any) string {
	if p, ok := v.(fmt.Stringer); ok && p != nil {
		return p.String()
	}
	return fmt.Sprint(v)
}
