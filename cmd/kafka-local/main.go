// Command kafka-local runs the local single-node Apache Kafka 4.x broker
// (KRaft mode, on loopback) that orderd's event delivery uses on machines
// without Docker. See internal/tools/localcluster for how the broker is built and started.
//
//	kafka-local up|down|kill|status|wipe|fetch|runtime|logs
//
// The client listener serves SASL_SSL: SCRAM-SHA-512 logins (users orderd
// and orderconsumer, their passwords in .kafka/users/) over TLS with the
// development certificate `orderd dev-setup` writes in .dev.
//
// Settings come from the environment: KAFKA_VERSION (newest 4.x),
// KAFKA_HEAP_MB (512), ORDERD_KAFKA_ADDR (127.0.0.1:19092),
// ORDERD_KAFKA_CONTROLLER_ADDR (127.0.0.1:19093), ORDERD_KAFKA_DIR (.kafka),
// ORDERD_DEV_DIR (.dev), ORDERD_KAFKA_PLAINTEXT (false: true serves
// PLAINTEXT, no TLS and no login), ORDERD_KAFKA_PLAINTEXT_ADDR (none: an
// extra PLAINTEXT listener beside SASL_SSL), ORDERD_CACHE_DIR
// (~/.cache/orderd).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/atlasmart/orderd/internal/tools/localcluster"
)

const usage = `usage: kafka-local COMMAND
  fetch    download Kafka from Maven Central into the cache
  runtime  fetch if need be, then print the cached folder of Kafka's jars (the container image copies it)
  up       start the broker (formatting its storage the first time) and wait until it answers
  down     stop the broker gracefully
  kill     SIGKILL the broker, as a crash would
  status   whether the broker runs and answers
  logs     print the broker's server.log path and its last 50 lines
  wipe     kill the broker and delete its data, logs and configuration`

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "kafka-local:", err)
		os.Exit(1)
	}
}

func run() error {
	if len(os.Args) != 2 {
		return errors.New(usage)
	}
	switch os.Args[1] {
	case "-h", "-help", "--help", "help":
		fmt.Println(usage)
		return nil
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := localcluster.KafkaConfig{
		Version:  os.Getenv("KAFKA_VERSION"),
		CacheDir: os.Getenv("ORDERD_CACHE_DIR"),
		StateDir: os.Getenv("ORDERD_KAFKA_DIR"),
		Addr:     os.Getenv("ORDERD_KAFKA_ADDR"),
		DevDir:   os.Getenv("ORDERD_DEV_DIR"),

		ControllerAddr: os.Getenv("ORDERD_KAFKA_CONTROLLER_ADDR"),
		PlaintextAddr:  os.Getenv("ORDERD_KAFKA_PLAINTEXT_ADDR"),
	}
	if v := os.Getenv("ORDERD_KAFKA_PLAINTEXT"); v != "" {
		plain, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("ORDERD_KAFKA_PLAINTEXT=%q: want true or false", v)
		}
		cfg.Plaintext = plain
	}
	if v := os.Getenv("KAFKA_HEAP_MB"); v != "" {
		mb, err := strconv.Atoi(v)
		if err != nil || mb < 128 {
			return fmt.Errorf("KAFKA_HEAP_MB=%q: want a number of megabytes, at least 128", v)
		}
		cfg.HeapMB = mb
	}
	b, err := localcluster.NewBroker(cfg)
	if err != nil {
		return err
	}
	switch os.Args[1] {
	case "fetch":
		return b.Fetch(ctx)
	case "runtime":
		dir, err := b.RuntimeDir(ctx)
		if err != nil {
			return err
		}
		fmt.Println(dir)
		return nil
	case "up":
		took, err := b.Up(ctx)
		if err != nil {
			return err
		}
		fmt.Printf("kafka broker answering on %s in %s (state in %s)\n", b.Addr(), took.Round(100*time.Millisecond), b.StateDir())
		printClientSettings(b)
		return nil
	case "down":
		return b.Down(ctx)
	case "kill":
		return b.Kill(ctx)
	case "status":
		line := b.Status(ctx)
		if b.Pid() == 0 {
			return errors.New(line) // exit 1: scripts can test it
		}
		fmt.Println(line)
		return nil
	case "logs":
		fmt.Println(b.LogPath())
		fmt.Println(b.LogTail(50))
		return nil
	case "wipe":
		return b.Wipe(ctx)
	}
	return fmt.Errorf("unknown command %q\n%s", os.Args[1], usage)
}

// printClientSettings says how orderd reaches the broker.
func printClientSettings(b *localcluster.Broker) {
	if b.Plaintext() {
		fmt.Println("PLAINTEXT (no TLS, no login): ORDERD_KAFKA_PLAINTEXT=true")
		return
	}
	fmt.Printf("SASL_SSL (SCRAM-SHA-512 over TLS): ORDERD_KAFKA_USERNAME=%s ORDERD_KAFKA_PASSWORD_FILE=%s ORDERD_KAFKA_TLS_CA_FILE=%s\n",
		localcluster.OrderdUser, b.PasswordFile(localcluster.OrderdUser), b.CAFile())
	if a := b.PlaintextAddr(); a != "" {
		fmt.Printf("and PLAINTEXT (no TLS, no login) on %s: ORDERD_KAFKA_BROKERS=%s ORDERD_KAFKA_PLAINTEXT=true\n", a, a)
	}
}
