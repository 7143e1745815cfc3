package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/atlasmart/orderd/internal/platform/kafkaconn"
	"github.com/atlasmart/orderd/internal/tools/localcluster"
)

// SoakSample is one interval of the soak: the load's figures over the
// interval, and the state of orderd, the cluster and the consumer at its end.
type SoakSample struct {
	At time.Time `json:"at"`
	// Requests are the calls answered in the interval (Errors of them
	// failed); Shed are the calls the open loop did not send because
	// soakMaxInFlight were already waiting: the load outran orderd.
	Requests   int     `json:"requests"`
	Errors     int     `json:"errors"`
	Shed       int     `json:"shed"`
	Throughput float64 `json:"throughput"`
	P50ms      float64 `json:"p50_ms"`
	P99ms      float64 `json:"p99_ms"`
	// RSSMB and Goroutines are orderd's process_resident_memory_bytes (in
	// MB) and go_goroutines from its /metrics; 0: not read.
	RSSMB      float64 `json:"rss_mb"`
	Goroutines float64 `json:"goroutines"`
	// PendingCompactions is each node's "pending tasks" of nodetool
	// compactionstats (node1, node2, ...); a node not read is missing.
	PendingCompactions map[string]int `json:"pending_compactions"`
	// PaxosMB is each node's system.paxos on disk in MB (nodetool
	// tablestats: "Space used (live)"): the LWTs' state, which a node
	// keeps until a paxos repair lets it purge it (paxos_state_purging:
	// repaired); a node not read is missing.
	PaxosMB map[string]float64 `json:"paxos_mb,omitempty"`
	// TombstoneWarnings are the tombstone lines the node logs gained in the
	// interval.
	TombstoneWarnings int `json:"tombstone_warnings"`
	// ConsumerLag is the reference consumer's group lag in records over the
	// topic's partitions (end offset − committed offset); -1: not read.
	ConsumerLag int64 `json:"consumer_lag"`
	// GCPauseMs is, per JVM whose GC log the run read (node1, ...,
	// broker), the time it stood stopped in the interval: its collections'
	// pauses (ZGC: allocation stalls) that ended in it, summed. Set after
	// the soak, from the logs; missing: no log was read.
	GCPauseMs map[string]float64 `json:"gc_pause_ms,omitempty"`
	// Problems are what could not be read this interval.
	Problems []string `json:"problems,omitempty"`
}

// soakProbes reads the state a sample ends with.
type soakProbes struct {
	metricsURL string                // orderd's /metrics
	cluster    *localcluster.Cluster // for nodetool; nil: not read
	admin      *kadm.Client
	group      string
	logs       *nodeLogs
	logGlob    string
}

func newSoakProbes(metricsAddr, clusterState, brokers string, conn kafkaconn.Settings, group, logGlob string) (*soakProbes, error) {
	p := &soakProbes{metricsURL: "http://" + metricsAddr + "/metrics", group: group, logGlob: logGlob, logs: watchNodeLogs(logGlob)}
	if clusterState != "" {
		c, err := localcluster.New(localcluster.Config{StateDir: clusterState, Log: io.Discard})
		if err != nil {
			return nil, fmt.Errorf("local cluster at %s: %w", clusterState, err)
		}
		p.cluster = c
	}
	opts, err := conn.ClientOpts()
	if err != nil {
		return nil, fmt.Errorf("kafka admin client: %w", err)
	}
	kc, err := kgo.NewClient(append(opts, kgo.SeedBrokers(brokers))...)
	if err != nil {
		return nil, fmt.Errorf("kafka admin client: %w", err)
	}
	p.admin = kadm.NewClient(kc)
	return p, nil
}

func (p *soakProbes) close() { p.admin.Close() }

