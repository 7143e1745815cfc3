package localcluster

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"time"
)

var kafkaRuntime = runtimeSpec{
	name:   "Apache Kafka",
	pom:    "kafka-pom.xml.tmpl",
	prefix: "kafka-",
	jar:    regexp.MustCompile(`^kafka_2\.13-(4\.\d+\.\d+)\.jar$`),
	// Maven picks the newest 4.x release that resolves from Maven Central.
	newest: "[4.0.0,5.0)",
	jarOf:  func(v string) string { return "kafka_2.13-" + v + ".jar" },
	needs:  []string{"log4j-slf4j-impl-"}, // the binding Kafka's slf4j-api 1.7 logs through
}

// KafkaConfig says where the local Kafka broker lives. The zero value of each
// field means its default.
type KafkaConfig struct {
	// Version pins a kafka_2.13 release such as "4.1.0"; default: the newest
	// 4.x that resolves from Maven Central (or is already cached).
	Version string
	// CacheDir holds fetched jars, shared with the Cassandra runtime;
	// default $XDG_CACHE_HOME/orderd or ~/.cache/orderd.
	CacheDir string
	// StateDir holds the broker's configuration, data, logs and pid file;
	// default .kafka in the current folder.
	StateDir string
	// Addr is the client listener; default 127.0.0.1:19092. It serves
	// SASL_SSL (SCRAM-SHA-512 logins over TLS) unless Plaintext is set.
	Addr string
	// Plaintext serves PLAINTEXT on Addr instead: no TLS, no login.
	Plaintext bool
	// PlaintextAddr, if set, adds a PLAINTEXT listener beside the SASL_SSL
	// one, for a client that cannot log in: the e2e suite's previous
	// release, built before orderd spoke SASL_SSL. Ignored with Plaintext.
	PlaintextAddr string
	// DevDir is the development setup (internal/tools/devsetup, written by
	// `orderd dev-setup`) whose server certificate the SASL_SSL listener
	// serves; it must name Addr's host. Default .dev.
	DevDir string
	// ControllerAddr is the KRaft controller listener; default 127.0.0.1:19093.
	ControllerAddr string
	// HeapMB is the broker's Java heap; default 512.
	HeapMB int
	// StartTimeout bounds the wait for the broker to answer; default 2 minutes.
	StartTimeout time.Duration
	// Log receives progress lines; default os.Stderr.
	Log io.Writer
}

// listeners are the addresses the broker listens on.
func (c *KafkaConfig) listeners() []string {
	if c.PlaintextAddr != "" {
		return []string{c.Addr, c.ControllerAddr, c.PlaintextAddr}
	}
	return []string{c.Addr, c.ControllerAddr}
}

func (c *KafkaConfig) setDefaults() error {
	if err := defaultDirs(&c.CacheDir, &c.StateDir, ".kafka"); err != nil {
		return err
	}
	if c.Addr == "" {
		c.Addr = "127.0.0.1:19092"
	}
	if c.DevDir == "" {
		c.DevDir = ".dev"
	}
	if c.ControllerAddr == "" {
		c.ControllerAddr = "127.0.0.1:19093"
	}
	if c.Plaintext {
		c.PlaintextAddr = ""
	}
	for _, a := range c.listeners() {
		_, port, err := net.SplitHostPort(a)
		if err == nil {
			_, err = strconv.Atoi(port)
		}
		if err != nil {
			return fmt.Errorf("broker address %q: want host:port: %w", a, err)
		}
	}
	if c.HeapMB == 0 {
		c.HeapMB = 512
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 2 * time.Minute
	}
	if c.Log == nil {
		c.Log = os.Stderr
	}
	return nil
}

// Broker is a single-node Apache Kafka 4.x broker in KRaft mode (broker and
// controller in one JVM) on loopback, run from the kafka_2.13 artifacts on
// Maven Central the way Cluster runs Cassandra: fetched into the cache,
// storage formatted once, started detached with its own log and pid file.
type Broker struct {
	cfg KafkaConfig

	jars runtimeDir
}

// NewBroker returns the broker described by cfg; nothing is started.
func NewBroker(cfg KafkaConfig) (*Broker, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.CacheDir, 0o755); err != nil {
		return nil, fmt.Errorf("create cache folder: %w", err)
	}
	return &Broker{cfg: cfg}, nil
}

// Addr is the address clients bootstrap from.
func (b *Broker) Addr() string { return b.cfg.Addr }

// StateDir is the folder holding the broker's data and logs.
func (b *Broker) StateDir() string { return b.cfg.StateDir }

