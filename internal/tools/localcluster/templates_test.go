package localcluster

import (
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// renderNode writes node 2's configuration of a three-node cluster into a
// temp state folder and returns the node.
func renderNode(t *testing.T) *node {
	t.Helper()
	c := newTestCluster(t, 3)
	c.jars.dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(c.jars.dir, "jamm-0.4.0.jar"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	n := c.node(2)
	if err := n.writeConfig(); err != nil {
		t.Fatalf("writeConfig: %v", err)
	}
	return n
}

// renderOneNode writes the configuration of the only node of a one-node
// cluster of cfg into a temp state folder and returns the node.
func renderOneNode(t *testing.T, cfg Config) *node {
	t.Helper()
	cfg.Nodes, cfg.StateDir, cfg.CacheDir, cfg.Log = 1, t.TempDir(), t.TempDir(), io.Discard
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.jars.dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(c.jars.dir, "jamm-0.4.0.jar"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	n := c.node(1)
	if err := n.writeConfig(); err != nil {
		t.Fatal(err)
	}
	return n
}

func readConf(t *testing.T, n *node, name string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(n.dir, "conf", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// TestRoleSetupIsNotABusyLoop: the default-role setup retries after
// cassandra.superuser_setup_delay_ms whenever it fails, which it does for as
// long as the node holding the role's row is down. At 0 that was a busy
// loop: ~1.26 million warnings and a whole core a minute on a node started
// while that node was down (docs/faults.md).
func TestRoleSetupIsNotABusyLoop(t *testing.T) {
	n := renderNode(t)
	const opt = "-Dcassandra.superuser_setup_delay_ms="
	for _, line := range strings.Split(readConf(t, n, "jvm17.options"), "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, opt) {
			continue
		}
		ms, err := strconv.Atoi(strings.TrimPrefix(line, opt))
		if err != nil {
			t.Fatalf("%s: not a number of milliseconds: %v", line, err)
		}
		if ms < 1000 {
			t.Errorf("%s: while the node holding the default role is down, the role setup would retry every %d ms (0: a busy loop); keep Cassandra's default (10000)", line, ms)
		}
	}
	// The delay is harmless only because nothing logs in: with
	// PasswordAuthenticator, clients would wait for the default role.
	y := readConf(t, n, "cassandra.yaml")
	if !slices.Contains(strings.Split(y, "\n"), "authenticator: AllowAllAuthenticator") {
		t.Error("cassandra.yaml no longer says `authenticator: AllowAllAuthenticator`: revisit the role-setup delay in jvm17.options.tmpl")
	}
}

// logbackConfig is the part of a logback.xml these tests look at.
type logbackConfig struct {
	Appenders []logbackAppender `xml:"appender"`
	Root      struct {
		Refs []appenderRef `xml:"appender-ref"`
	} `xml:"root"`
	Loggers []struct {
		Name string        `xml:"name,attr"`
		Refs []appenderRef `xml:"appender-ref"`
	} `xml:"logger"`
}

type logbackAppender struct {
	Name   string `xml:"name,attr"`
	Class  string `xml:"class,attr"`
	File   string `xml:"file"`
	Policy *struct {
		Class        string `xml:"class,attr"`
		Pattern      string `xml:"fileNamePattern"`
		MaxFileSize  string `xml:"maxFileSize"`
		MaxHistory   string `xml:"maxHistory"`
		TotalSizeCap string `xml:"totalSizeCap"`
	} `xml:"rollingPolicy"`
}

type appenderRef struct {
	Ref string `xml:"ref,attr"`
}

// parseSize reads a logback FileSize such as "20MB" (KB, MB, GB; 1024-based).
func parseSize(s string) (int64, error) {
	s = strings.ToUpper(strings.TrimSpace(s))
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("size %q: want a positive number with KB, MB or GB", s)
	}
	return v * mult, nil
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"20MB": 20 << 20, "200MB": 200 << 20, "1GB": 1 << 30, "512KB": 512 << 10, "10": 10} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MB", "-5MB", "twentyMB"} {
		if _, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) = nil error, want one", in)
		}
	}
}

