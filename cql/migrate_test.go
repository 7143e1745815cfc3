package cql

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

const ordersFile = "0001_orders.cql"

var (
	hex16      = regexp.MustCompile(`^[0-9a-f]{16}$`)
	createLine = regexp.MustCompile(`(?m)^\s*CREATE\s`)
	// The object a statement creates, qualified with the keyspace.
	createdObject = regexp.MustCompile(`^CREATE (?:TABLE|TYPE) IF NOT EXISTS ([a-z][a-z0-9_]*)\.([a-z][a-z0-9_]*) \(`)
)

func TestVersions(t *testing.T) {
	versions, err := Versions("orderd")
	if err != nil {
		t.Fatalf("Versions: %v", err)
	}
	if len(versions) == 0 {
		t.Fatal("Versions returned no version")
	}
	v := versions[0]
	if v.Number != 1 || v.Name != "orders" {
		t.Fatalf("first version = %d %q, want 1 \"orders\"", v.Number, v.Name)
	}
	if !hex16.MatchString(v.Checksum) {
		t.Errorf("checksum %q is not 16 lower-case hex characters", v.Checksum)
	}

	raw, err := files.ReadFile(ordersFile)
	if err != nil {
		t.Fatalf("read embedded %s: %v", ordersFile, err)
	}
	wantStatements := len(createLine.FindAllString(string(raw), -1))
	if wantStatements == 0 {
		t.Fatalf("%s holds no CREATE statement", ordersFile)
	}
	if len(v.Statements) != wantStatements {
		t.Errorf("got %d statements, want %d (one per CREATE in %s):\n%s",
			len(v.Statements), wantStatements, ordersFile, strings.Join(v.Statements, "\n----\n"))
	}

	// Every piece of comment text in the file must be gone from the statements.
	var comments []string
	for line := range strings.SplitSeq(string(raw), "\n") {
		if _, c, ok := strings.Cut(line, "--"); ok {
			if c = strings.TrimSpace(c); c != "" {
				comments = append(comments, c)
			}
		}
	}
	if len(comments) == 0 {
		t.Fatalf("%s has no comments: the comment checks below test nothing", ordersFile)
	}

	var created []string
	for i, s := range v.Statements {
		if !strings.HasPrefix(s, "CREATE ") {
			t.Errorf("statement %d does not start with CREATE: %q", i, s)
		}
		if strings.Contains(s, "{{") || strings.Contains(s, "}}") {
			t.Errorf("statement %d still holds template text: %q", i, s)
		}
		if strings.HasSuffix(strings.TrimSpace(s), ";") {
			t.Errorf("statement %d ends with ';': %q", i, s)
		}
		if strings.Contains(s, "--") {
			t.Errorf("statement %d holds a '--' comment: %q", i, s)
		}
		for _, c := range comments {
			if strings.Contains(s, c) {
				t.Errorf("statement %d holds comment text %q", i, c)
			}
		}
		m := createdObject.FindStringSubmatch(s)
		if m == nil {
			t.Errorf("statement %d does not create a keyspace-qualified object: %q", i, s)
			continue
		}
		if m[1] != "orderd" {
			t.Errorf("statement %d creates %s.%s, want keyspace orderd", i, m[1], m[2])
		}
		created = append(created, m[2])
	}
	for _, name := range []string{"write_requests_by_id", "order_line", "orders_by_customer", "orders_by_id", "order_events_by_order"} {
		if !slices.Contains(created, name) {
			t.Errorf("no statement creates orderd.%s (created: %v)", name, created)
		}
	}

	// Stable across calls, and independent of the keyspace (it sums the file).
	again, err := Versions("orderd")
	if err != nil {
		t.Fatalf("second Versions: %v", err)
	}
	if again[0].Checksum != v.Checksum || !slices.Equal(again[0].Statements, v.Statements) {
		t.Errorf("second call differs: checksum %s vs %s", again[0].Checksum, v.Checksum)
	}
	other, err := Versions("other_ks")
	if err != nil {
		t.Fatalf("Versions(other_ks): %v", err)
	}
	if other[0].Checksum != v.Checksum {
		t.Errorf("checksum depends on the keyspace: %s vs %s", other[0].Checksum, v.Checksum)
	}
	for i, s := range other[0].Statements {
		if m := createdObject.FindStringSubmatch(s); m == nil || m[1] != "other_ks" {
			t.Errorf("Versions(other_ks) statement %d not qualified with other_ks: %q", i, s)
		}
	}

	for i := 1; i < len(versions); i++ {
		if versions[i].Number <= versions[i-1].Number {
			t.Errorf("versions out of order: %d after %d", versions[i].Number, versions[i-1].Number)
		}
	}
}