// read fills s's state figures, noting what it could not read.
func (p *soakProbes) read(ctx context.Context, s *SoakSample) {
	note := func(err error) { s.Problems = append(s.Problems, err.Error()) }
	if rss, gr, err := p.orderdState(ctx); err != nil {
		note(err)
	} else {
		s.RSSMB, s.Goroutines = rss/(1<<20), gr
	}
	s.PendingCompactions, s.PaxosMB = map[string]int{}, map[string]float64{}
	for i := 1; p.cluster != nil && i <= p.cluster.Nodes(); i++ {
		node := fmt.Sprintf("node%d", i)
		out, err := p.cluster.Nodetool(ctx, i, "compactionstats")
		if err == nil {
			s.PendingCompactions[node], err = pendingCompactions(out)
		}
		if err != nil {
			note(err)
		}
		out, err = p.cluster.Nodetool(ctx, i, "tablestats", "system.paxos")
		if err == nil {
			var bytes int64
			bytes, err = liveSpace(out)
			s.PaxosMB[node] = float64(bytes) / (1 << 20)
		}
		if err != nil {
			note(err)
		}
	}
	// The next interval's watch starts before this one's lines are read: a
	// line written in between counts in both, none is lost.
	prev := p.logs
	p.logs = watchNodeLogs(p.logGlob)
	s.TombstoneWarnings = len(prev.tombstoneWarnings())
	if lag, err := p.lag(ctx); err != nil {
		s.ConsumerLag = -1
		note(err)
	} else {
		s.ConsumerLag = lag
	}
}

// orderdState is orderd's resident memory in bytes and its goroutines.
func (p *soakProbes) orderdState(ctx context.Context) (rss, goroutines float64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.metricsURL, nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, fmt.Errorf("scrape orderd: %w", err)
	}
	defer resp.Body.Close()
	return processGauges(resp.Body)
}

// processGauges reads process_resident_memory_bytes and go_goroutines from
// a Prometheus text exposition.
func processGauges(r io.Reader) (rss, goroutines float64, err error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return 0, 0, fmt.Errorf("parse orderd's metrics: %w", err)
	}
	gauge := func(name string) (float64, error) {
		f, ok := fams[name]
		if !ok || len(f.GetMetric()) == 0 || f.GetType() != dto.MetricType_GAUGE {
			return 0, fmt.Errorf("orderd's metrics have no gauge %s", name)
		}
		return f.GetMetric()[0].GetGauge().GetValue(), nil
	}
	if rss, err = gauge("process_resident_memory_bytes"); err != nil {
		return 0, 0, err
	}
	goroutines, err = gauge("go_goroutines")
	return rss, goroutines, err
}

// pendingTasksLine is compactionstats' count of pending compactions:
// "pending tasks: 3" (Cassandra 4) or "pending tasks    3" (5.0).
var pendingTasksLine = regexp.MustCompile(`(?m)^pending tasks:?\s+(\d+)\s*$`)

// pendingCompactions reads the pending compactions from nodetool
// compactionstats output.
func pendingCompactions(out string) (int, error) {
	m := pendingTasksLine.FindStringSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("no pending tasks in nodetool compactionstats: %.200q", out)
	}
	return strconv.Atoi(m[1])
}

// liveSpaceLine is tablestats' bytes on disk of a table's live sstables.
var liveSpaceLine = regexp.MustCompile(`(?m)^\s*Space used \(live\):\s+(\d+)\s*$`)

// liveSpace reads a table's live bytes on disk from nodetool tablestats
// output (without -H).
func liveSpace(out string) (int64, error) {
	m := liveSpaceLine.FindStringSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("no live space in nodetool tablestats: %.200q", out)
	}
	return strconv.ParseInt(m[1], 10, 64)
}

// lag is the consumer group's total lag in records.
func (p *soakProbes) lag(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	lags, err := p.admin.Lag(ctx, p.group)
	if err != nil {
		return 0, fmt.Errorf("lag of group %s: %w", p.group, err)
	}
	l, ok := lags[p.group]
	if !ok {
		return 0, fmt.Errorf("lag of group %s: not described", p.group)
	}
	if err := l.Error(); err != nil {
		return 0, fmt.Errorf("lag of group %s: %w", p.group, err)
	}
	return l.Lag.Total(), nil
}
