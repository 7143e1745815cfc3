package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"

	"github.com/atlasmart/orderd/cql"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/ledger"
)

// serialCmd measures the claim at LOCAL_SERIAL against SERIAL on a cluster
// of two or more data centres, side by side in one run:
// one keyspace replicated in every DC given, two sessions that differ only
// in their serial consistency (cassandra.Config.Serial, what
// ORDERD_SERIAL_CONSISTENCY sets), each with a ledger.Ledger, and
// claims that alternate between them (ABBA order, so neither level always
// runs first). Each claim is ledger.Store.Claim, the handler's call: the
// due-queue entry (a LOCAL_QUORUM write) and then the claim LWT, INSERT ...
// IF NOT EXISTS. The LWT alone is timed too, from the driver's own start
// and end times of ledger.claim. It prints p50, p99 and mean per level and
// their ratio; it asserts nothing.
//
//	orderbench serial -contact-points 127.0.0.4,127.0.0.5,127.0.0.6,127.0.0.7 -replication dc1:2,dc2:2
func serialCmd(args []string) error {
	fs := flag.NewFlagSet("orderbench serial", flag.ContinueOnError)
	contactPoints := fs.String("contact-points", "127.0.0.4,127.0.0.5,127.0.0.6,127.0.0.7", "Cassandra contact points (every DC's)")
	localDC := fs.String("local-dc", "dc1", "the DC orderd runs in: coordinators and LOCAL_* levels")
	replication := fs.String("replication", "dc1:2,dc2:2", "the keyspace's NetworkTopologyStrategy replication, dc:rf,...")
	claims := fs.Int("claims", 1000, "measured claims per level")
	warmup := fs.Int("warmup", 100, "claims per level before measuring (not counted)")
	concurrency := fs.Int("concurrency", 1, "pairs of claims in flight at once")
	label := fs.String("label", "", "what this run is (printed with the results), e.g. loopback or netem 15ms")
	keep := fs.Bool("keep", false, "keep the keyspace afterwards")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *claims < 1 || *warmup < 0 || *concurrency < 1 {
		return errors.New("claims and concurrency must be positive, warmup not negative")
	}
	repl, err := replicationMap(*replication)
	if err != nil {
		return err
	}
	ctx := context.Background()
	hosts := strings.Split(*contactPoints, ",")
	keyspace := fmt.Sprintf("bench_serial_%d", time.Now().Unix())

	admin, err := cassandra.NewSession(cassandra.Config{Hosts: hosts, LocalDC: *localDC, Timeout: 30 * time.Second})
	if err != nil {
		return err
	}
	defer admin.Close()
	// The keyspace is created here, in every DC: the migrator only creates
	// one replicated in a single DC, and leaves an existing one as it is.
	if err := admin.Query(`CREATE KEYSPACE ` + keyspace + ` WITH replication = ` + repl).Exec(); err != nil {
		return fmt.Errorf("create keyspace %s: %w", keyspace, err)
	}
	if !*keep {
		defer func() { _ = admin.Query(`DROP KEYSPACE IF EXISTS ` + keyspace).Exec() }()
	}
	if _, err := cql.Migrate(ctx, cassandra.Wrap(admin), cql.Config{Keyspace: keyspace, DataCenter: *localDC}); err != nil {
		return fmt.Errorf("migrate %s: %w", keyspace, err)
	}

	levels := []gocql.Consistency{gocql.LocalSerial, gocql.Serial}
	stores := make([]*ledger.Ledger, len(levels))
	lwt := make([]*lwtTimes, len(levels))
	for k, serial := range levels {
		lwt[k] = &lwtTimes{}
		s, err := cassandra.NewSession(cassandra.Config{Hosts: hosts, LocalDC: *localDC, Keyspace: keyspace,
			Serial: serial, QueryObserver: lwt[k]})
		if err != nil {
			return err
		}
		defer s.Close()
		if got := cassandra.Wrap(s).Serial(); got != serial {
			return fmt.Errorf("session made for %v runs at %v", serial, got)
		}
		// DueAfter: the entries never fall due while the run lasts (no
		// reconciler reads them anyway).
		if stores[k], err = ledger.NewCassandraStore(cassandra.Wrap(s), ledger.Config{DueAfter: 2 * time.Hour}); err != nil {
			return err
		}
	}

	claim := func(k int) (time.Duration, error) {
		rec := ledger.Record{
			Key:      ledger.Key{Tenant: "bench", Operation: "CREATE_ORDER", RequestID: uuid.New()},
			EntityID: uuid.New(), Fingerprint: "sha256:v1:" + strings.Repeat("0", 64), Command: []byte(`{"v":1}`),
			CreatedAt: time.Now().UTC().Truncate(time.Millisecond), ClaimToken: uuid.New(),
		}
		start := time.Now()
		won, _, err := stores[k].Claim(ctx, rec, nil)
		took := time.Since(start)
		if err == nil && !won {
			err = fmt.Errorf("claim of a new request id %s not won", rec.RequestID)
		}
		return took, err
	}
	// run makes n pairs of claims from conc workers; pair i runs
	// LOCAL_SERIAL first when i is even, SERIAL first when odd.
	run := func(n int, record bool) ([][]time.Duration, error) {
		out := make([][]time.Duration, len(levels))
		var (
			mu    sync.Mutex
			wg    sync.WaitGroup
			first error
		)
		next := make(chan int)
		for range *concurrency {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					order := []int{0, 1}
					if i%2 == 1 {
						order = []int{1, 0}
					}
					for _, k := range order {
						took, err := claim(k)
						mu.Lock()
						if err != nil && first == nil {
							first = fmt.Errorf("%v claim: %w", levels[k], err)
						}
						if record && err == nil {
							out[k] = append(out[k], took)
						}
						mu.Unlock()
					}
				}
			}()
		}
		for i := range n {
			next <- i
		}
		close(next)
		wg.Wait()
		return out, first
	}

	fmt.Printf("orderbench serial: keyspace %s replicated %s, local DC %s, contact points %s; %d claims per level after %d warm-up, %d pair(s) in flight, alternating ABBA\n",
		keyspace, repl, *localDC, *contactPoints, *claims, *warmup, *concurrency)
	if _, err := run(*warmup, false); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	for _, t := range lwt {
		t.reset()
	}
	start := time.Now()
	total, err := run(*claims, true)
	if err != nil {
		return err
	}
	fmt.Printf("measured in %s%s\n", time.Since(start).Round(time.Millisecond), map[bool]string{true: " (" + *label + ")", false: ""}[*label != ""])
	printSerialTable(os.Stdout, levels, total, lwt)
	return nil
}

