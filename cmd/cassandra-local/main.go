// Command cassandra-local runs the local three-node Apache Cassandra 5.0
// cluster that orderd's `make run` and `make test` use on machines without
// Docker. See internal/tools/localcluster for how the nodes are built and started.
//
//	cassandra-local [-nodes N] [-dcs N] [-first-address N] COMMAND ...
//	cassandra-local up|down|status|wipe|fetch
//	cassandra-local stop-node|kill-node|start-node|pause-node|resume-node|logs N
//	cassandra-local fault-times [-restart M] [-window 1m] N
//	cassandra-local cql ["STATEMENT"]   (no statement: read statements from stdin)
//
// Settings come from the environment: CASSANDRA_NODES (3), CASSANDRA_DCS (1),
// CASSANDRA_FIRST_ADDRESS (1), CASSANDRA_VERSION (localcluster.CassandraVersion, 5.0.9),
// CASSANDRA_HEAP_MB (1024), CASSANDRA_PAXOS_VARIANT (v2),
// CASSANDRA_GC (g1, or zgc), CASSANDRA_G1_PAUSE_MS (300: G1's
// MaxGCPauseMillis), CASSANDRA_MEMTABLE (trie: off-heap tries, or
// skiplist), ORDERD_CLUSTER_DIR (.cluster),
// ORDERD_CACHE_DIR (~/.cache/orderd). The flags before the command override
// the first three. A two-DC cluster beside the main one:
//
//	ORDERD_CLUSTER_DIR=/tmp/orderd-2dc cassandra-local -nodes 4 -dcs 2 -first-address 4 up
//
// (127.0.0.4-5 in dc1, 127.0.0.6-7 in dc2, JMX ports 7400-7700); every
// later command on it needs the same settings.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/atlasmart/orderd/internal/tools/localcluster"
)

const usage = `usage: cassandra-local [-nodes N] [-dcs N] [-first-address N] COMMAND
  -nodes N          nodes in the cluster (CASSANDRA_NODES, default 3)
  -dcs N            data centres the nodes are split into, dc1 first (CASSANDRA_DCS, default 1)
  -first-address N  node 1 listens on 127.0.0.N (CASSANDRA_FIRST_ADDRESS, default 1)
  CASSANDRA_VERSION runs another cassandra-all release than the pinned one
commands:
  fetch           download Cassandra from Maven Central into the cache
  image-context DIR
                  write the jars and configuration of a Cassandra image into DIR
                  (deploy/docker/images/build.sh); prints the Cassandra version
  up              start every node and wait until all are Up/Normal
  down            stop every node gracefully
  status          nodetool status, and which nodes are paused
  stop-node N     stop node N gracefully
  kill-node N     SIGKILL node N
  start-node N    start node N and wait until it is Up/Normal
  pause-node N    SIGSTOP node N: its sockets stay open, requests to it hang
  resume-node N   SIGCONT node N and wait until it is Up/Normal again
  fault-times [-restart M] [-window 1m] N
                  SIGKILL node N and print when the driver and the survivors
                  notice, when a read at ALL turns UNAVAILABLE, and the
                  survivors' log lines and CPU per minute while N is down
                  (-restart M: restart node M first); then start N again
  logs N          print node N's system.log path and its last 50 lines
  cql [STMT]      run CQL (from the argument, or ';'-terminated from stdin)
  nodetool N ARGS run nodetool against node N (e.g. nodetool 1 describecluster)
  schema-agree    wait until all running nodes agree on the schema (resetting stragglers)
  wipe            stop every node and delete data, logs and configuration`

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "cassandra-local:", err)
		os.Exit(1)
	}
}

