package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
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
	{"healthcheck", "ask a running orderd's gRPC health service whether it is ready: exit 0 when SERVING (the image's HEALTHCHECK)", true},
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

// help prints the command list, or one command's usage with its flags and
// the environment variables they default from.
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
		fmt.Fprintln(w, "Every flag of serve, migrate, reconcile, verify, requeue, republish, copy-listing")
		fmt.Fprintln(w, "and healthcheck defaults to its ORDERD_* environment variable;")
		fmt.Fprintln(w, "orderd COMMAND -h lists them.")
		return nil
	}
	c, ok := lookupCommand(args[0])
	if !ok {
		return unknownCommand(args[0])
	}
	switch {
	case c.settings:
		cfg := &config{}
		commandUsage(w, c, cfg.flags(c.name))
	case c.name == "keys":
		fmt.Fprintf(w, "orderd keys: %s\n\n%s\n", c.summary, keysUsage)
	case c.name == "dev-setup":
		commandUsage(w, c, devSetupFlags(new(devSetupConfig)))
	default:
		fmt.Fprintf(w, "orderd %s: %s\n\nusage: orderd %s\n", c.name, c.summary, c.name)
	}
	return nil
}

// commandUsage prints what `orderd COMMAND -h` shows: the command's summary
// and its flags, each with the ORDERD_* variable it defaults from
// (config.nameVariables).
func commandUsage(w io.Writer, c command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "orderd %s: %s\n\nusage: orderd %s [FLAGS]\n\n", c.name, c.summary, c.name)
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// isHelp reports whether args ask for help rather than run anything: the
// flag package's -h, -help and --help, and GNU's --help, as the first
// argument.
func isHelp(args []string) bool {
	return len(args) > 0 && slices.Contains([]string{"-h", "-help", "--help", "--h"}, args[0])
}

// parseSettings parses args into fs. Asked for help anywhere among the
// flags, it prints the command's usage to stdout and reports help: the
// caller exits 0 without running anything. Other errors carry the hint
// where the flags are listed; the flag package prints nothing itself.
func parseSettings(fs *flag.FlagSet, c command, args []string, stdout io.Writer) (help bool, err error) {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err = fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		commandUsage(stdout, c, fs)
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("%w (orderd %s -h lists the flags)", err, c.name)
	}
	return false, nil
}

// nameVariables adds to each flag's help text the ORDERD_* variable it
// defaults from, as the flag definitions read it: so -h names every
// variable the command reads, from the one place settings are defined.
func (c *config) nameVariables(fs *flag.FlagSet) {
	read := make(map[string]bool, len(c.envRead))
	for _, name := range c.envRead {
		read[name] = true
	}
	fs.VisitAll(func(f *flag.Flag) {
		if name := envName(f.Name); read[name] {
			f.Usage += " (env " + name + ")"
		}
	})
}

func printVersion(w io.Writer) error {
	_, err := fmt.Fprint(w, buildinfo.Text())
	return err
}
