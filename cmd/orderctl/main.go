// Command orderctl is orderd's client for people and scripts: it creates,
// reads, lists, replays and verifies orders and write requests through the
// Go client (proto/client), which does the retry protocol, so orderctl
// never invents a request_id for an intent it was given and never retries
// a write under a new one.
//
//	ORDERD_API_KEY=odk_... orderctl --ca-file .dev/ca.pem create --customer c1 --total 77.70 --currency EUR
//
// Results go to stdout (tables, or one JSON document per result with
// --json), everything else to stderr. The exit code says what happened
// (exitcode.go holds the one table; `orderctl --help` prints it).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
