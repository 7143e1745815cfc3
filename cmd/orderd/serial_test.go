package main

import (
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
