// Command orderbench measures orderd against the statement plans it could
// issue: the two-LWT protocol it ran first, the one-LWT protocol it runs
// now, and the plans around them. It is a benchmark that prints numbers,
// never a test.
//
//	orderbench run -phases compare,storm,replay,mix -json bin/bench-main.json
//	orderbench run -phases lwt -label v1 -json bin/bench-lwt-v1.json
//	orderbench run -phases soak -soak 1h -json bin/bench-soak.json
//	orderbench report -out docs/benchmarks.md -plot docs/benchmark-latency.svg bin/bench-*.json
//	orderbench serial -contact-points 127.0.0.4,127.0.0.5,127.0.0.6,127.0.0.7 -replication dc1:2,dc2:2
//
// `serial` times the claim at LOCAL_SERIAL and at SERIAL side by side on a
// cluster of two DCs (serial.go; docs/operations.md, Multi-DC).
//
// `run` starts the orderd binary itself (so it can read the process's CPU
// time and memory) on a fresh keyspace of the running cluster. Phases:
//
//	compare  new requests at each -concurrency level through five drivers,
//	         each warmed up first, taking turns in rounds:
//	           orderd   CreateOrder through orderd (gRPC), the one-LWT
//	                    protocol, in a process of its own with event
//	                    delivery off: no plan below publishes
//	           two-lwt  the two-LWT protocol orderd ran before, issued from
//	                    this process in that handler's order: due-queue
//	                    entry, claim LWT, read of orders_by_id, orders_by_id
//	                    then the other two projections concurrently,
//	                    COMPLETE LWT, entry removal
//	           one-lwt  orderd's protocol issued from this process: read
//	                    of orders_by_id, due-queue entry, claim LWT,
//	                    orders_by_customer_time and order_events_by_order
//	                    concurrently, orders_by_id; the entry released in
//	                    the background after the answer; no COMPLETE LWT
//	           floor    the three projection upserts concurrently, nothing
//	                    else (no ledger, no idempotency)
//	           naive    two-lwt's statements one after another, in the
//	                    order a request's rows are written
//	storm    a replay storm through orderd: one request created, then sent
//	         again -requests times from 64 streams, every answer a replay;
//	         new requests at 64 streams take turns with it
//	replay   the replay path's latency against a new request's, through orderd
//	mix      orderd under a mix of new requests, duplicate retries and
//	         conflicting reuses (per-outcome latency)
//	outbox   event delivery on against off (two orderd processes), and the
//	         latency from the answer to a consumer's receipt and apply;
//	         per order: statements by label, events, CPU of orderd, the
//	         cluster and the broker
//	commit   claims committed at LOCAL_QUORUM against ANY
//	         (ORDERD_CLAIM_COMMIT): two orderd processes taking turns at
//	         1, 16 and 64 streams
//	cost     orderd's own CPU per new order under each of -cost-variants
//	         (environment settings, or another build): one process each,
//	         taking turns at 16 and 64 streams
//	instances  one orderd against three (each with its reconciler, on
//	         keyspaces of their own) at the same total streams, taking
//	         turns at 16 and 64 streams; their statements, reconciler
//	         passes and replay-cache hits per round (from /metrics)
//	changes  AmendOrder against CreateOrder through orderd
//	lwt      the claim LWT alone (run once per paxos_variant)
//	soak     orderd with delivery on and the reference consumer running,
//	         under an open loop of new orders for -soak at -soak-rate
//	         (default: half the maximum measured first), sampled every
//	         -soak-every: RSS, goroutines, latency, pending compactions,
//	         tombstone warnings, consumer lag; each judged flat or not
//	         (soak_verdict.go)
//
// Drivers that take turns run -rounds rounds (5) at each concurrency, a
// driver's -requests split over them; every round's figures are kept, and
// the report gives medians with the rounds' range and judges a goal only
// where every round agrees. After the phases, the Cassandra nodes' and the
// broker's GC logs (-gc-logs, -broker-gc-log) give each round's longest
// pause. -pin pins the Cassandra JVMs, the broker, orderd and this client
// to separate cores for the run (pin.go) and restores them afterwards.
//
// `make bench` runs all but soak, restarting the local cluster between the
// paxos v1 and v2 phases, and writes docs/benchmarks.md (with the soak's
// results when `make bench-soak` left bin/bench-soak.json).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

const usage = `usage: orderbench COMMAND [FLAGS]
  run     start orderd on a fresh keyspace and time the -phases (orderbench run -h lists them)
  report  write the Markdown report and latency plot from run's JSON files
  serial  time the claim at LOCAL_SERIAL against SERIAL on a cluster of two DCs
orderbench COMMAND -h lists the command's flags.`

func main() {
	err := run(os.Args[1:], os.Stdout)
	switch {
	case errors.Is(err, flag.ErrHelp): // the command's flags are printed
	case err != nil:
		fmt.Fprintln(os.Stderr, "orderbench:", err)
		os.Exit(1)
	}
}

// run runs the command args name; asked for help, it prints the usage to
// stdout, or a command's flags (the flag package's ErrHelp).
func run(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		_, err := fmt.Fprintln(stdout, usage)
		return err
	case "run":
		return runCmd(args[1:])
	case "report":
		return reportCmd(args[1:])
	case "serial":
		return serialCmd(args[1:])
	}
	return fmt.Errorf("unknown command %q\n%s", args[0], usage)
}
