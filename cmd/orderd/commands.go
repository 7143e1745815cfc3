package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/atlasmart/orderd/internal/platform/buildinfo"
)

// command is one of orderd's subcommands, as `orderd help` lists it.
type command struct {
	name    string
	summary string
	// settings: the command reads the shared ORDERD_* settings (config.flags);
	// the others parse their own arguments.
	settings bool
}

// commands is the one list of orderd's subcommands: help, the unknown-command
// error and the dispatch in run all read it.
var commands = []command{
	{"serve", "serve the gRPC API, with the reconciler and event delivery (the default)", true},
	{"migrate", "create or upgrade the keyspace's tables (idempotent; run before serve)", true},
	{"reconcile", "run only the reconciler: finish abandoned requests and deliver events", true},
	{"deliver", "the same as reconcile", true},
	{"verify", "check the stored rows against the invariants (and -acks, -delivered)", true},
	{"requeue", "put a dead-lettered request back on the due queue: orderd requeue REQUEST_ID", true},
	{"republish", "publish again every event of a tenant's orders created in a time range (-from, -to)", true},
	{"copy-listing", "fill orders_by_customer_time from the orders of an older schema", true},
	{"keys", "manage the API key file: add, list, revoke", false},
	{"dev-setup", "write development credentials (CA, certificates, an API key) into .dev", false},
	{"version", "print the version, revision and Go version of this build", false},
	{"help", "list the commands, or show one command's settings: orderd help COMMAND", false},
}

func lookupCommand(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func commandNames() string {
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	return strings.Join(names, ", ")
}

func unknownCommand(name string) error {
	return fmt.Errorf("unknown command %q: use one of %s (orderd help lists them)", name, commandNames())
}

// help prints the command list, or one command's flags with their
// environment defaults.
func help(args []string, w io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(w, "orderd: idempotent order creation on Apache Cassandra")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "usage: orderd [COMMAND] [FLAGS]")
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, c := range commands {
			fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
		}
		tw.Flush()
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Every flag of serve, migrate, reconcile, verify, requeue and copy-listing")
		fmt.Fprintln(w, "defaults to its ORDERD_* environment variable; orderd help COMMAND lists them.")
		return nil
	}
	c, ok := lookupCommand(args[0])
	if !ok {
		return unknownCommand(args[0])
	}
	fmt.Fprintf(w, "orderd %s: %s\n", c.name, c.summary)
	if !c.settings {
		return nil
	}
	fmt.Fprintln(w)
	fs := (&config{}).flags(c.name)
	fs.SetOutput(w)
	fs.PrintDefaults()
	return nil
}

func printVersion(w io.Writer) error {
	_, err := fmt.Fprint(w, buildinfo.Text())
	return err
}