// LogPath is the broker's server log.
func (b *Broker) LogPath() string { return filepath.Join(b.cfg.StateDir, "logs", "server.log") }

// GCLogPath is the broker's garbage-collection log.
func (b *Broker) GCLogPath() string { return filepath.Join(b.cfg.StateDir, "logs", "gc.log") }

// LogTail is the last lines of the broker's server log.
func (b *Broker) LogTail(lines int) string { return logTail(b.LogPath(), lines) }

func (b *Broker) pidFile() pidFile { return pidFile(filepath.Join(b.cfg.StateDir, "kafka.pid")) }
func (b *Broker) stdoutLog() string {
	return filepath.Join(b.cfg.StateDir, "logs", "stdout.log")
}
func (b *Broker) dataDir() string  { return filepath.Join(b.cfg.StateDir, "data") }
func (b *Broker) confPath() string { return filepath.Join(b.cfg.StateDir, "conf", "server.properties") }

// Pid is the broker's process id, or 0 when it is not running.
func (b *Broker) Pid() int { return b.pidFile().pid() }

// Fetch makes sure the Kafka runtime is in the cache.
func (b *Broker) Fetch(ctx context.Context) error {
	_, err := b.runtime(ctx)
	return err
}

// RuntimeDir is the cache folder holding the Kafka jars the broker runs
// from (fetched first if need be); its name ends in the version
// (kafka-4.1.0). deploy/docker/images builds its Kafka image from it.
func (b *Broker) RuntimeDir(ctx context.Context) (string, error) { return b.runtime(ctx) }

func (b *Broker) runtime(ctx context.Context) (string, error) {
	return b.jars.get(ctx, b.cfg.CacheDir, kafkaRuntime, b.cfg.Version, b.logf)
}

// Up starts the broker unless it is running (formatting its storage on the
// first start) and waits until its client port answers. It returns how
// long that took.
func (b *Broker) Up(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	if err := checkJava(); err != nil {
		return 0, err
	}
	lib, err := b.runtime(ctx)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.StartTimeout)
	defer cancel()
	if b.Pid() == 0 {
		if err := b.start(ctx, lib); err != nil {
			return 0, err
		}
	}
	if err := b.waitPort(ctx); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

func (b *Broker) start(ctx context.Context, lib string) error {
	for _, a := range b.cfg.listeners() {
		if err := waitPortFree(ctx, a, portReleaseWait); err != nil {
			return fmt.Errorf("the Kafka broker cannot start: %s is already in use by another process (find it with `ss -ltnp` and stop it, or point ORDERD_KAFKA_BROKERS at that broker instead): %w", a, err)
		}
	}
	classpath := filepath.Join(lib, "*")
	_, err := os.Stat(filepath.Join(b.dataDir(), "meta.properties"))
	formatted := err == nil
	if !formatted {
		if err := b.makeUsers(); err != nil {
			return err
		}
	}
	if err := b.writeConfig(); err != nil {
		return err
	}
	if !formatted {
		if err := b.format(ctx, classpath); err != nil {
			return err
		}
	}
	args := []string{
		fmt.Sprintf("-Xms%dm", b.cfg.HeapMB), fmt.Sprintf("-Xmx%dm", b.cfg.HeapMB),
		"-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-Djava.awt.headless=true",
		// Every collection with wall-clock time, as the Cassandra nodes log
		// theirs: a benchmark reads the pauses inside its rounds.
		"-Xlog:gc:file=" + b.GCLogPath() + ":time,uptime,level,tags:filecount=5,filesize=20m",
		"-Dlog4j2.configurationFile=" + filepath.Join(b.cfg.StateDir, "conf", "log4j2.properties"),
		"-Dkafka.logs.dir=" + filepath.Join(b.cfg.StateDir, "logs"),
		"-cp", classpath, "kafka.Kafka", b.confPath(),
	}
	pid, err := startDetached(b.pidFile(), b.cfg.StateDir, b.stdoutLog(), "the Kafka broker", args)
	if err != nil {
		return err
	}
	b.logf("kafka broker starting on %s (pid %d, log %s)", b.cfg.Addr, pid, b.LogPath())
	return nil
}

