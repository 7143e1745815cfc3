package local

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
	"text/template"
	"time"
)

// newestCassandra50 is a Maven version range: Maven picks the newest 5.0.x
// release that resolves from Maven Central.
const newestCassandra50 = "[5.0.0,5.1)"

var cassandraJar = regexp.MustCompile(`^cassandra-all-(5\.0\.\d+)\.jar$`)

// ensureRuntime returns the folder holding the cassandra-all jar and its
// runtime dependencies, fetching them with Maven when the cache lacks them.
func (c *Cluster) ensureRuntime(ctx context.Context) (string, error) {
	if dir, ok := c.cachedRuntime(); ok {
		return dir, nil
	}
	if err := checkMaven(); err != nil {
		return "", err
	}
	version := c.cfg.Version
	if version == "" {
		version = newestCassandra50
	}
	work, err := os.MkdirTemp(c.cfg.CacheDir, "fetch-")
	if err != nil {
		return "", fmt.Errorf("create fetch folder under %s: %w", c.cfg.CacheDir, err)
	}
	defer os.RemoveAll(work)
	if err := renderFile("pom.xml.tmpl", filepath.Join(work, "pom.xml"), map[string]string{"Version": version}); err != nil {
		return "", err
	}
	lib := filepath.Join(work, "lib")
	start := time.Now()
	c.logf("fetching Apache Cassandra %s and its runtime dependencies from Maven Central into %s", version, c.cfg.CacheDir)
	cmd := exec.CommandContext(ctx, "mvn", "-q", "-B", "-f", filepath.Join(work, "pom.xml"),
		"dependency:copy-dependencies", "-DincludeScope=runtime", "-DoutputDirectory="+lib)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("mvn could not fetch cassandra-all %s (is Maven Central reachable?): %w\n%s", version, err, tail(out.String(), 30))
	}
	resolved, err := jarVersion(lib)
	if err != nil {
		return "", err
	}
	dest := filepath.Join(c.cfg.CacheDir, "cassandra-"+resolved)
	if err := os.RemoveAll(dest); err != nil {
		return "", fmt.Errorf("clear %s: %w", dest, err)
	}
	if err := os.Rename(lib, dest); err != nil {
		return "", fmt.Errorf("move fetched jars to %s: %w", dest, err)
	}
	c.logf("fetched Apache Cassandra %s in %s", resolved, time.Since(start).Round(100*time.Millisecond))
	return dest, nil
}

// cachedRuntime finds a complete runtime in the cache: the pinned version if
// one is configured, otherwise the newest 5.0.x present.
func (c *Cluster) cachedRuntime() (string, bool) {
	entries, err := os.ReadDir(c.cfg.CacheDir)
	if err != nil {
		return "", false
	}
	best, bestPatch := "", -1
	for _, e := range entries {
		v, ok := strings.CutPrefix(e.Name(), "cassandra-")
		if !e.IsDir() || !ok {
			continue
		}
		if c.cfg.Version != "" && v != c.cfg.Version {
			continue
		}
		dir := filepath.Join(c.cfg.CacheDir, e.Name())
		if _, err := os.Stat(filepath.Join(dir, "cassandra-all-"+v+".jar")); err != nil {
			continue
		}
		patch, err := strconv.Atoi(strings.TrimPrefix(v, "5.0."))
		if err == nil && patch > bestPatch {
			best, bestPatch = dir, patch
		}
	}
	return best, best != ""
}

func jarVersion(lib string) (string, error) {
	entries, err := os.ReadDir(lib)
	if err != nil {
		return "", fmt.Errorf("read fetched jars: %w", err)
	}
	for _, e := range entries {
		if m := cassandraJar.FindStringSubmatch(e.Name()); m != nil {
			return m[1], nil
		}
	}
	return "", fmt.Errorf("mvn finished but %s holds no cassandra-all-5.0.x jar", lib)
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