// TestLogbackLogsOnceAndRolls: every line goes to system.log once, through
// one appender that rolls by size and caps what it keeps. The template as
// landed had a console appender as well (each WARN written twice, once into
// stdout.log) and a FileAppender that never rolled: 630-850 MB a node an
// hour during fault tests.
func TestLogbackLogsOnceAndRolls(t *testing.T) {
	n := renderNode(t)
	var cfg logbackConfig
	if err := xml.Unmarshal([]byte(readConf(t, n, "logback.xml")), &cfg); err != nil {
		t.Fatalf("logback.xml is not well-formed XML: %v", err)
	}
	var refs []string
	for _, r := range cfg.Root.Refs {
		refs = append(refs, r.Ref)
	}
	for _, l := range cfg.Loggers {
		for _, r := range l.Refs {
			refs = append(refs, r.Ref)
		}
	}
	if len(refs) == 0 {
		t.Fatal("no appender is referenced: nothing would be logged")
	}
	if len(refs) != 1 {
		t.Errorf("appender references %q: want exactly one (root -> the system.log appender), or lines are written more than once", refs)
	}
	if len(cfg.Appenders) != 1 {
		t.Errorf("%d appenders defined, want one", len(cfg.Appenders))
	}
	for _, a := range cfg.Appenders {
		if strings.Contains(a.Class, "ConsoleAppender") {
			t.Errorf("appender %s is a console appender: the node's stdout is a file (stdout.log), so each line would be written twice", a.Name)
		}
	}
	i := slices.IndexFunc(cfg.Appenders, func(a logbackAppender) bool { return a.Name == refs[0] })
	if i < 0 {
		t.Fatalf("root refers to appender %q, which is not defined", refs[0])
	}
	a := cfg.Appenders[i]
	logs := filepath.Join(n.dir, "logs")
	if a.File != filepath.Join(logs, "system.log") {
		t.Errorf("appender %s writes %q, want %s", a.Name, a.File, filepath.Join(logs, "system.log"))
	}
	if a.Class != "ch.qos.logback.core.rolling.RollingFileAppender" {
		t.Fatalf("appender %s is a %s, want a RollingFileAppender", a.Name, a.Class)
	}
	p := a.Policy
	if p == nil {
		t.Fatalf("appender %s has no rollingPolicy", a.Name)
	}
	if p.Class != "ch.qos.logback.core.rolling.SizeAndTimeBasedRollingPolicy" {
		t.Errorf("rolling policy %s, want SizeAndTimeBasedRollingPolicy (rolls by size, caps the total)", p.Class)
	}
	if filepath.Dir(p.Pattern) != logs || !strings.Contains(p.Pattern, "%d") || !strings.Contains(p.Pattern, "%i") {
		t.Errorf("fileNamePattern %q: want a file in %s with %%d and %%i", p.Pattern, logs)
	}
	// The launcher and the docs find rolled files as logs/system*.log.
	if ok, _ := filepath.Match(filepath.Join(logs, "system*.log"), p.Pattern); !ok {
		t.Errorf("fileNamePattern %q does not match %s", p.Pattern, filepath.Join(logs, "system*.log"))
	}
	fileSize, err := parseSize(p.MaxFileSize)
	if err != nil {
		t.Errorf("maxFileSize: %v", err)
	}
	capSize, err := parseSize(p.TotalSizeCap)
	if err != nil {
		t.Errorf("totalSizeCap: %v (without it nothing bounds the rolled files)", err)
	}
	if fileSize > 100<<20 || capSize > 1<<30 || capSize < 2*fileSize {
		t.Errorf("maxFileSize %s, totalSizeCap %s: want files of at most 100 MB, a cap of at most 1 GB per node, and room for two files", p.MaxFileSize, p.TotalSizeCap)
	}
	// logback applies totalSizeCap only together with maxHistory.
	if h, err := strconv.Atoi(p.MaxHistory); err != nil || h <= 0 {
		t.Errorf("maxHistory %q: logback needs a positive maxHistory for totalSizeCap to apply", p.MaxHistory)
	}
}

