package main

import (
	"bytes"
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
	for cmd, want := range map[string]string{"serve": "-grpc-addr", "migrate": "-keyspace", "verify": "-acks", "version": "print the version"} {
		var out bytes.Buffer
		if err := help([]string{cmd}, &out); err != nil {
			t.Fatalf("orderd help %s: %v", cmd, err)
		}
		if !strings.Contains(out.String(), want) {
			t.Errorf("orderd help %s lacks %q:\n%s", cmd, want, out.String())
		}
	}
}

func TestUnknownCommandNamesTheCommands(t *testing.T) {
	for _, args := range [][]string{{"serv"}, {"help", "serv"}} {
		err := run(args)
		if err == nil || !strings.Contains(err.Error(), `unknown command "serv"`) || !strings.Contains(err.Error(), "copy-listing") {
			t.Errorf("run(%q) = %v, want the unknown-command error listing the commands", args, err)
		}
	}
}