func run() error {
	if len(os.Args) < 2 {
		return errors.New(usage)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	cfg, err := configFromEnv()
	if err != nil {
		return err
	}
	rest, err := parseFlags(&cfg, os.Args[1:])
	if errors.Is(err, flag.ErrHelp) || (len(rest) > 0 && rest[0] == "help") {
		fmt.Println(usage)
		return nil
	}
	if err != nil {
		return err
	}
	if len(rest) == 0 {
		return errors.New(usage)
	}
	c, err := localcluster.New(cfg)
	if err != nil {
		return err
	}
	cmd, args := rest[0], rest[1:]
	switch cmd {
	case "fetch":
		return c.Fetch(ctx)
	case "image-context":
		if len(args) != 1 {
			return errors.New("usage: image-context DIR")
		}
		version, err := c.WriteImageContext(ctx, args[0])
		if err == nil {
			fmt.Println(version)
		}
		return err
	case "up":
		took, err := c.Up(ctx)
		if err != nil {
			return err
		}
		fmt.Printf("cluster of %d nodes Up/Normal on %v in %s (state in %s)\n", c.Nodes(), c.ContactPoints(), took.Round(100_000_000), c.StateDir())
		return nil
	case "down":
		return c.Down(ctx)
	case "wipe":
		return c.Wipe(ctx)
	case "status":
		out, err := c.Status(ctx)
		fmt.Print(out)
		return err
	case "cql":
		return runCQL(ctx, c.ContactPoints(), args)
	case "schema-agree":
		return c.WaitSchemaAgreement(ctx)
	case "nodetool":
		if len(args) < 1 {
			return errors.New("usage: nodetool N ARGS...")
		}
		i, err := nodeArg(args[:1])
		if err != nil {
			return err
		}
		out, err := c.Nodetool(ctx, i, args[1:]...)
		fmt.Print(out)
		return err
	case "fault-times":
		return runFaultTimes(ctx, c, args)
	case "stop-node", "kill-node", "start-node", "pause-node", "resume-node", "logs":
		i, err := nodeArg(args)
		if err != nil {
			return err
		}
		switch cmd {
		case "stop-node":
			return c.StopNode(ctx, i)
		case "kill-node":
			return c.KillNode(ctx, i)
		case "start-node":
			return c.StartNode(ctx, i)
		case "pause-node":
			return c.PauseNode(ctx, i)
		case "resume-node":
			return c.ResumeNode(ctx, i)
		default:
			return printLog(c.LogPath(i))
		}
	default:
		return fmt.Errorf("unknown command %q\n%s", cmd, usage)
	}
}

func configFromEnv() (localcluster.Config, error) {
	cfg := localcluster.Config{
		Version:      os.Getenv("CASSANDRA_VERSION"),
		PaxosVariant: os.Getenv("CASSANDRA_PAXOS_VARIANT"),
		GC:           os.Getenv("CASSANDRA_GC"),
		Memtable:     os.Getenv("CASSANDRA_MEMTABLE"),
		StateDir:     os.Getenv("ORDERD_CLUSTER_DIR"),
		CacheDir:     os.Getenv("ORDERD_CACHE_DIR"),
	}
	for name, dst := range map[string]*int{"CASSANDRA_NODES": &cfg.Nodes, "CASSANDRA_HEAP_MB": &cfg.HeapMB,
		"CASSANDRA_DCS": &cfg.DCs, "CASSANDRA_FIRST_ADDRESS": &cfg.FirstAddress, "CASSANDRA_G1_PAUSE_MS": &cfg.G1PauseMS} {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return cfg, fmt.Errorf("%s=%q is not a number", name, v)
			}
			*dst = n
		}
	}
	return cfg, nil
}

// parseFlags reads the flags before the command into cfg (over what the
// environment set) and returns the command and its arguments.
func parseFlags(cfg *localcluster.Config, args []string) ([]string, error) {
	fs := flag.NewFlagSet("cassandra-local", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.IntVar(&cfg.Nodes, "nodes", cfg.Nodes, "")
	fs.IntVar(&cfg.DCs, "dcs", cfg.DCs, "")
	fs.IntVar(&cfg.FirstAddress, "first-address", cfg.FirstAddress, "")
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, usage)
	}
	return fs.Args(), nil
}

func nodeArg(args []string) (int, error) {
	if len(args) != 1 {
		return 0, errors.New("name one node by its number, e.g. `kill-node 2`")
	}
	i, err := strconv.Atoi(args[0])
	if err != nil {
		return 0, fmt.Errorf("node %q is not a number", args[0])
	}
	return i, nil
}

func printLog(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	lines := raw
	for n, i := 0, len(raw)-1; i >= 0; i-- {
		if raw[i] == '\n' {
			if n++; n > 50 {
				lines = raw[i+1:]
				break
			}
		}
	}
	fmt.Printf("==> %s <==\n%s", path, lines)
	return nil
}
