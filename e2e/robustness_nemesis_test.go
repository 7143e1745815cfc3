package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The nemesis of the robustness run: one fault at a time, in rounds of
// every kind shuffled by the run's seed, held for a few seconds and then healed, until the traffic
// ends. Every fault it injects is healed before it returns, and any it
// could not heal (the test failed mid-fault) is healed by the test's
// cleanup, so the cluster, the broker and the loopback rules are as they
// were when the run ends, pass or fail.

// The kinds of fault.
const (
	faultKillOrderd = "kill-orderd"    // SIGKILL one orderd instance, start it again on its address
	faultPauseNode  = "pause-node"     // SIGSTOP a Cassandra node, SIGCONT it
	faultKillBroker = "kill-broker"    // SIGKILL the Kafka broker, start it again
	faultPartition  = "partition-node" // drop a node's internode traffic (iptables on loopback), then restore it
	faultKillNode   = "kill-node"      // SIGKILL a Cassandra node, start it again (30-60 s to rejoin)
	faultClockLead  = "clock-lead"     // restart one orderd instance with its clock clockLead ahead, then without
	// clockLead is far past the instances' reconcile grace and skew bound:
	// such an instance would see every entry due before its claim lands.
	clockLead        = 90 * time.Second
	iptablesComment  = "orderd-robustness"
	cassandraStorage = "7000" // the internode port of internal/tools/localcluster's nodes
)

// instances are the orderd processes of the run, replaced when killed.
type instances struct {
	mu    sync.Mutex
	procs []*orderdProcess
	env   []string
	// gone is every process a restart replaced, for its log.
	gone []*orderdProcess
}

func (in *instances) addrs() []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	var out []string
	for _, p := range in.procs {
		out = append(out, p.addr)
	}
	return out
}

// restart stops instance i (SIGTERM) and starts it again on its address
// with the run's settings and extra ones.
func (in *instances) restart(i int, extra ...string) error {
	in.mu.Lock()
	p := in.procs[i]
	in.mu.Unlock()
	if err := p.stop(); err != nil {
		return err
	}
	q, err := launchOrderdAt(p.addr, append(slices.Clone(in.env), extra...)...)
	if err != nil {
		return err
	}
	in.mu.Lock()
	in.procs[i] = q
	in.gone = append(in.gone, p)
	in.mu.Unlock()
	return nil
}

