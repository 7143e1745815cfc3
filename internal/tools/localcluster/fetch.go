package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"text/template"
	"time"
)

// runtimeSpec names a server fetched from Maven Central into the cache: a
// generated pom resolves its jar and runtime dependencies, and the fetched
// folder is kept as <prefix><version> in the cache.
type runtimeSpec struct {
	name   string         // for messages: "Apache Cassandra"
	pom    string         // the pom template
	prefix string         // cache folder prefix: "cassandra-"
	jar    *regexp.Regexp // the server jar's file name; group 1 is its version
	newest string         // Maven version range used when none is pinned
	jarOf  func(version string) string
	// needs are name prefixes of jars a complete runtime holds besides the
	// server's: a cached runtime without one (fetched by an older pom) is
	// fetched again.
	needs []string
}

var cassandraRuntime = runtimeSpec{
	name:   "Apache Cassandra",
	pom:    "pom.xml.tmpl",
	prefix: "cassandra-",
	jar:    regexp.MustCompile(`^cassandra-all-(5\.0\.\d+)\.jar$`),
	// No newest: the version is always named (Config.Version, by default
	// CassandraVersion), so that every checkout runs the same release.
	jarOf: func(v string) string { return "cassandra-all-" + v + ".jar" },
}

// runtimeDir is a launcher's runtime folder, resolved (and fetched if need
// be) by the first call of get.
type runtimeDir struct {
	mu  sync.Mutex
	dir string
}

// path is the folder get resolved, or "" before.
func (r *runtimeDir) path() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dir
}

func (r *runtimeDir) get(ctx context.Context, cacheDir string, spec runtimeSpec, pinned string, logf func(string, ...any)) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dir != "" {
		return r.dir, nil
	}
	dir, err := ensureRuntime(ctx, cacheDir, spec, pinned, logf)
	if err != nil {
		return "", err
	}
	r.dir = dir
	return dir, nil
}

// ensureRuntime returns the folder holding spec's server jar and its runtime
// dependencies: the pinned version, or the newest cached, fetched with Maven
// when the cache has none.
func ensureRuntime(ctx context.Context, cacheDir string, spec runtimeSpec, pinned string, logf func(string, ...any)) (string, error) {
	if dir, ok := cachedRuntime(cacheDir, spec, pinned); ok {
		return dir, nil
	}
	if err := checkMaven(); err != nil {
		return "", err
	}
	version := pinned
	if version == "" {
		version = spec.newest
	}
	work, err := os.MkdirTemp(cacheDir, "fetch-")
	if err != nil {
		return "", fmt.Errorf("create fetch folder under %s: %w", cacheDir, err)
	}
	defer os.RemoveAll(work)
	if err := renderFile(spec.pom, filepath.Join(work, "pom.xml"), map[string]string{"Version": version}); err != nil {
		return "", err
	}
	lib := filepath.Join(work, "lib")
	start := time.Now()
	logf("fetching %s %s and its runtime dependencies from Maven Central into %s", spec.name, version, cacheDir)
	cmd := exec.CommandContext(ctx, "mvn", "-q", "-B", "-f", filepath.Join(work, "pom.xml"),
		"dependency:copy-dependencies", "-DincludeScope=runtime", "-DoutputDirectory="+lib)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("mvn could not fetch %s %s (is Maven Central reachable?): %w\n%s", spec.name, version, err, tail(out.String(), 30))
	}
	resolved, err := jarVersion(lib, spec)
	if err != nil {
		return "", err
	}
	dest := filepath.Join(cacheDir, spec.prefix+resolved)
	if err := os.RemoveAll(dest); err != nil {
		return "", fmt.Errorf("clear %s: %w", dest, err)
	}
	if err := os.Rename(lib, dest); err != nil {
		return "", fmt.Errorf("move fetched jars to %s: %w", dest, err)
	}
	logf("fetched %s %s in %s", spec.name, resolved, time.Since(start).Round(100*time.Millisecond))
	return dest, nil
}