func TestSplitStatements(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{name: "empty", src: "", want: nil},
		{name: "only comments and blanks", src: "-- a\n\n   \n-- b;\n\t\n", want: nil},
		{name: "one statement", src: "CREATE TABLE t (a int);\n", want: []string{"CREATE TABLE t (a int)"}},
		{
			name: "multiple statements",
			src:  "CREATE TABLE a (x int);\nCREATE TABLE b (y int);\nCREATE TYPE c (z int);\n",
			want: []string{"CREATE TABLE a (x int)", "CREATE TABLE b (y int)", "CREATE TYPE c (z int)"},
		},
		{
			name: "multi-line with comments at line ends",
			src:  "CREATE TABLE t (   -- the table\n    a int,  -- first\n    b text  -- second\n);  -- done\n",
			want: []string{"CREATE TABLE t (\n    a int,\n    b text\n)"},
		},
		{
			name: "comments on their own lines and blank lines",
			src:  "-- header\n\n-- more header\nCREATE TABLE a (\n\n    -- inside\n    x int\n\n);\n\n-- between\n\nCREATE TABLE b (y int);\n-- trailer\n",
			want: []string{"CREATE TABLE a (\n    x int\n)", "CREATE TABLE b (y int)"},
		},
		{
			name: "final statement without ';'",
			src:  "CREATE TABLE a (x int);\nCREATE TABLE b (\n    y int\n)\n",
			want: []string{"CREATE TABLE a (x int)", "CREATE TABLE b (\n    y int\n)"},
		},
		{
			name: "final statement without ';' or newline",
			src:  "CREATE TABLE a (x int)",
			want: []string{"CREATE TABLE a (x int)"},
		},
		{
			name: "';' hidden in a comment does not split",
			src:  "CREATE TABLE a ( -- ends here;\n    x int\n);\n",
			want: []string{"CREATE TABLE a (\n    x int\n)"},
		},
		{
			name: "CRLF line ends and trailing blanks",
			src:  "CREATE TABLE a (x int); \r\nCREATE TABLE b (y int);\t\r\n",
			want: []string{"CREATE TABLE a (x int)", "CREATE TABLE b (y int)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := splitStatements(tt.src)
			if !slices.Equal(got, tt.want) {
				t.Errorf("splitStatements(%q)\n got %q\nwant %q", tt.src, got, tt.want)
			}
		})
	}
}