// saveLogs writes the output of every process the run started into dir,
// one file each, named by the order they were started in.
func (in *instances) saveLogs(dir string) error {
	in.mu.Lock()
	all := append(slices.Clone(in.gone), in.procs...)
	in.mu.Unlock()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i, p := range all {
		name := filepath.Join(dir, fmt.Sprintf("orderd-%02d-%s.log", i, strings.ReplaceAll(p.addr, ":", "_")))
		if err := os.WriteFile(name, []byte(p.output.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (in *instances) stopAll() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	var errs []string
	for _, p := range in.procs {
		if err := p.stop(); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("stop orderd: %s", strings.Join(errs, "; "))
	}
	return nil
}

type nemesis struct {
	t     *testing.T
	rng   *rand.Rand
	kinds []string
	procs *instances
	// deck is what is left of a shuffled round of kinds: every kind comes
	// once before any comes again, so a short run meets each.
	deck []string

	mu     sync.Mutex
	counts map[string]int
	heal   func(context.Context) error // the fault in force, if any
	log    []string
}

// faultKinds are the faults this run injects: the cheap ones always,
// node kills only in runs long enough to wait for a node to rejoin, the
// partition only where iptables works.
func faultKinds(t *testing.T, traffic time.Duration) []string {
	kinds := []string{faultKillOrderd, faultPauseNode, faultKillBroker, faultClockLead}
	if err := iptablesWorks(); err != nil {
		failInCIElseLog(t, fmt.Sprintf("no %s faults: %v", faultPartition, err))
	} else {
		kinds = append(kinds, faultPartition)
	}
	if traffic >= 5*time.Minute {
		kinds = append(kinds, faultKillNode)
	}
	return kinds
}

func failInCIElseLog(t *testing.T, reason string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("cannot run under CI=true: %s", reason)
	}
	t.Log(reason)
}

// run injects faults until ctx ends; the last one is healed before it
// returns.
func (n *nemesis) run(ctx context.Context) {
	for {
		if !sleepCtx(ctx, time.Duration(2000+n.rng.IntN(4000))*time.Millisecond) {
			return
		}
		if len(n.deck) == 0 {
			n.deck = slices.Clone(n.kinds)
			n.rng.Shuffle(len(n.deck), func(i, j int) { n.deck[i], n.deck[j] = n.deck[j], n.deck[i] })
		}
		kind := n.deck[0]
		n.deck = n.deck[1:]
		hold := time.Duration(3000+n.rng.IntN(7000)) * time.Millisecond
		target := n.rng.IntN(3)
		// Not ctx: a fault half injected when the traffic ends would
		// be left without its heal.
		injectCtx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		err := n.inject(injectCtx, kind, target)
		cancel()
		if err != nil {
			n.t.Errorf("nemesis: %s: %v", kind, err)
			return
		}
		sleepCtx(ctx, hold)
		if err := n.healNow(); err != nil {
			n.t.Errorf("nemesis: heal %s: %v", kind, err)
			return
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

func (n *nemesis) note(format string, args ...any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.log = append(n.log, time.Now().Format("15:04:05.000")+" "+fmt.Sprintf(format, args...))
}

// inject starts one fault on target (an instance or a node, 0-based). The
// heal is in force before the fault is, so a fault that fails half way
// (a node stopped, then an error) is healed too.
func (n *nemesis) inject(ctx context.Context, kind string, target int) error {
	act, heal, err := n.fault(kind, target)
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.heal = heal
	n.mu.Unlock()
	if err := act(ctx); err != nil {
		return err
	}
	n.mu.Lock()
	n.counts[kind]++
	n.mu.Unlock()
	n.note("%s %d", kind, target+1)
	return nil
}

// fault returns what injects a fault of kind on target, and what heals it.
func (n *nemesis) fault(kind string, target int) (act, heal func(context.Context) error, err error) {
	node := target + 1
	switch kind {
	case faultKillOrderd:
		n.procs.mu.Lock()
		p := n.procs.procs[target]
		n.procs.mu.Unlock()
		act = func(context.Context) error {
			if err := p.cmd.Process.Kill(); err != nil {
				return err
			}
			<-p.exited
			return nil
		}
		heal = func(context.Context) error {
			q, err := launchOrderdAt(p.addr, n.procs.env...)
			if err != nil {
				return err
			}
			n.procs.mu.Lock()
			n.procs.procs[target] = q
			n.procs.mu.Unlock()
			return nil
		}
	case faultClockLead:
		act = func(context.Context) error { return n.procs.restart(target, "ORDERD_CLOCK_LEAD="+clockLead.String()) }
		heal = func(context.Context) error { return n.procs.restart(target) }
	case faultPauseNode:
		act = func(ctx context.Context) error { return cluster.PauseNode(ctx, node) }
		heal = func(ctx context.Context) error { return cluster.ResumeNode(ctx, node) }
	case faultKillBroker:
		act, heal = broker.Kill, broker.Start
	case faultKillNode:
		act = func(ctx context.Context) error { return cluster.KillNode(ctx, node) }
		heal = func(ctx context.Context) error { return cluster.StartNode(ctx, node) }
	case faultPartition:
		rules, err := partitionRules(target)
		if err != nil {
			return nil, nil, err
		}
		act = func(context.Context) error {
			for _, r := range rules {
				if err := iptables(append([]string{"-I", "INPUT"}, r...)...); err != nil {
					return err
				}
			}
			return nil
		}
		heal = func(context.Context) error { return healIptables() }
	default:
		return nil, nil, fmt.Errorf("no fault %q", kind)
	}
	return act, heal, nil
}

// healNow heals the fault in force, if any.
func (n *nemesis) healNow() error {
	n.mu.Lock()
	heal := n.heal
	n.heal = nil
	n.mu.Unlock()
	if heal == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	err := heal(ctx)
	n.note("healed (err %v)", err)
	return err
}

// record is the log of faults injected and healed, one a line.
func (n *nemesis) record() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return strings.Join(n.log, "\n")
}

func (n *nemesis) summary() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var parts []string
	for _, k := range n.kinds {
		parts = append(parts, fmt.Sprintf("%s=%d", k, n.counts[k]))
	}
	return strings.Join(parts, ",")
}

// partitionRules are the iptables rules that cut node target (0-based)
// from the other nodes' internode traffic, both ways, while clients still
// reach it: every node binds its outgoing internode connections to its own
// address, so the storage port and the two addresses name that traffic.
func partitionRules(target int) ([][]string, error) {
	var addrs []string
	for _, cp := range cluster.ContactPoints() {
		host, _, err := net.SplitHostPort(cp)
		if err != nil {
			host = cp
		}
		addrs = append(addrs, host)
	}
	if target >= len(addrs) {
		return nil, fmt.Errorf("no node %d among %v", target+1, addrs)
	}
	self := addrs[target]
	var rules [][]string
	for _, other := range slices.Delete(slices.Clone(addrs), target, target+1) {
		for _, dir := range [][2]string{{self, other}, {other, self}} {
			for _, port := range []string{"--dport", "--sport"} {
				rules = append(rules, []string{"-s", dir[0], "-d", dir[1], "-p", "tcp", port, cassandraStorage,
					"-m", "comment", "--comment", iptablesComment, "-j", "DROP"})
			}
		}
	}
	return rules, nil
}

func iptables(args ...string) error {
	out, err := exec.Command("iptables", append([]string{"-w", "5"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// healIptables deletes every rule a robustness run added (also one an
// earlier run, killed mid-fault, left behind).
func healIptables() error {
	out, err := exec.Command("iptables", "-w", "5", "-S", "INPUT").CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables -S INPUT: %v: %s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.Contains(line, iptablesComment) || !strings.HasPrefix(line, "-A INPUT ") {
			continue
		}
		// -S prints the comment quoted only when it has spaces; ours has none.
		if err := iptables(append([]string{"-D", "INPUT"}, strings.Fields(strings.TrimPrefix(line, "-A INPUT "))...)...); err != nil {
			return err
		}
	}
	return nil
}

// iptablesWorks adds and deletes a rule that matches nothing.
func iptablesWorks() error {
	if _, err := exec.LookPath("iptables"); err != nil {
		return fmt.Errorf("%w (apt-get install -y iptables)", err)
	}
	probe := []string{"INPUT", "-s", "127.0.0.254", "-d", "127.0.0.254", "-p", "tcp", "--dport", "1",
		"-m", "comment", "--comment", iptablesComment + "-probe", "-j", "DROP"}
	if err := iptables(append([]string{"-A"}, probe...)...); err != nil {
		return err
	}
	return iptables(append([]string{"-D"}, probe...)...)
}