func (b *Broker) writeConfig() error {
	for _, sub := range []string{"conf", "logs", "data"} {
		if err := os.MkdirAll(filepath.Join(b.cfg.StateDir, sub), 0o755); err != nil {
			return fmt.Errorf("create broker folder: %w", err)
		}
	}
	data := map[string]string{"Addr": b.cfg.Addr, "Controller": b.cfg.ControllerAddr, "DataDir": b.dataDir(),
		"LogDir": filepath.Join(b.cfg.StateDir, "logs")}
	if b.cfg.Plaintext {
		data["Plaintext"] = "true"
	} else {
		pass, err := b.password(brokerUser)
		if err != nil {
			return err
		}
		if err := b.writeTLS(); err != nil {
			return err
		}
		data["BrokerUser"], data["BrokerPassword"] = brokerUser, pass
		data["Keystore"], data["Truststore"] = b.keystorePath(), b.CAFile()
		data["PlaintextAddr"] = b.cfg.PlaintextAddr
	}
	if err := renderFile("kafka-server.properties.tmpl", b.confPath(), data); err != nil {
		return err
	}
	// It holds the broker's own password.
	if err := os.Chmod(b.confPath(), 0o600); err != nil {
		return fmt.Errorf("restrict %s: %w", b.confPath(), err)
	}
	return renderFile("kafka-log4j2.properties.tmpl", filepath.Join(b.cfg.StateDir, "conf", "log4j2.properties"), data)
}

// clusterID is a fresh KRaft cluster id read from random: 16 bytes,
// base64url (22 characters), as kafka-storage.sh random-uuid prints. Like
// Kafka's Uuid.randomUuid it never starts with '-': the storage tool would
// read such an id as an option and fail ("argument --cluster-id/-t: expected
// one argument"), which broke one fresh start in 64.
func clusterID(random io.Reader) (string, error) {
	for {
		var raw [16]byte
		if _, err := io.ReadFull(random, raw[:]); err != nil {
			return "", fmt.Errorf("make a cluster id: %w", err)
		}
		if id := base64.RawURLEncoding.EncodeToString(raw[:]); id[0] != '-' {
			return id, nil
		}
	}
}

// answers reports whether the client listener accepts connections (its
// address was checked by setDefaults).
func (b *Broker) answers(ctx context.Context) bool {
	host, port, _ := net.SplitHostPort(b.cfg.Addr)
	n, _ := strconv.Atoi(port)
	return portAnswers(ctx, host, n)
}

func (b *Broker) waitPort(ctx context.Context) error {
	for {
		if b.answers(ctx) {
			return nil
		}
		if b.Pid() == 0 {
			return fmt.Errorf("the Kafka broker died during start; last lines of %s:\n%s\n--- %s:\n%s",
				b.LogPath(), logTail(b.LogPath(), 25), b.stdoutLog(), logTail(b.stdoutLog(), 15))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the Kafka broker did not answer on %s before the deadline (%w); see %s", b.cfg.Addr, ctx.Err(), b.LogPath())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Down stops the broker gracefully (SIGKILL after 30 s).
func (b *Broker) Down(ctx context.Context) error { return b.stop(ctx, 30*time.Second) }

// Kill stops the broker at once with SIGKILL, as a crash would.
func (b *Broker) Kill(ctx context.Context) error { return b.stop(ctx, 0) }

func (b *Broker) stop(ctx context.Context, grace time.Duration) error {
	sig, err := b.pidFile().stop(ctx, "the Kafka broker", grace, b.logf)
	if err == nil && sig != 0 {
		b.logf("kafka broker stopped (%s)", sig)
	}
	return err
}

// Wipe stops the broker and deletes its state folder (data, logs, configs).
func (b *Broker) Wipe(ctx context.Context) error {
	if err := b.Kill(ctx); err != nil {
		return err
	}
	if err := os.RemoveAll(b.cfg.StateDir); err != nil {
		return fmt.Errorf("delete %s: %w", b.cfg.StateDir, err)
	}
	return nil
}

// Status describes the broker in one line.
func (b *Broker) Status(ctx context.Context) string {
	pid := b.Pid()
	if pid == 0 {
		return fmt.Sprintf("kafka broker: not running (state in %s)", b.cfg.StateDir)
	}
	answering := "answering"
	if !b.answers(ctx) {
		answering = "NOT answering"
	}
	return fmt.Sprintf("kafka broker: pid %d on %s, %s (log %s)", pid, b.cfg.Addr, answering, b.LogPath())
}

func (b *Broker) logf(format string, args ...any) {
	fmt.Fprintf(b.cfg.Log, "kafka-local: "+format+"\n", args...)
}

// portReleaseWait is how long a start waits for its ports to be free. A
// killed JVM's main thread shows as a zombie (and the pid file as stopped)
// while its other threads still exit and hold its sockets: a restart right
// after a kill found the port taken for a moment (seen in CI).
const portReleaseWait = 15 * time.Second

// waitPortFree returns once addr can be listened on, or the last error
// after within.
func waitPortFree(ctx context.Context, addr string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		l, err := net.Listen("tcp", addr)
		if err == nil {
			return l.Close()
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}