// cachedRuntime finds a complete runtime in the cache: the pinned version if
// one is given, otherwise the newest present.
func cachedRuntime(cacheDir string, spec runtimeSpec, pinned string) (string, bool) {
	entries, err := os.ReadDir(cacheDir)
	if err != nil {
		return "", false
	}
	best, bestVersion := "", ""
	for _, e := range entries {
		v, ok := strings.CutPrefix(e.Name(), spec.prefix)
		if !e.IsDir() || !ok || !spec.jar.MatchString(spec.jarOf(v)) {
			continue
		}
		if pinned != "" && v != pinned {
			continue
		}
		dir := filepath.Join(cacheDir, e.Name())
		if !hasJars(dir, append([]string{spec.jarOf(v)}, spec.needs...)) {
			continue
		}
		if best == "" || newerVersion(v, bestVersion) {
			best, bestVersion = dir, v
		}
	}
	return best, best != ""
}

// hasJars reports whether dir holds a jar whose name starts with each of
// prefixes (a full name is its own prefix).
func hasJars(dir string, prefixes []string) bool {
	for _, p := range prefixes {
		if m, _ := filepath.Glob(filepath.Join(dir, p+"*")); len(m) == 0 {
			return false
		}
	}
	return true
}

// newerVersion reports whether dotted version a is newer than b.
func newerVersion(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) && i < len(bs); i++ {
		x, _ := strconv.Atoi(as[i])
		y, _ := strconv.Atoi(bs[i])
		if x != y {
			return x > y
		}
	}
	return len(as) > len(bs)
}

func jarVersion(lib string, spec runtimeSpec) (string, error) {
	entries, err := os.ReadDir(lib)
	if err != nil {
		return "", fmt.Errorf("read fetched jars: %w", err)
	}
	for _, e := range entries {
		if m := spec.jar.FindStringSubmatch(e.Name()); m != nil {
			return m[1], nil
		}
	}
	return "", fmt.Errorf("mvn finished but %s holds no %s server jar", lib, spec.name)
}

func findJar(lib, prefix string) (string, error) {
	matches, err := filepath.Glob(filepath.Join(lib, prefix+"*.jar"))
	if err != nil || len(matches) == 0 {
		return "", fmt.Errorf("no %s*.jar in %s: delete the folder and run again to refetch", prefix, lib)
	}
	return filepath.Base(matches[0]), nil
}

var javaVersion = regexp.MustCompile(`version "(\d+)`)

// checkJava fails with the fix named unless a JDK that Cassandra 5.0 runs on
// (11 or 17) is on the PATH.
func checkJava() error {
	if _, err := exec.LookPath("java"); err != nil {
		return errors.New("java not found on PATH: Cassandra 5.0 needs JDK 17 (Debian: apt-get install -y openjdk-17-jdk-headless)")
	}
	out, err := exec.Command("java", "-version").CombinedOutput()
	if err != nil {
		return fmt.Errorf("java -version failed: %w\n%s", err, out)
	}
	m := javaVersion.FindSubmatch(out)
	if m == nil {
		return fmt.Errorf("cannot read the Java version from %q", out)
	}
	if major, _ := strconv.Atoi(string(m[1])); major != 11 && major != 17 {
		return fmt.Errorf("java on PATH is version %d; Cassandra 5.0 runs on JDK 11 or 17 (Debian: apt-get install -y openjdk-17-jdk-headless, then put it first on PATH or set JAVA_HOME)", major)
	}
	return nil
}

func checkMaven() error {
	if _, err := exec.LookPath("mvn"); err != nil {
		return errors.New("mvn not found on PATH: it fetches Cassandra from Maven Central (Debian: apt-get install -y maven)")
	}
	return nil
}

func renderFile(tmpl, dest string, data any) error {
	t, err := template.ParseFS(templates, "templates/"+tmpl)
	if err != nil {
		return fmt.Errorf("parse template %s: %w", tmpl, err)
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		return fmt.Errorf("render template %s: %w", tmpl, err)
	}
	if err := os.WriteFile(dest, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", dest, err)
	}
	return nil
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
