package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestHelpListsEveryCommand(t *testing.T) {
	var out bytes.Buffer
	if err := help(nil, &out); err != nil {
		t.Fatal(err)
	}
	for _, c := range commands {
		if !strings.Contains(out.String(), "  "+c.name+" ") {
			t.Errorf("orderd help does not list %q:\n%s", c.name, out.String())
		}
	}
}

func TestHelpOfACommandShowsItsSettings(t *testing.T) {
	for cmd, want := range map[string]string{"serve": "-grpc-addr", "migrate": "-keyspace", "verify": "-acks", "version": "print the version",
		"keys": "orderd keys revoke", "dev-setup": "-hosts", "healthcheck": "-grpc-addr"} {
		var out bytes.Buffer
		if err := help([]string{cmd}, &out); err != nil {
			t.Fatalf("orderd help %s: %v", cmd, err)
		}
		if !strings.Contains(out.String(), want) {
			t.Errorf("orderd help %s lacks %q:\n%s", cmd, want, out.String())
		}
	}
}

// Every command, and every keys subcommand, answers -h and --help with its
// usage on stdout and no error (exit 0), and runs nothing.
func TestEveryCommandAnswersHelp(t *testing.T) {
	var calls [][]string
	for _, spelling := range []string{"-h", "--help", "-help"} {
		calls = append(calls, []string{spelling}, []string{"help", spelling}, []string{"keys", "add", spelling},
			[]string{"keys", "list", spelling}, []string{"keys", "revoke", spelling})
		for _, c := range commands {
			calls = append(calls, []string{c.name, spelling})
		}
	}
	for _, args := range calls {
		var out bytes.Buffer
		if err := run(args, &out); err != nil {
			t.Errorf("orderd %s: %v, want usage and exit 0", strings.Join(args, " "), err)
			continue
		}
		want := "orderd"
		if len(args) > 1 && args[0] != "help" {
			want = "orderd " + strings.Join(args[:len(args)-1], " ")
		}
		if !strings.HasPrefix(out.String(), want) {
			t.Errorf("orderd %s printed %q..., want it to start with %q", strings.Join(args, " "), firstLine(out.String()), want)
		}
	}
}

// -h of each command names every ORDERD_* variable its settings read, next
// to the flag it sets.
func TestHelpNamesEveryVariableTheCommandReads(t *testing.T) {
	for _, c := range commands {
		if !c.settings {
			continue
		}
		cfg := &config{}
		cfg.flags(c.name)
		if len(cfg.envRead) == 0 {
			t.Fatalf("orderd %s reads no ORDERD_* variable: the test sees nothing", c.name)
		}
		var out bytes.Buffer
		if err := run([]string{c.name, "-h"}, &out); err != nil {
			t.Fatal(err)
		}
		for _, name := range cfg.envRead {
			if !strings.Contains(out.String(), "(env "+name+")") {
				t.Errorf("orderd %s -h does not name %s, which its settings read:\n%s", c.name, name, out.String())
			}
		}
	}
}

// Every ORDERD_* variable the sources of orderd name is in the help of some
// command: a variable read outside the settings' definitions (or with
// os.Getenv) would be missing from every -h.
func TestEveryVariableInTheSourcesIsInSomeHelp(t *testing.T) {
	notRead := []string{"ORDERD_DEV_KEY"} // printed by dev-setup for the client, never read by orderd
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var helps strings.Builder
	for _, c := range commands {
		if err := run([]string{c.name, "-h"}, &helps); err != nil {
			t.Fatal(err)
		}
	}
	for _, sub := range []string{"add", "list", "revoke"} {
		if err := run([]string{"keys", sub, "-h"}, &helps); err != nil {
			t.Fatal(err)
		}
	}
	variable := regexp.MustCompile(`ORDERD_[A-Z0-9_]+`)
	seen := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range variable.FindAllString(string(src), -1) {
			seen++
			if !slices.Contains(notRead, name) && !strings.Contains(helps.String(), "(env "+name+")") {
				t.Errorf("%s names %s, which no orderd COMMAND -h lists", f, name)
			}
		}
	}
	if seen == 0 {
		t.Fatal("no ORDERD_* variable found in the sources")
	}
}

func TestUnknownCommandNamesTheCommands(t *testing.T) {
	for _, args := range [][]string{{"serv"}, {"help", "serv"}} {
		err := run(args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), `unknown command "serv"`) || !strings.Contains(err.Error(), "copy-listing") {
			t.Errorf("run(%q) = %v, want the unknown-command error listing the commands", args, err)
		}
	}
}

func TestAnUnknownFlagIsAnErrorThatSaysWhereTheFlagsAre(t *testing.T) {
	var out bytes.Buffer
	err := run([]string{"migrate", "-no-such-flag"}, &out)
	if err == nil || !strings.Contains(err.Error(), "-no-such-flag") || !strings.Contains(err.Error(), "orderd migrate -h") {
		t.Errorf("orderd migrate -no-such-flag = %v, want an error naming the flag and orderd migrate -h", err)
	}
	if out.Len() != 0 {
		t.Errorf("orderd migrate -no-such-flag printed to stdout: %q", out.String())
	}
}

func firstLine(s string) string { line, _, _ := strings.Cut(s, "\n"); return line }
