package cassandra

import "testing"

// The driver binds values only to statements that begin with their verb: a
// statement's name comment must not come first in the text it is given.
func TestDriverTextPutsTheNameLast(t *testing.T) {
	for in, want := range map[string]string{
		"/* ledger.claim */ INSERT INTO t (a) VALUES (?)":    "INSERT INTO t (a) VALUES (?) /* ledger.claim */",
		"  /* queue.due */\n\t\tSELECT a FROM t WHERE b = ?": "SELECT a FROM t WHERE b = ? /* queue.due */",
		"SELECT a FROM t":                 "SELECT a FROM t",
		"/* unterminated SELECT a FROM t": "/* unterminated SELECT a FROM t",
	} {
		got := driverText(in)
		if got != want {
			t.Errorf("driverText(%q) = %q, want %q", in, got, want)
		}
		if again := driverText(in); again != want { // from the cache
			t.Errorf("driverText(%q) the second time = %q, want %q", in, again, want)
		}
		if StatementName(in) != "" && StatementName(got) != "" {
			t.Errorf("driverText(%q) = %q still begins with its name", in, got)
		}
	}
}
