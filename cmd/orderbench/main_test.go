package main

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
)

func TestHelpIsUsageNotAnUnknownCommand(t *testing.T) {
	for _, arg := range []string{"-h", "--help", "help"} {
		var out bytes.Buffer
		if err := run([]string{arg}, &out); err != nil {
			t.Errorf("orderbench %s: %v, want the usage and exit 0", arg, err)
		}
		for _, cmd := range []string{"run", "report", "serial"} {
			if !strings.Contains(out.String(), "  "+cmd+" ") {
				t.Errorf("orderbench %s does not list %s:\n%s", arg, cmd, out.String())
			}
		}
	}
	for _, cmd := range []string{"run", "report", "serial"} {
		if err := run([]string{cmd, "--help"}, &bytes.Buffer{}); !errors.Is(err, flag.ErrHelp) {
			t.Errorf("orderbench %s --help = %v, want flag.ErrHelp (its flags printed, exit 0)", cmd, err)
		}
	}
	if err := run([]string{"bench"}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), `unknown command "bench"`) {
		t.Errorf("orderbench bench = %v, want an unknown-command error", err)
	}
}
