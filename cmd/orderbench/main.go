// Command orderbench measures orderd against the CQL it issues (issue 6).
// It is a benchmark that prints numbers, never a test.
//
//	orderbench run -phases compare,replay,mix -json bin/bench-main.json
//	orderbench run -phases lwt -label v1 -json bin/bench-lwt-v1.json
//	orderbench run -phases soak -soak 5m -json bin/bench-soak.json
//	orderbench report -out docs/benchmarks.md -plot docs/benchmark-latency.svg bin/bench-*.json
//
// `run` starts the orderd binary itself (so it can read the process's CPU
// time and memory) on a fresh keyspace of the running cluster. Phases:
//
//	compare  new requests at each concurrency through three drivers, in turn:
//	         orderd (gRPC), direct (the handler's own CQL from this process,
//	         in the handler's order: due-queue entry, claim LWT, the three
//	         projections concurrently, COMPLETE LWT, entry delete) and naive
//	         (the same statements one after another, design doc 000 §2 order)
//	replay   the replay path's latency against a new request's, through orderd
//	mix      orderd under a mix of new requests, duplicate retries and
//	         conflicting reuses (per-outcome latency)
//	lwt      the claim LWT alone (run once per paxos_variant)
//	soak     orderd at 64 streams for -soak; RSS at the start and the end
//
// `make bench` runs all of it, restarting the local cluster between the
// paxos v1 and v2 phases, and writes docs/benchmarks.md.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: orderbench run|report [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "run":
		err = runCmd(os.Args[2:])
	case "report":
		err = reportCmd(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: use run or report", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "orderbench:", err)
		os.Exit(1)
	}
}
