package cassandra

import (
	"context"
	"fmt"
	"sort"
	"strings"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// PaxosSettings is what one node says of its Paxos configuration
// (system_views.settings, which each node answers for itself).
type PaxosSettings struct {
	Host string // the node's address
	// Variant and Purging are its paxos_variant and paxos_state_purging.
	Variant, Purging string
	// Err is why the node could not be asked (down, or no such view).
	Err error
}

const paxosSettingsCQL = `/* cassandra.paxos_settings */ SELECT name, value FROM system_views.settings
	WHERE name IN ('paxos_variant', 'paxos_state_purging')`

// ReadPaxosSettings asks every node the session knows of, each directly,
// for its Paxos settings. A node that cannot be asked has Err set.
func ReadPaxosSettings(ctx context.Context, s *gocql.Session) []PaxosSettings {
	hosts := s.GetHosts()
	out := make([]PaxosSettings, 0, len(hosts))
	for _, h := range hosts {
		ps := PaxosSettings{Host: h.ConnectAddress().String()}
		iter := s.Query(paxosSettingsCQL).SetHostID(h.HostID()).Consistency(gocql.One).IterContext(ctx)
		var name, value string
		for iter.Scan(&name, &value) {
			switch name {
			case "paxos_variant":
				ps.Variant = value
			case "paxos_state_purging":
				ps.Purging = value
			}
		}
		if err := iter.Close(); err != nil {
			ps.Err = err
		}
		out = append(out, ps)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Host < out[j].Host })
	return out
}

// CheckAnyCommit says whether a claim may commit at ANY on nodes: only if
// every node runs Paxos v2 with paxos_state_purging: repaired. Under that
// setting Paxos state is cleared only once paxos repair has shown it applied
// to a quorum of the base table, so a proposal accepted by a quorum whose
// commit never landed is still completed by the next serial read or repair;
// under legacy (TTL) purging Cassandra calls commit at ANY unsafe. A node
// that cannot be asked is not known to be safe, so it fails the check too:
// ask again when the cluster is whole, or run without ANY.
func CheckAnyCommit(nodes []PaxosSettings) error {
	if len(nodes) == 0 {
		return fmt.Errorf("claim commit at ANY: the session knows no node to ask for its Paxos settings")
	}
	var bad []string
	for _, n := range nodes {
		switch {
		case n.Err != nil:
			bad = append(bad, fmt.Sprintf("%s: not asked (%v)", n.Host, n.Err))
		case n.Variant != "v2" || n.Purging != "repaired":
			bad = append(bad, fmt.Sprintf("%s: paxos_variant %s, paxos_state_purging %s", n.Host, orUnset(n.Variant), orUnset(n.Purging)))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("claim commit at ANY needs paxos_variant: v2 and paxos_state_purging: repaired on every node (with paxos repair running); %s",
			strings.Join(bad, "; "))
	}
	return nil
}

func orUnset(v string) string {
	if v == "" {
		return "(unset)"
	}
	return v
}
