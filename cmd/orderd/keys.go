package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/atlasmart/orderd/internal/adapters/auth"
	"github.com/atlasmart/orderd/internal/tools/devsetup"
)

const keysUsage = `usage:
  orderd keys add -file FILE -tenant TENANT -name NAME -permissions create,read[,admin]
                  prints the new key once; the file keeps only its salted hash
  orderd keys revoke -file FILE KEY_ID
  orderd keys list -file FILE
A running orderd reloads the file within -auth-reload-interval.`

const keysFileVariable = "ORDERD_API_KEYS_FILE"

// keysCommand manages an API key file (docs/security.md).
func keysCommand(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New(keysUsage)
	}
	if isHelp(args) {
		return help([]string{"keys"}, stdout)
	}
	sub, args := args[0], args[1:]
	var settings config
	fs := flag.NewFlagSet("orderd keys "+sub, flag.ContinueOnError)
	// serve's variable for the file it reads (-api-keys-file)
	file := fs.String("file", settings.env(keysFileVariable, ""), "API key file (env "+keysFileVariable+")")
	tenant := fs.String("tenant", "", "tenant the key acts for")
	name := fs.String("name", "", "client name (for logs)")
	perms := fs.String("permissions", "create,read", "comma-separated: create, read, admin")
	c, _ := lookupCommand("keys")
	c.name += " " + sub
	if help, err := parseSettings(fs, c, args, stdout); help || err != nil {
		return err
	}
	if *file == "" {
		return errors.New("-file (or ORDERD_API_KEYS_FILE) is required")
	}
	f, err := auth.ReadKeyFile(*file)
	if err != nil {
		return err
	}
	switch sub {
	case "add":
		if *name == "" {
			return errors.New("-name is required")
		}
		key, entry, err := auth.NewKey(*tenant, *name, splitList(*perms), time.Now())
		if err != nil {
			return err
		}
		f.Keys = append(f.Keys, entry)
		if err := auth.WriteKeyFile(*file, f); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "key id %s for tenant %s (%s): %s\n", entry.ID, entry.Tenant, strings.Join(entry.Permissions, ","), key)
		fmt.Fprintln(stdout, "This key is shown once; the file keeps only its salted hash.")
		return nil
	case "revoke":
		if fs.NArg() != 1 {
			return errors.New("usage: orderd keys revoke -file FILE KEY_ID")
		}
		id := fs.Arg(0)
		n := len(f.Keys)
		f.Keys = slices.DeleteFunc(f.Keys, func(e auth.KeyEntry) bool { return e.ID == id })
		if len(f.Keys) == n {
			return fmt.Errorf("no key with id %q in %s", id, *file)
		}
		if err := auth.WriteKeyFile(*file, f); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "revoked key %s\n", id)
		return nil
	case "list":
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tTENANT\tNAME\tPERMISSIONS\tCREATED")
		for _, e := range f.Keys {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", e.ID, e.Tenant, e.Name, strings.Join(e.Permissions, ","), e.CreatedAt.Format(time.RFC3339))
		}
		return w.Flush()
	}
	return fmt.Errorf("unknown keys command %q\n%s", sub, keysUsage)
}

// devSetupConfig is what dev-setup writes, and where.
type devSetupConfig struct{ dir, tenant, hosts string }

func devSetupFlags(c *devSetupConfig) *flag.FlagSet {
	fs := flag.NewFlagSet("orderd dev-setup", flag.ContinueOnError)
	fs.StringVar(&c.dir, "dir", ".dev", "directory to write into")
	fs.StringVar(&c.tenant, "tenant", "default", "tenant of the development client certificate and key")
	fs.StringVar(&c.hosts, "hosts", "", "comma-separated addresses or names the server certificate names besides 127.0.0.1, ::1 and localhost")
	return fs
}

// devSetup writes a development CA, certificates and API key file into a
// directory, once (internal/tools/devsetup), and prints the key: here and
// nowhere else. It leaves an existing setup alone.
func devSetup(args []string, stdout io.Writer) error {
	var cfg devSetupConfig
	c, _ := lookupCommand("dev-setup")
	if help, err := parseSettings(devSetupFlags(&cfg), c, args, stdout); help || err != nil {
		return err
	}
	dir, tenant := &cfg.dir, &cfg.tenant
	var extra []string
	for h := range strings.SplitSeq(cfg.hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			extra = append(extra, h)
		}
	}
	if (devsetup.Files{Dir: *dir}).Exists() {
		fmt.Fprintf(stdout, "development credentials already in %s (remove the directory to make new ones)\n", *dir)
		return nil
	}
	_, key, err := devsetup.Write(*dir, *tenant, 365*24*time.Hour, extra...)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Development credentials written to %s (a throwaway CA: never use them in production).\n", *dir)
	fmt.Fprintf(stdout, "Development API key for tenant %s, shown once (the key file keeps only its hash):\n\n  export ORDERD_DEV_KEY=%s\n\n", *tenant, key)
	fmt.Fprintf(stdout, "Or authenticate with the client certificate %s/client.pem (key %s/client-key.pem).\n", *dir, *dir)
	return nil
}