// TestStartFailureShowsStdout: with logging only in system.log, what the JVM
// prints when it dies early (a bad option, a startup exception) is in
// stdout.log alone, and the error for a node that died during start still
// carries its tail.
func TestStartFailureShowsStdout(t *testing.T) {
	c := newTestCluster(t, 3)
	n := c.node(1)
	if err := os.MkdirAll(filepath.Join(n.dir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	const boom = "Exception (org.apache.cassandra.exceptions.ConfigurationException) encountered during startup: Invalid yaml"
	if err := os.WriteFile(n.stdoutLog(), []byte("=== started by cassandra-local ===\n"+boom+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := n.checkAlive()
	if err == nil {
		t.Fatal("checkAlive of a node with no process = nil, want an error")
	}
	for _, want := range []string{boom, n.stdoutLog(), "not running"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not carry %q:\n%v", want, err)
		}
	}
}

// renderCluster writes the configuration of every node of cfg (state and
// cache in temp folders) and returns the cluster.
func renderCluster(t *testing.T, cfg Config) *Cluster {
	t.Helper()
	cfg.StateDir, cfg.CacheDir, cfg.Log = t.TempDir(), t.TempDir(), io.Discard
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	c.jars.dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(c.jars.dir, "jamm-0.4.0.jar"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= c.Nodes(); i++ {
		if err := c.node(i).writeConfig(); err != nil {
			t.Fatalf("writeConfig of node %d: %v", i, err)
		}
	}
	return c
}

// rackDC reads node n's cassandra-rackdc.properties: its dc and rack.
func rackDC(t *testing.T, n *node) (dc, rack string) {
	t.Helper()
	for _, line := range strings.Split(readConf(t, n, "cassandra-rackdc.properties"), "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), "=")
		switch k {
		case "dc":
			dc = v
		case "rack":
			rack = v
		}
	}
	return dc, rack
}

// yamlValue is the value of a top-level key of node n's cassandra.yaml, unquoted.
func yamlValue(t *testing.T, n *node, key string) string {
	t.Helper()
	for _, line := range strings.Split(readConf(t, n, "cassandra.yaml"), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			return strings.Trim(strings.TrimSpace(v), `"`)
		}
	}
	t.Fatalf("cassandra.yaml of node %d has no %s", n.index, key)
	return ""
}

// TestOneDCLayout: the default cluster is as it always was: dc1, a rack per
// node, tokens balanced over all nodes.
func TestOneDCLayout(t *testing.T) {
	c := renderCluster(t, Config{Nodes: 3})
	for i := 1; i <= 3; i++ {
		dc, rack := rackDC(t, c.node(i))
		if dc != "dc1" || rack != fmt.Sprintf("rack%d", i) || c.DataCenter(i) != "dc1" {
			t.Errorf("node %d: dc=%s rack=%s (DataCenter %s), want dc1 rack%d", i, dc, rack, c.DataCenter(i), i)
		}
		if got := yamlValue(t, c.node(i), "initial_token"); got != initialToken(i, 3) {
			t.Errorf("node %d: initial_token %s, want %s", i, got, initialToken(i, 3))
		}
	}
	if c.DataCenters() != 1 {
		t.Errorf("DataCenters() = %d, want 1", c.DataCenters())
	}
}

// TestTwoDCLayout: a second cluster beside the main one, in two DCs: the
// nodes split dc1 then dc2, a rack per node within its DC, every node a
// seed, tokens unique over the cluster and balanced within each DC, and no
// port shared with the main cluster's nodes (127.0.0.1-3, JMX 7100-7300).
func TestTwoDCLayout(t *testing.T) {
	for _, tc := range []struct {
		nodes, first int
		dcs          []string // node i's DC
		racks        []string
	}{
		{4, 4, []string{"dc1", "dc1", "dc2", "dc2"}, []string{"rack1", "rack2", "rack1", "rack2"}},
		{6, 4, []string{"dc1", "dc1", "dc1", "dc2", "dc2", "dc2"}, []string{"rack1", "rack2", "rack3", "rack1", "rack2", "rack3"}},
		{5, 1, []string{"dc1", "dc1", "dc1", "dc2", "dc2"}, []string{"rack1", "rack2", "rack3", "rack1", "rack2"}},
	} {
		t.Run(fmt.Sprintf("%d nodes from .%d", tc.nodes, tc.first), func(t *testing.T) {
			c := renderCluster(t, Config{Nodes: tc.nodes, FirstAddress: tc.first, DCs: 2})
			tokens := map[string]int{}
			perDC := map[string][]int64{}
			for i := 1; i <= tc.nodes; i++ {
				n := c.node(i)
				dc, rack := rackDC(t, n)
				if dc != tc.dcs[i-1] || rack != tc.racks[i-1] || c.DataCenter(i) != dc {
					t.Errorf("node %d: dc=%s rack=%s (DataCenter %s), want %s %s", i, dc, rack, c.DataCenter(i), tc.dcs[i-1], tc.racks[i-1])
				}
				tok := yamlValue(t, n, "initial_token")
				if j, dup := tokens[tok]; dup {
					t.Errorf("nodes %d and %d share token %s", j, i, tok)
				}
				tokens[tok] = i
				v, err := strconv.ParseInt(tok, 10, 64)
				if err != nil {
					t.Fatalf("node %d: initial_token %q: %v", i, tok, err)
				}
				perDC[dc] = append(perDC[dc], v)
				if got := yamlValue(t, n, "listen_address"); got != fmt.Sprintf("127.0.0.%d", tc.first+i-1) {
					t.Errorf("node %d listens on %s", i, got)
				}
				if !strings.Contains(readConf(t, n, "cassandra.yaml"), c.Address(tc.nodes)+":7000") {
					t.Errorf("node %d: the seeds do not list the last node of dc2", i)
				}
				if p := c.jmxPort(i); tc.first > 3 && p <= JMXPort(3) {
					t.Errorf("node %d: JMX port %d collides with the main cluster's (7100-7300)", i, p)
				}
				if !strings.Contains(readConf(t, n, "jvm17.options"), fmt.Sprintf("-Dcassandra.jmx.local.port=%d", c.jmxPort(i))) {
					t.Errorf("node %d: jvm17.options does not set JMX port %d", i, c.jmxPort(i))
				}
			}
			// Each DC's ring on its own is balanced (within 1% of an even split).
			for dc, toks := range perDC {
				want := math.Ldexp(1, 64) / float64(len(toks))
				for k := 1; k < len(toks); k++ {
					gap := float64(uint64(toks[k] - toks[k-1]))
					if math.Abs(gap-want) > want/100 {
						t.Errorf("%s: gap %.0f between its nodes %d and %d, want about %.0f", dc, gap, k, k+1, want)
					}
				}
			}
			if got := c.ContactPointsIn("dc2"); len(got) != tc.nodes-len(c.ContactPointsIn("dc1")) || got[len(got)-1] != c.Address(tc.nodes) {
				t.Errorf("ContactPointsIn(dc2) = %v", got)
			}
		})
	}
	if _, err := New(Config{Nodes: 2, DCs: 3, StateDir: t.TempDir(), CacheDir: t.TempDir()}); err == nil {
		t.Error("New with more DCs than nodes = nil error, want one")
	}
}

// The collector is chosen per cluster (CASSANDRA_GC, CASSANDRA_G1_PAUSE_MS)
// and every node logs its collections to logs/gc.log with wall-clock time,
// which the benchmark reads its rounds' pauses from.
func TestJVMOptionsCollector(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cfg       Config
		want, not []string
	}{
		{"default: G1 with Cassandra's pause goal", Config{}, []string{"-XX:+UseG1GC", "-XX:MaxGCPauseMillis=300"}, []string{"-XX:+UseZGC"}},
		{"G1 with a shorter pause goal", Config{G1PauseMS: 100}, []string{"-XX:+UseG1GC", "-XX:MaxGCPauseMillis=100"}, []string{"-XX:MaxGCPauseMillis=300"}},
		{"ZGC", Config{GC: "zgc"}, []string{"-XX:+UseZGC"}, []string{"-XX:+UseG1GC", "-XX:MaxGCPauseMillis=300"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := renderOneNode(t, tc.cfg)
			args, err := n.jvmArgs()
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !slices.Contains(args, w) {
					t.Errorf("JVM arguments lack %q: %q", w, args)
				}
			}
			for _, w := range tc.not {
				if slices.Contains(args, w) {
					t.Errorf("JVM arguments have %q: %q", w, args)
				}
			}
			gcLog := slices.IndexFunc(args, func(a string) bool {
				return strings.HasPrefix(a, "-Xlog:") && strings.Contains(a, ":file="+filepath.Join(n.dir, "logs", "gc.log")+":time,")
			})
			if gcLog < 0 {
				t.Errorf("JVM arguments do not log collections to %s with wall-clock time: %q", n.gcLogPath(), args)
			}
		})
	}
	if _, err := New(Config{GC: "cms", StateDir: t.TempDir(), CacheDir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "g1 or zgc") {
		t.Errorf("New(GC: cms) = %v, want an error naming g1 and zgc", err)
	}
}

// Memtables are chosen per cluster (CASSANDRA_MEMTABLE): tries off the heap
// by default, as Cassandra's cassandra-latest.yaml has them, or skip lists
// on the heap, as its cassandra.yaml has them; nothing else is accepted.
func TestMemtableSetting(t *testing.T) {
	for _, tc := range []struct {
		memtable  string
		want, not []string
	}{
		{"", []string{"memtable_allocation_type: offheap_objects", "memtable:", "      inherits: trie", "      class_name: TrieMemtable"}, []string{"memtable_allocation_type: heap_buffers"}},
		{"skiplist", []string{"memtable_allocation_type: heap_buffers"}, []string{"memtable:", "      inherits: trie"}},
	} {
		n := renderOneNode(t, Config{Memtable: tc.memtable})
		lines := strings.Split(readConf(t, n, "cassandra.yaml"), "\n")
		for _, w := range tc.want {
			if !slices.Contains(lines, w) {
				t.Errorf("memtable %q: cassandra.yaml lacks the line %q", tc.memtable, w)
			}
		}
		for _, w := range tc.not {
			if slices.Contains(lines, w) {
				t.Errorf("memtable %q: cassandra.yaml has the line %q", tc.memtable, w)
			}
		}
	}
	if _, err := New(Config{Memtable: "offheap", StateDir: t.TempDir(), CacheDir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "trie or skiplist") {
		t.Errorf("New(Memtable: offheap) = %v, want an error naming trie and skiplist", err)
	}
}