func TestConfigWithDefaults(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		got, err := Config{}.withDefaults()
		if err != nil {
			t.Fatalf("withDefaults: %v", err)
		}
		if got.Keyspace != "orderd" || got.DataCenter != "dc1" || got.ReplicationFactor != 3 {
			t.Errorf("defaults = %q %q %d, want orderd dc1 3", got.Keyspace, got.DataCenter, got.ReplicationFactor)
		}
		if got.Log == nil {
			t.Error("default Log is nil")
		}
		if got.LeaseTTL != 2*time.Minute {
			t.Errorf("default LeaseTTL = %s, want 2m", got.LeaseTTL)
		}
	})

	t.Run("empty keyspace becomes the default", func(t *testing.T) {
		got, err := Config{Keyspace: "", DataCenter: "dc2", ReplicationFactor: 1}.withDefaults()
		if err != nil {
			t.Fatalf("withDefaults: %v", err)
		}
		if got.Keyspace != "orderd" {
			t.Errorf("keyspace = %q, want orderd", got.Keyspace)
		}
	})

	t.Run("valid values kept", func(t *testing.T) {
		in := Config{Keyspace: "a" + strings.Repeat("b_1", 15) + "cd", DataCenter: "DC-east_1", ReplicationFactor: 1}
		if len(in.Keyspace) != 48 {
			t.Fatalf("test keyspace has %d characters, want 48", len(in.Keyspace))
		}
		got, err := in.withDefaults()
		if err != nil {
			t.Fatalf("withDefaults: %v", err)
		}
		if got.Keyspace != in.Keyspace || got.DataCenter != in.DataCenter || got.ReplicationFactor != 1 {
			t.Errorf("got %q %q %d, want the input kept", got.Keyspace, got.DataCenter, got.ReplicationFactor)
		}
	})

	long := "a" + strings.Repeat("b", 48)
	if len(long) != 49 {
		t.Fatalf("long keyspace has %d characters, want 49", len(long))
	}
	bad := []struct {
		name    string
		cfg     Config
		errText string
	}{
		{"upper-case keyspace", Config{Keyspace: "Orders"}, `keyspace "Orders"`},
		{"keyspace starting with a digit", Config{Keyspace: "1abc"}, `keyspace "1abc"`},
		{"keyspace with a dash", Config{Keyspace: "a-b"}, `keyspace "a-b"`},
		{"49-char keyspace", Config{Keyspace: long}, `keyspace "` + long + `"`},
		{"data centre with a space", Config{DataCenter: "dc 1"}, `data centre name "dc 1"`},
		{"negative replication factor", Config{ReplicationFactor: -1}, "replication factor must be at least 1, got -1"},
		{"lease shorter than its renewals can keep", Config{LeaseTTL: 3 * time.Second}, "migration lease TTL must be at least 4s, got 3s"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.cfg.withDefaults()
			if err == nil {
				t.Fatalf("withDefaults(%+v) = nil error, want one", tt.cfg)
			}
			if !strings.Contains(err.Error(), tt.errText) {
				t.Errorf("error %q does not mention %q", err, tt.errText)
			}
		})
	}
}

// TestListingVersion: version 5 creates the customer listing newest first,
// with the columns orders_by_customer has after 0004.
func TestListingVersion(t *testing.T) {
	versions, err := Versions("orderd")
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(versions, func(v Version) bool { return v.Number == 5 })
	if i < 0 {
		t.Fatal("no schema version 5")
	}
	if versions[i].Name != "orders_by_customer_time" || len(versions[i].Statements) != 1 {
		t.Fatalf("version 5 = %+v, want orders_by_customer_time with one statement", versions[i])
	}
	stmt := strings.Join(strings.Fields(versions[i].Statements[0]), " ")
	for _, want := range []string{
		"CREATE TABLE IF NOT EXISTS orderd.orders_by_customer_time (",
		"PRIMARY KEY ((tenant, customer_id, order_month), created_at, order_id)",
		"WITH CLUSTERING ORDER BY (created_at DESC, order_id ASC)",
		"compaction = {'class': 'UnifiedCompactionStrategy'}",
	} {
		if !strings.Contains(stmt, want) {
			t.Errorf("version 5 lacks %q:\n%s", want, stmt)
		}
	}
	for _, col := range []string{"tenant text", "customer_id text", "order_month date", "created_at timestamp", "order_id uuid",
		"status text", "total decimal", "currency text", "request_id uuid", "updated_at timestamp", "version bigint"} {
		if !strings.Contains(stmt, col+",") {
			t.Errorf("version 5 lacks column %q:\n%s", col, stmt)
		}
	}
}