// printSerialTable prints the latency of each level and the ratio of the
// second (SERIAL) to the first (LOCAL_SERIAL).
func printSerialTable(w io.Writer, levels []gocql.Consistency, total [][]time.Duration, lwt []*lwtTimes) {
	type row struct{ p50, p99, mean time.Duration }
	stat := func(d []time.Duration) row {
		if len(d) == 0 {
			return row{}
		}
		d = slices.Clone(d)
		slices.Sort(d)
		var sum time.Duration
		for _, x := range d {
			sum += x
		}
		q := func(p float64) time.Duration { return d[min(len(d)-1, int(math.Ceil(p*float64(len(d))))-1)] }
		return row{q(0.50), q(0.99), sum / time.Duration(len(d))}
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }
	ratio := func(a, b time.Duration) string { return fmt.Sprintf("%.2f", float64(b)/float64(a)) }
	for _, what := range []struct {
		name string
		data [][]time.Duration
	}{
		{"ledger.Store.Claim (due entry + claim LWT)", total},
		{"claim LWT alone (INSERT ... IF NOT EXISTS, driver timing)", [][]time.Duration{lwt[0].all(), lwt[1].all()}},
	} {
		fmt.Fprintf(w, "\n%s\n%-14s %7s %10s %10s %10s\n", what.name, "level", "n", "p50", "p99", "mean")
		rows := make([]row, len(levels))
		for k, level := range levels {
			rows[k] = stat(what.data[k])
			fmt.Fprintf(w, "%-14s %7d %10s %10s %10s\n", level, len(what.data[k]), ms(rows[k].p50), ms(rows[k].p99), ms(rows[k].mean))
		}
		if rows[0].p50 > 0 {
			fmt.Fprintf(w, "%-14s %7s %10s %10s %10s\n", "SERIAL/LOCAL", "", ratio(rows[0].p50, rows[1].p50), ratio(rows[0].p99, rows[1].p99), ratio(rows[0].mean, rows[1].mean))
		}
	}
}

// lwtTimes records the driver's timing of every successful ledger.claim
// attempt of one session (a gocql.QueryObserver).
type lwtTimes struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *lwtTimes) ObserveQuery(_ context.Context, q gocql.ObservedQuery) {
	if q.Err != nil || cassandra.StatementName(q.Statement) != ledger.StmtClaim {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.d = append(l.d, q.End.Sub(q.Start))
}

func (l *lwtTimes) reset() { l.mu.Lock(); l.d = nil; l.mu.Unlock() }

func (l *lwtTimes) all() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.d)
}

// replicationMap turns "dc1:2,dc2:2" into a NetworkTopologyStrategy map.
func replicationMap(spec string) (string, error) {
	var parts []string
	for _, p := range strings.Split(spec, ",") {
		dc, rf, ok := strings.Cut(strings.TrimSpace(p), ":")
		var n int
		if _, err := fmt.Sscanf(rf, "%d", &n); !ok || err != nil || n < 1 || dc == "" || strings.ContainsAny(dc, `'"{}`) {
			return "", fmt.Errorf("replication %q: want dc:rf,... (e.g. dc1:2,dc2:2)", spec)
		}
		parts = append(parts, fmt.Sprintf("'%s': %d", dc, n))
	}
	if len(parts) < 2 {
		return "", fmt.Errorf("replication %q: name at least two DCs (SERIAL and LOCAL_SERIAL differ only then)", spec)
	}
	return "{'class': 'NetworkTopologyStrategy', " + strings.Join(parts, ", ") + "}", nil
}
