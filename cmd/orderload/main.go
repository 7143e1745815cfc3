// Command orderload sends a bounded CreateOrder load to an orderd on this
// machine, like real clients: one request id per intent, reused on retries,
// with a share of duplicate copies and of conflicting reuses. It prints what
// it saw and can write every acknowledged outcome (JSON lines) for
// `orderd verify --acks`.
//
//	ORDERD_API_KEY=odk_... orderload -addr 127.0.0.1:8080 -ca-file .dev/ca.pem \
//	    -intents 2000 -duplicates 0.2 -conflicts 0.05 -acks acks.jsonl
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"github.com/atlasmart/orderd/internal/tools/clientcreds"
	"github.com/atlasmart/orderd/internal/tools/invariant"
	"github.com/atlasmart/orderd/internal/tools/loadgen"
	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "orderload:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		addr = flag.String("addr", "127.0.0.1:8080", "orderd gRPC address (loopback only)")
		cfg  loadgen.Config
		acks = flag.String("acks", "", "write acknowledged outcomes to this file (JSON lines)")
	)
	flag.IntVar(&cfg.Intents, "intents", 2000, "business intents (distinct request ids)")
	flag.IntVar(&cfg.Concurrency, "concurrency", 32, "calls in flight")
	flag.Float64Var(&cfg.DuplicateShare, "duplicates", 0.2, "share of intents also sent as a duplicate copy")
	flag.Float64Var(&cfg.ConflictShare, "conflicts", 0.05, "share of acknowledged intents re-sent with another total")
	flag.Float64Var(&cfg.ChangeShare, "changes", 0, "share of created orders that get three rounds of two racing editors (AmendOrder, and sometimes CancelOrder)")
	flag.DurationVar(&cfg.MaxDuration, "max-duration", 5*time.Minute, "stop sending after this")
	flag.DurationVar(&cfg.RetryFor, "retry-for", time.Minute, "retry unacknowledged intents (same request id) this long")
	flag.StringVar(&cfg.Tenant, "tenant", "default", "tenant of the credentials used (recorded in the acks)")
	var creds clientcreds.Options
	var tokenFile string
	clientcreds.Flags(flag.CommandLine, &creds, &tokenFile)
	flag.Parse()
	if err := clientcreds.ReadToken(&creds, tokenFile); err != nil {
		return err
	}
	dial, err := creds.DialOptions()
	if err != nil {
		return err
	}

	host, _, err := net.SplitHostPort(*addr)
	if err != nil {
		return fmt.Errorf("address %q: %w", *addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return errors.New("orderload only targets loopback addresses (127.0.0.0/8, ::1, localhost)")
	}
	conn, err := grpc.NewClient(*addr, dial...)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	rep := loadgen.Run(ctx, ordersv1.NewOrderServiceClient(conn), cfg)
	fmt.Print(rep.String())
	if *acks != "" {
		if err := invariant.WriteAcks(*acks, rep.Acks); err != nil {
			return err
		}
	}
	if rep.Refused > 0 {
		// Usually the whole load: no or a wrong ORDERD_API_KEY, or a client
		// certificate the server does not accept.
		return fmt.Errorf("%d intents refused for good (codes: %v) and not retried: check the credentials", rep.Refused, rep.Codes)
	}
	if rep.Unacked > 0 || len(rep.Problems) > 0 {
		return fmt.Errorf("%d intents never acknowledged, %d problems", rep.Unacked, len(rep.Problems))
	}
	return nil
}
