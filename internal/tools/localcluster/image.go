package localcluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Where the Cassandra image keeps things (deploy/docker/images/cassandra.Dockerfile).
const (
	imageHome = "/opt/cassandra"     // lib/ holds the jars
	imageConf = "/etc/cassandra"     // as in the official image
	imageData = "/var/lib/cassandra" // as in the official image
	imageJMX  = 7199                 // Cassandra's default; JMX_PORT moves it
)

// WriteImageContext writes the Cassandra part of a Docker build context for
// an image of this launcher's Cassandra into dir: lib/ with the jars from
// Maven Central (fetched if need be) and conf/ with the configuration a
// local node gets, rendered once for a container that logs to stdout. What
// differs between nodes (addresses, seeds, tokens, DC and rack, heap, JMX
// port) the image's entrypoint sets at start from the environment, as the
// official image does. It returns the Cassandra version.
func (c *Cluster) WriteImageContext(ctx context.Context, dir string) (string, error) {
	lib, err := c.runtime(ctx)
	if err != nil {
		return "", err
	}
	version := strings.TrimPrefix(filepath.Base(lib), cassandraRuntime.prefix)
	if err := copyJars(lib, filepath.Join(dir, "lib")); err != nil {
		return "", err
	}
	jamm, err := findJar(lib, "jamm-")
	if err != nil {
		return "", err
	}
	conf := filepath.Join(dir, "conf")
	if err := os.MkdirAll(conf, 0o755); err != nil {
		return "", err
	}
	data := map[string]any{
		"Index":        1,
		"Address":      "127.0.0.1",
		"Dir":          imageData,
		"ConfDir":      imageConf,
		"Console":      true,
		"Seeds":        "127.0.0.1:7000",
		"InitialToken": "", // num_tokens vnodes, as the official image
		"DC":           1,
		"Rack":         1,
		"HeapMB":       c.cfg.HeapMB,
		"PaxosVariant": c.cfg.PaxosVariant,
		"GC":           c.cfg.GC,
		"G1PauseMS":    c.cfg.G1PauseMS,
		"Memtable":     c.cfg.Memtable,
		// No GCLog: the image's containers are not benchmarked.
		"JMXPort":     imageJMX,
		"LibDir":      filepath.Join(imageHome, "lib"),
		"JammJar":     jamm,
		"ModuleFlags": jdkModuleFlags,
	}
	if err := renderNodeConf(conf, data); err != nil {
		return "", err
	}
	// nodetool needs the same module access as the node, and its own logging.
	clients := strings.Join(jdkModuleFlags, "\n") + "\n-Dlogback.configurationFile=file://" + imageConf + "/logback-tools.xml\n"
	return version, os.WriteFile(filepath.Join(conf, "jvm17-clients.options"), []byte(clients), 0o644)
}

// copyJars puts every jar of lib into dest, hard-linked where it can be
// (a build context must hold files, not links to them).
func copyJars(lib, dest string) error {
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return err
	}
	jars, err := filepath.Glob(filepath.Join(lib, "*.jar"))
	if err != nil {
		return err
	}
	for _, jar := range jars {
		to := filepath.Join(dest, filepath.Base(jar))
		if err := os.Link(jar, to); err == nil || os.IsExist(err) {
			continue
		}
		if err := copyFile(jar, to); err != nil {
			return fmt.Errorf("copy %s into the image context: %w", filepath.Base(jar), err)
		}
	}
	return nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
