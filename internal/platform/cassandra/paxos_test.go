package cassandra

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckAnyCommit(t *testing.T) {
	safe := func(host string) PaxosSettings { return PaxosSettings{Host: host, Variant: "v2", Purging: "repaired"} }
	for _, tc := range []struct {
		name  string
		nodes []PaxosSettings
		want  []string // substrings of the error; nil: no error
	}{
		{"every node v2 and repaired", []PaxosSettings{safe("127.0.0.1"), safe("127.0.0.2"), safe("127.0.0.3")}, nil},
		{"one node legacy", []PaxosSettings{safe("127.0.0.1"), {Host: "127.0.0.2", Variant: "v2", Purging: "legacy"}},
			[]string{"127.0.0.2: paxos_variant v2, paxos_state_purging legacy"}},
		{"one node v1", []PaxosSettings{{Host: "127.0.0.1", Variant: "v1", Purging: "repaired"}},
			[]string{"127.0.0.1: paxos_variant v1"}},
		{"gc_grace is not repaired", []PaxosSettings{{Host: "127.0.0.1", Variant: "v2", Purging: "gc_grace"}},
			[]string{"paxos_state_purging gc_grace"}},
		{"a node that did not answer", []PaxosSettings{safe("127.0.0.1"), {Host: "127.0.0.3", Err: errors.New("no connections")}},
			[]string{"127.0.0.3: not asked (no connections)"}},
		{"settings missing", []PaxosSettings{{Host: "127.0.0.1"}}, []string{"paxos_variant (unset), paxos_state_purging (unset)"}},
		{"no node", nil, []string{"knows no node"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckAnyCommit(tc.nodes)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("CheckAnyCommit = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("CheckAnyCommit = nil, want an error naming %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}
