package cassandra

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

func TestParseSerial(t *testing.T) {
	for in, want := range map[string]gocql.Consistency{
		"": gocql.LocalSerial, "local_serial": gocql.LocalSerial, "LOCAL_SERIAL": gocql.LocalSerial,
		"serial": gocql.Serial, " SERIAL ": gocql.Serial,
	} {
		if got, err := ParseSerial(in); err != nil || got != want {
			t.Errorf("ParseSerial(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"quorum", "local_quorum", "each_serial", "x"} {
		if _, err := ParseSerial(in); err == nil {
			t.Errorf("ParseSerial(%q) = nil error, want one", in)
		}
	}
}

// TestSessionSerialConsistency: Config.Serial is the driver session's serial
// consistency (what every LWT runs at, and what Wrap hands the stores for
// their serial reads); unset, it is LOCAL_SERIAL, never the server's SERIAL.
func TestSessionSerialConsistency(t *testing.T) {
	for set, want := range map[gocql.Consistency]gocql.Consistency{
		0: gocql.LocalSerial, gocql.LocalSerial: gocql.LocalSerial, gocql.Serial: gocql.Serial,
	} {
		cluster, err := clusterConfig(Config{Serial: set})
		if err != nil {
			t.Fatalf("clusterConfig(Serial: %v): %v", set, err)
		}
		if cluster.SerialConsistency != want || cluster.Consistency != gocql.LocalQuorum {
			t.Errorf("Serial %v: session at %v / %v, want LOCAL_QUORUM / %v", set, cluster.Consistency, cluster.SerialConsistency, want)
		}
	}
	if _, err := clusterConfig(Config{Serial: gocql.Quorum}); err == nil {
		t.Error("clusterConfig(Serial: QUORUM) = nil error, want one")
	}
	fs := NewFaultSession(&countingSession{ran: map[Stmt]int{}})
	if fs.Serial() != gocql.LocalSerial {
		t.Errorf("FaultSession.Serial() = %v, want the wrapped session's", fs.Serial())
	}
}

// TestNoStoreNamesASerialLevel: the serial consistency has one owner, the
// session (Config.Serial). A store that wrote gocql.LocalSerial or
// gocql.Serial itself would keep its level when orderd is configured for
// the other one (two DCs could then each win the same claim). cmd/orderconsumer
// and its store in internal/tools/orderconsumer (a reference consumer users
// copy, with a session of its own),
// cmd/cassandra-local and cmd/orderbench's pre-issue-10 baseline are not
// orderd's statements.
func TestNoStoreNamesASerialLevel(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	skip := map[string]bool{"internal/platform/cassandra": true, "cmd/orderconsumer": true, "internal/tools/orderconsumer": true, "cmd/cassandra-local": true,
		"cmd/orderbench": true, "e2e": true, "proto": true, "deploy": true}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if skip[filepath.ToSlash(rel)] || strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "gocql" && (sel.Sel.Name == "LocalSerial" || sel.Sel.Name == "Serial") {
				t.Errorf("%s: names gocql.%s; use the session's Serial() (internal/platform/cassandra owns the level)", fset.Position(sel.Pos()), sel.Sel.Name)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
