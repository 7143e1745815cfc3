package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/atlasmart/orderd/internal/platform/kafkaconn"
	"github.com/atlasmart/orderd/internal/tools/clientcreds"
	"github.com/atlasmart/orderd/internal/tools/freeport"
	"github.com/atlasmart/orderd/internal/tools/loadgen"
	"github.com/atlasmart/orderd/internal/tools/localcluster"
)

// Soak is the soak phase's run: the rate it held, and one sample per
// interval.
type Soak struct {
	// Rate is the open loop's rate in calls per second; RateFrom says where
	// it came from (-soak-rate, or half of the maximum measured first).
	Rate     float64 `json:"rate"`
	RateFrom string  `json:"rate_from"`
	// MaxThroughput is the maximum measured before the soak (0: the rate
	// was given).
	MaxThroughput float64      `json:"max_throughput,omitempty"`
	Seconds       float64      `json:"seconds"`
	EverySeconds  float64      `json:"every_seconds"`
	Brokers       string       `json:"brokers"`
	Group         string       `json:"group"`
	Samples       []SoakSample `json:"samples"`
	Verdicts      []Flatness   `json:"verdicts"`
	Summary       Result       `json:"summary"`
	// CatchUpSeconds is how long the reference consumer took to work off
	// the events of the warm-up and the maximum's measurement before the
	// soak started (at most -soak-catch-up), and LagAtStart its lag then.
	CatchUpSeconds float64 `json:"catch_up_seconds"`
	LagAtStart     int64   `json:"lag_at_start"`
	// PaxosRepairEverySeconds is how often a paxos repair ran during the
	// soak (0: none did), and PaxosRepairs the runs, node by node.
	PaxosRepairEverySeconds float64       `json:"paxos_repair_every_seconds,omitempty"`
	PaxosRepairs            []PaxosRepair `json:"paxos_repairs,omitempty"`
	started                 time.Time     // of the open loop
	lat                     soakLatencies // every call's latency, for the summary
}

// soakSetup is what the soak phase needs besides the bench.
type soakSetup struct {
	duration, every, ramp time.Duration
	catchUp               time.Duration // the most the consumer is given to catch up before the soak
	rate                  float64       // calls per second; 0: half the maximum measured in ramp
	orderd, consumer      string        // binaries
	env                   []string
	creds                 clientcreds.Options
	brokers, topic        string
	kafka                 func(user string) kafkaconn.Settings // how each user logs in to the broker
	keyspace, hosts       string                               // the reference consumer's keyspace (and group), the cluster
	clusterState, logGlob string                               // the local cluster's state folder (nodetool), its node logs
	paxosRepair           time.Duration                        // how often paxos repair runs during the soak; 0: never
}

// PaxosRepair is one node's paxos repair during the soak.
type PaxosRepair struct {
	At      time.Time `json:"at"`
	Node    int       `json:"node"`
	Seconds float64   `json:"seconds"`
	Error   string    `json:"error,omitempty"`
}

// soakStreams is the closed loop that measures the maximum: the most
// streams the other phases run, where orderd's throughput has levelled off
// on the local cluster.
const soakStreams = 64

// soakMaxInFlight caps the calls the open loop has waiting: past it, a
// call is shed (counted, not sent) rather than piling up without bound when
// orderd falls behind the rate.
const soakMaxInFlight = 1024

