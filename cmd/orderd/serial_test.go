package main

import (
	"strings"
	"testing"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// TestSerialConsistencySetting: -serial-consistency / ORDERD_SERIAL_CONSISTENCY
// reach the session of every command that talks to Cassandra (migrate
// included: its lock and version records are LWTs too); the default is
// local_serial and anything else is refused before connecting.
func TestSerialConsistencySetting(t *testing.T) {
	for _, tc := range []struct {
		env  string
		args []string
		want gocql.Consistency
	}{
		{"", nil, gocql.LocalSerial},
		{"serial", nil, gocql.Serial},
		{"SERIAL", nil, gocql.Serial},
		{"serial", []string{"-serial-consistency", "local_serial"}, gocql.LocalSerial},
		{"", []string{"-serial-consistency", "serial"}, gocql.Serial},
	} {
		for _, cmd := range []string{"serve", "reconcile", "migrate", "verify"} {
			t.Setenv("ORDERD_SERIAL_CONSISTENCY", tc.env)
			var cfg config
			if err := cfg.flags(cmd).Parse(tc.args); err != nil {
				t.Fatalf("%s %v: %v", cmd, tc.args, err)
			}
			cc, err := cfg.cassandraConfig("orderd", nil)
			if err != nil || cc.Serial != tc.want {
				t.Errorf("%s with ORDERD_SERIAL_CONSISTENCY=%q %v: Serial %v, %v; want %v", cmd, tc.env, tc.args, cc.Serial, err, tc.want)
			}
		}
	}
	t.Setenv("ORDERD_SERIAL_CONSISTENCY", "quorum")
	var cfg config
	if err := cfg.flags("serve").Parse(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.cassandraConfig("orderd", nil); err == nil {
		t.Error("ORDERD_SERIAL_CONSISTENCY=quorum accepted, want an error")
	}
}

// TestClaimCommitSetting: -claim-commit / ORDERD_CLAIM_COMMIT is
// local_quorum by default, any when asked, and anything else is refused
// before connecting; commands that claim nothing do not take it.
func TestClaimCommitSetting(t *testing.T) {
	for _, tc := range []struct {
		env     string
		args    []string
		want    bool
		refused bool
	}{
		{"", nil, false, false},
		{"any", nil, true, false},
		{"ANY", nil, true, false},
		{"local_quorum", nil, false, false},
		{"", []string{"-claim-commit", "any"}, true, false},
		{"quorum", nil, false, true},
	} {
		cfg, err := serveConfig(t, "ORDERD_CLAIM_COMMIT", tc.env, tc.args)
		if tc.refused {
			if err == nil || !strings.Contains(err.Error(), "claim-commit") {
				t.Errorf("%q %v: validate = %v, want claim-commit refused", tc.env, tc.args, err)
			}
			continue
		}
		got, cerr := cfg.claimCommitAny()
		if err != nil || cerr != nil || got != tc.want {
			t.Errorf("%q %v: any %v (validate %v, %v), want %v", tc.env, tc.args, got, err, cerr, tc.want)
		}
	}
	var cfg config
	if err := cfg.flags("reconcile").Parse([]string{"-claim-commit", "any"}); err == nil {
		t.Error("reconcile took -claim-commit; it claims nothing")
	}
}
