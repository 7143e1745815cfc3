package main

import (
	"os"
	"strings"
	"testing"

	"github.com/atlasmart/orderd/projection"
)

// TestProjectionBatchSetting: -projection-batch / ORDERD_PROJECTION_BATCH
// is projection.DefaultBatch unless set, and outside 0-10 it is refused
// before connecting (over 10 partitions, Cassandra warns of every batch).
func TestProjectionBatchSetting(t *testing.T) {
	for _, tc := range []struct {
		env     string
		args    []string
		want    int
		refused bool
	}{
		{"", nil, projection.DefaultBatch, false},
		{"1", nil, 1, false},
		{"", []string{"-projection-batch", "10"}, 10, false},
		{"4", []string{"-projection-batch", "2"}, 2, false},
		{"11", nil, 0, true},
		{"", []string{"-projection-batch", "-1"}, 0, true},
	} {
		cfg, err := serveConfig(t, "ORDERD_PROJECTION_BATCH", tc.env, tc.args)
		if tc.refused {
			if err == nil || !strings.Contains(err.Error(), "projection-batch") {
				t.Errorf("%q %v: validate = %v, want projection-batch refused", tc.env, tc.args, err)
			}
			continue
		}
		if err != nil || cfg.projectionBatch != tc.want {
			t.Errorf("%q %v: batch %d (validate %v), want %d", tc.env, tc.args, cfg.projectionBatch, err, tc.want)
		}
	}
}

// serveConfig is serve's config parsed from args with the environment
// variable name set to value (unset when value is empty: an empty number
// is refused as not a number), and what validate says of it.
func serveConfig(t *testing.T, name, value string, args []string) (config, error) {
	t.Helper()
	t.Setenv(name, value)
	if value == "" {
		os.Unsetenv(name)
	}
	t.Setenv("ORDERD_INSECURE", "true") // validate checks the security settings of serve too
	var cfg config
	if err := cfg.flags("serve").Parse(args); err != nil {
		t.Fatalf("%s=%q %v: %v", name, value, args, err)
	}
	return cfg, cfg.validate("serve")
}