// soakPhase runs orderd as in production for s.duration — event delivery
// on, the reference consumer applying every event — under an open loop of
// new orders at a fixed rate, and samples it every s.every (SoakSample).
// An open loop, not closed-loop streams: calls are sent on schedule
// whether or not earlier ones have been answered, so a slowdown shows as
// latency and a growing backlog instead of quietly lowering the load, and
// each call's latency counts from when it was due.
func (b *bench) soakPhase(ctx context.Context, s soakSetup) (*Soak, error) {
	metricsAddr, err := freeport.Addr()
	if err != nil {
		return nil, err
	}
	od, err := startOrderd(s.orderd, append(slices.Clone(s.env), "ORDERD_KAFKA_TOPIC="+s.topic, "ORDERD_METRICS_ADDR="+metricsAddr), s.creds)
	if err != nil {
		return nil, fmt.Errorf("start an orderd publishing to %s: %w", s.topic, err)
	}
	defer od.stop()
	consumer, err := startConsumer(ctx, outboxSetup{consumer: s.consumer, brokers: s.brokers, kafka: s.kafka,
		topic: s.topic, keyspace: s.keyspace, hosts: s.hosts})
	// The consumer's keyspace is dropped after the consumer stops (deferred
	// calls run last first).
	defer func() { _ = b.cql.Query(`DROP KEYSPACE IF EXISTS ` + s.keyspace).Exec() }()
	if err != nil {
		return nil, err
	}
	defer consumer.stop()
	probes, err := newSoakProbes(metricsAddr, s.clusterState, s.brokers, s.kafka(localcluster.ConsumerUser), s.keyspace, s.logGlob)
	if err != nil {
		return nil, err
	}
	defer probes.close()
	if s.paxosRepair > 0 && probes.cluster == nil {
		return nil, fmt.Errorf("-soak-paxos-repair %s needs the local cluster's state folder (-cluster-state) to run nodetool", s.paxosRepair)
	}

	call := func(ctx context.Context, i int) error {
		_, err := od.client.CreateOrder(ctx, newRequest(i))
		return err
	}
	if _, _, err := b.measureRaw(ctx, "warmup", driver{name: "soak", orderd: od, do: call}, soakStreams, 2000); err != nil {
		return nil, err
	}
	soak := &Soak{Rate: s.rate, RateFrom: "-soak-rate", EverySeconds: s.every.Seconds(), Brokers: s.brokers, Group: s.keyspace}
	if s.rate <= 0 {
		top, err := closedLoopMax(ctx, soakStreams, s.ramp, call)
		if err != nil {
			return nil, err
		}
		soak.MaxThroughput, soak.Rate = top, top/2
		soak.RateFrom = fmt.Sprintf("half the maximum: %.1f calls/s measured over %s at %d closed-loop streams just before", top, s.ramp, soakStreams)
	}
	t0 := time.Now()
	soak.LagAtStart = catchUp(ctx, probes, soakLagFloor(soak.Rate), s.catchUp)
	soak.CatchUpSeconds, soak.Seconds = time.Since(t0).Seconds(), s.duration.Seconds()
	fmt.Fprintf(os.Stderr, "orderbench: soak %s at %.1f calls/s (%s), a sample every %s; consumer lag %d after %.0f s of catching up\n",
		s.duration, soak.Rate, soak.RateFrom, s.every, soak.LagAtStart, soak.CatchUpSeconds)
	cpu0 := procCPU(od.pid())
	repairCtx, stopRepairs := context.WithCancel(ctx)
	var repairs sync.WaitGroup
	if s.paxosRepair > 0 {
		soak.PaxosRepairEverySeconds = s.paxosRepair.Seconds()
		repairs.Go(func() { soak.PaxosRepairs = repairPaxos(repairCtx, probes.cluster, s.paxosRepair) })
	}
	soak.Samples = openLoop(ctx, soak, s.duration, s.every, call, probes)
	stopRepairs()
	repairs.Wait()
	soak.Summary = soak.summary(b.label, s.duration, (procCPU(od.pid()) - cpu0), peakRSSMB(od.pid()))
	return soak, nil
}

// repairPaxos runs `nodetool repair --paxos-only -pr` on each node of c in
// turn every interval until ctx ends, as an operator's schedule does in
// production: with paxos_state_purging: repaired a node purges the paxos
// state of an LWT only once a paxos repair has covered it. A repair
// cancelled by the end of the soak is not listed.
func repairPaxos(ctx context.Context, c *localcluster.Cluster, every time.Duration) []PaxosRepair {
	var out []PaxosRepair
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return out
		case <-t.C:
		}
		for i := 1; i <= c.Nodes(); i++ {
			start := time.Now()
			_, err := c.Nodetool(ctx, i, "repair", "--paxos-only", "-pr")
			if ctx.Err() != nil {
				return out
			}
			r := PaxosRepair{At: start.UTC(), Node: i, Seconds: time.Since(start).Seconds()}
			outcome := "done"
			if err != nil {
				r.Error, outcome = err.Error(), "failed: "+err.Error()
			}
			fmt.Fprintf(os.Stderr, "orderbench: soak: paxos repair on node %d, %.1f s: %s\n", i, r.Seconds, outcome)
			out = append(out, r)
		}
	}
}

