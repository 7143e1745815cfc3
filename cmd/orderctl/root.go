package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/atlasmart/orderd/internal/tools/clientcreds"
	"github.com/atlasmart/orderd/proto/client"
)

// app is one run of orderctl: its global flags and where it writes.
type app struct {
	stdout, stderr io.Writer
	// progressOK: stderr is a terminal, so a progress bar may be drawn
	// there (never with --json).
	progressOK bool

	addr      string
	json      bool
	timeout   time.Duration
	creds     clientcreds.Options
	tokenFile string

	// ran is set once a command's own work starts: an error before that
	// is cobra's (flags, arguments), a usage error.
	ran bool
}

// run runs orderctl with args and returns its exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := &app{stdout: stdout, stderr: stderr, progressOK: isTerminal(stderr)}
	root := a.rootCommand()
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	if !a.ran {
		err = usageErr(err)
	}
	a.report(cmd, err)
	return exitCode(err)
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "orderctl",
		Short:         "A client of orderd for people and scripts",
		Long:          rootLong(),
		SilenceErrors: true, // run reports errors, once, with their exit code
		SilenceUsage:  true,
	}
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErr(err) })
	a.globalFlags(root)
	root.AddCommand(a.createCommand(), a.cancelCommand(), a.amendCommand(),
		a.getCommand(), a.replayCommand(), a.listCommand(),
		a.requestCommand(), a.requestsCommand(), a.requeueCommand(), a.verifyCommand())
	return root
}

func rootLong() string {
	return `orderctl talks to orderd over gRPC with the Go client, which retries
every call the protocol allows, a write always with the same request_id.

Results go to stdout: tables for people, or with --json one JSON document
per result (one line; protojson of the API messages with the .proto field
names, e.g. "request_id", every field present, enums by name, int64 as
strings). Errors, notes and progress bars go to stderr; a progress bar is
drawn only when stderr is a terminal and --json is off.

Credentials: TLS that trusts --ca-file, and an API key or JWT read from
--token-file or $ORDERD_API_KEY (never from a flag), or a client
certificate (--cert-file, --key-file).

Exit codes:
` + exitCodeHelp()
}

// globalFlags registers the flags every command takes. The credential
// flags are internal/tools/clientcreds', the same as our other tools'.
func (a *app) globalFlags(root *cobra.Command) {
	pf := root.PersistentFlags()
	pf.StringVar(&a.addr, "addr", envOr("ORDERD_ADDR", "127.0.0.1:8080"), "orderd's gRPC address ($ORDERD_ADDR)")
	pf.BoolVar(&a.json, "json", false, "print each result as one JSON document (protojson, .proto field names)")
	pf.DurationVar(&a.timeout, "timeout", 30*time.Second, "how long a command may take; with --all and verify, each call")
	fs := flag.NewFlagSet("credentials", flag.ContinueOnError)
	clientcreds.Flags(fs, &a.creds, &a.tokenFile)
	pf.AddGoFlagSet(fs)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// action is the work of one command, given its connected client.
type action func(ctx context.Context, c *client.Client, args []string) error

// once runs act under one deadline of --timeout: a command of one or two
// calls.
func (a *app) once(act action) func(*cobra.Command, []string) error {
	return a.connected(func(ctx context.Context, c *client.Client, args []string) error {
		ctx, cancel := context.WithTimeout(ctx, a.timeout)
		defer cancel()
		return act(ctx, c, args)
	})
}

// connected runs act with a client; act bounds its calls itself (see
// perCall), for commands that walk many pages or requests.
func (a *app) connected(act action) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		a.ran = true
		if err := clientcreds.ReadToken(&a.creds, a.tokenFile); err != nil {
			return usageErr(err)
		}
		c, err := client.New(a.addr, client.WithCredentials(a.creds))
		if err != nil {
			return usageErr(err)
		}
		defer c.Close()
		return act(cmd.Context(), c, args)
	}
}

// perCall is the context of one call of a walking command.
func (a *app) perCall(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, a.timeout)
}

// report writes err to stderr, with what the caller can do about it.
func (a *app) report(cmd *cobra.Command, err error) {
	w := a.stderr
	var ce *client.Error
	if errors.As(err, &ce) && err == error(ce) {
		fmt.Fprintf(w, "orderctl: %s\n", headline(ce))
	} else {
		fmt.Fprintf(w, "orderctl: %v\n", err)
	}
	if errors.Is(err, errUsage) {
		fmt.Fprintf(w, "Run '%s --help' for usage.\n", cmd.CommandPath())
		return
	}
	if ce == nil {
		return
	}
	for _, v := range ce.Violations {
		fmt.Fprintf(w, "  field %s: %s\n", v.Field, v.Description)
	}
	switch {
	case errors.Is(ce, client.ErrStale):
		fmt.Fprintf(w, "current_version: %d (read the order, decide again, send a new change with a new request_id)\n", ce.CurrentVersion)
	case client.IsRetryable(ce) && ce.RequestID != "":
		fmt.Fprintf(w, "request_id: %s; retry later with --request-id %s, never with a new one\n", ce.RequestID, ce.RequestID)
	case errors.Is(ce, client.ErrUnexpected) && ce.RequestID != "":
		fmt.Fprintf(w, "request_id: %s; see what became of it with orderctl request %s\n", ce.RequestID, ce.RequestID)
	case errors.Is(ce, client.ErrFailed) && ce.RequestID != "":
		fmt.Fprintf(w, "request_id: %s is FAILED; an operator can requeue it (orderctl requeue %s)\n", ce.RequestID, ce.RequestID)
	}
}

// headline is a client error without the details report prints on lines
// of their own.
func headline(e *client.Error) string {
	parts := []string{e.Kind.Error()}
	if e.Reason != "" {
		parts[0] += " (" + e.Reason + ")"
	}
	if e.Message != "" {
		parts = append(parts, e.Message)
	}
	if e.RequestState != "" {
		parts = append(parts, "request "+e.RequestState)
	}
	return strings.Join(parts, ": ")
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
