package local

import (
	"encoding/xml"
	"fmt"
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