// judge sets s's verdicts and prints them. It runs once every series is
// in: the JVMs' GC pauses are read from their logs after the run.
func (s *Soak) judge() {
	s.Verdicts = soakVerdicts(s)
	for _, v := range s.Verdicts {
		fmt.Fprintln(os.Stderr, "orderbench: soak "+v.String())
	}
}

// catchUp waits up to limit for the consumer's lag to fall to bound (so
// the lag series starts from the steady state, not from the backlog of
// the warm-up) and returns the lag it started with (-1: not read).
func catchUp(ctx context.Context, p *soakProbes, bound float64, limit time.Duration) int64 {
	deadline := time.Now().Add(limit)
	for {
		lag, err := p.lag(ctx)
		if err == nil && float64(lag) <= bound || time.Now().After(deadline) {
			if err != nil {
				return -1
			}
			return lag
		}
		time.Sleep(2 * time.Second)
	}
}

// closedLoopMax is the throughput of c streams calling back to back for d.
func closedLoopMax(ctx context.Context, c int, d time.Duration, call op) (float64, error) {
	var n, failed atomic.Int64
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	start := time.Now()
	for k := range c {
		wg.Go(func() {
			for i := k; time.Now().Before(deadline); i += c {
				if call(ctx, i) != nil {
					failed.Add(1)
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	if f := failed.Load(); f > n.Load()/100 {
		return 0, fmt.Errorf("measuring the maximum: %d of %d calls failed", f, n.Load())
	}
	return float64(n.Load()-failed.Load()) / time.Since(start).Seconds(), nil
}

// soakLatencies gathers the open loop's calls: the current interval's, and
// all of them.
type soakLatencies struct {
	mu           sync.Mutex
	window, all  []time.Duration
	errors, shed int
}

func (l *soakLatencies) add(d time.Duration, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.window = append(l.window, d)
	l.all = append(l.all, d)
	if err != nil {
		l.errors++
	}
}

func (l *soakLatencies) addShed() {
	l.mu.Lock()
	l.shed++
	l.mu.Unlock()
}

// take returns the interval's figures and starts the next interval.
func (l *soakLatencies) take(every time.Duration) SoakSample {
	l.mu.Lock()
	lat, errs, shed := l.window, l.errors, l.shed
	l.window, l.errors, l.shed = nil, 0, 0
	l.mu.Unlock()
	slices.Sort(lat)
	return SoakSample{Requests: len(lat), Errors: errs, Shed: shed, Throughput: float64(len(lat)-errs) / every.Seconds(),
		P50ms: ms(loadgen.Percentile(lat, 50)), P99ms: ms(loadgen.Percentile(lat, 99))}
}

// openLoop sends calls at soak.Rate for d and returns a sample every
// interval (the probes read while the load goes on).
func openLoop(ctx context.Context, soak *Soak, d, every time.Duration, call op, probes *soakProbes) []SoakSample {
	gap := time.Duration(float64(time.Second) / soak.Rate)
	soak.started = time.Now()
	end := soak.started.Add(d)
	var samples []SoakSample
	stopped := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-stopped:
				return
			case at := <-t.C:
				s := soak.lat.take(every)
				s.At = at.UTC()
				probes.read(ctx, &s)
				samples = append(samples, s)
				fmt.Fprintf(os.Stderr, "orderbench: soak %s: %d calls, %d errors, %d shed, p50 %.1f ms, p99 %.1f ms, RSS %.1f MB, %0.f goroutines, compactions %v, tombstone warnings %d, lag %d%s\n",
					at.Sub(soak.started).Round(time.Second), s.Requests, s.Errors, s.Shed, s.P50ms, s.P99ms, s.RSSMB, s.Goroutines,
					s.PendingCompactions, s.TombstoneWarnings, s.ConsumerLag, problems(s.Problems))
			}
		}
	})
	inFlight := make(chan struct{}, soakMaxInFlight)
	var calls sync.WaitGroup
	for i := 0; ; i++ {
		due := soak.started.Add(time.Duration(i) * gap)
		if !due.Before(end) {
			break
		}
		time.Sleep(time.Until(due))
		select {
		case inFlight <- struct{}{}:
		default:
			soak.lat.addShed()
			continue
		}
		calls.Go(func() {
			defer func() { <-inFlight }()
			err := call(ctx, i)
			soak.lat.add(time.Since(due), err)
		})
	}
	calls.Wait()
	// The last tick falls at the end when d is a multiple of every; give it
	// a moment before stopping the sampler.
	time.Sleep(min(every/10, time.Second))
	close(stopped)
	sampler.Wait()
	return samples
}

func problems(ps []string) string {
	if len(ps) == 0 {
		return ""
	}
	return fmt.Sprintf(" (not read: %v)", ps)
}

// summary is the whole soak as one Result.
func (s *Soak) summary(label string, d, cpu time.Duration, peakRSS float64) Result {
	var errs int
	for _, x := range s.Samples {
		errs += x.Errors
	}
	all := s.lat.all
	slices.Sort(all)
	n := len(all)
	r := Result{Label: label, Phase: "soak", Driver: "orderd", Requests: n, Errors: errs, Seconds: d.Seconds(),
		Throughput: float64(n-errs) / d.Seconds(), P50ms: ms(loadgen.Percentile(all, 50)), P95ms: ms(loadgen.Percentile(all, 95)),
		P99ms: ms(loadgen.Percentile(all, 99)), OrderdPeakRSSMB: peakRSS, OrderdCPUPer1k: cpu.Seconds() * 1000 / float64(max(n, 1))}
	if len(s.Samples) > 0 {
		r.RSSStartMB, r.RSSEndMB = s.Samples[0].RSSMB, s.Samples[len(s.Samples)-1].RSSMB
	}
	return r
}

// soakFlags are run's flags of the soak phase (besides -soak, its length).
type soakFlags struct {
	rate                 float64
	every, ramp, catchUp time.Duration
	clusterState         string
	paxosRepair          time.Duration
}

func (s *soakFlags) register(fs *flag.FlagSet) {
	fs.Float64Var(&s.rate, "soak-rate", 0, "the soak's open-loop rate in calls/s; 0: half the maximum measured first (-soak-ramp)")
	fs.DurationVar(&s.every, "soak-every", time.Minute, "the soak's sampling interval")
	fs.DurationVar(&s.ramp, "soak-ramp", 45*time.Second, "how long the soak measures the maximum (closed loop, 64 streams) when -soak-rate is 0")
	fs.DurationVar(&s.catchUp, "soak-catch-up", 5*time.Minute, "the most the soak waits for the reference consumer to work off the warm-up's events before it starts")
	fs.StringVar(&s.clusterState, "cluster-state", ".cluster", "the local cluster's state folder: the soak runs nodetool compactionstats and tablestats on its nodes (empty: not read)")
	fs.DurationVar(&s.paxosRepair, "soak-paxos-repair", 0, "run nodetool repair --paxos-only -pr on each node in turn this often during the soak, as production's schedule does (0: never)")
}

// setup is the soak phase's setup from the run's flags: its own topic, and
// the reference consumer's keyspace and group.
func (s *soakFlags) setup(f runFlags, env []string, creds clientcreds.Options, kafka func(string) kafkaconn.Settings, keyspace string) soakSetup {
	return soakSetup{duration: f.soak, every: s.every, ramp: s.ramp, catchUp: s.catchUp, rate: s.rate, orderd: f.orderd, consumer: f.consumer,
		env: env, creds: creds, brokers: f.kafka, kafka: kafka, topic: keyspace + ".soak", keyspace: keyspace + "_soak", hosts: f.contactPoints,
		clusterState: s.clusterState, logGlob: f.nodeLogs, paxosRepair: s.paxosRepair}
}
