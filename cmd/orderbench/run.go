package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/platform/cassandra"
	"github.com/atlasmart/orderd/internal/platform/kafkaconn"
	"github.com/atlasmart/orderd/internal/tools/clientcreds"
	"github.com/atlasmart/orderd/internal/tools/devsetup"
	"github.com/atlasmart/orderd/internal/tools/freeport"
	"github.com/atlasmart/orderd/internal/tools/loadgen"
	"github.com/atlasmart/orderd/internal/tools/localcluster"
	"github.com/atlasmart/orderd/ledger"
	"github.com/atlasmart/orderd/projection"
	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

// Result is one measured phase.
type Result struct {
	Label       string  `json:"label"`
	Phase       string  `json:"phase"`
	Driver      string  `json:"driver"`
	Outcome     string  `json:"outcome,omitempty"`
	Concurrency int     `json:"concurrency"`
	Requests    int     `json:"requests"`
	Errors      int     `json:"errors"`
	Seconds     float64 `json:"seconds"`
	Throughput  float64 `json:"throughput"`
	P50ms       float64 `json:"p50_ms"`
	P95ms       float64 `json:"p95_ms"`
	P99ms       float64 `json:"p99_ms"`
	// CPU seconds per 1,000 requests: orderd's, the cluster's (all
	// Cassandra JVMs) and this benchmark process's own.
	OrderdCPUPer1k  float64 `json:"orderd_cpu_s_per_1k,omitempty"`
	ClusterCPUPer1k float64 `json:"cluster_cpu_s_per_1k,omitempty"`
	ClientCPUPer1k  float64 `json:"client_cpu_s_per_1k,omitempty"`
	OrderdPeakRSSMB float64 `json:"orderd_peak_rss_mb,omitempty"`
	RSSStartMB      float64 `json:"rss_start_mb,omitempty"`
	RSSEndMB        float64 `json:"rss_end_mb,omitempty"`
	// Rounds are the driver's turns when drivers take turns (inTurns): each
	// round's own figures. Throughput and the percentiles above are then
	// the medians over the rounds; requests, errors, seconds and CPU are
	// the rounds' totals.
	Rounds []Round `json:"rounds,omitempty"`
}

// Round is one driver's turn in one round of a phase.
type Round struct {
	// Index is the round's number: the drivers' rounds with the same
	// index ran back to back.
	Index      int       `json:"index"`
	Start      time.Time `json:"start"`
	End        time.Time `json:"end"`
	Requests   int       `json:"requests"`
	Errors     int       `json:"errors"`
	Throughput float64   `json:"throughput"`
	P50ms      float64   `json:"p50_ms"`
	P95ms      float64   `json:"p95_ms"`
	P99ms      float64   `json:"p99_ms"`
	// GCMaxMs is, per JVM whose GC log the run read (node1, ..., broker),
	// the longest stop-the-world pause that overlapped the round; 0: none.
	GCMaxMs map[string]float64 `json:"gc_max_ms,omitempty"`
	// Counters are what the driver's counters (driver.counters) gained
	// over the round: orderd's statements by label, its reconciler's
	// passes, the processes' CPU seconds (counters.go).
	Counters map[string]float64 `json:"counters,omitempty"`
}

// Run is one orderbench run: its settings and results.
type Run struct {
	Command   string    `json:"command"`
	Machine   string    `json:"machine"`
	Cassandra string    `json:"cassandra"`
	Started   time.Time `json:"started"`
	Results   []Result  `json:"results"`
	// NodeLogs is how many node logs were watched, and TombstoneWarnings
	// the lines about tombstones they gained during the run.
	NodeLogs          int      `json:"node_logs"`
	TombstoneWarnings []string `json:"tombstone_warnings"`
	// Rounds is how many rounds drivers that take turns ran (-rounds).
	Rounds int `json:"rounds,omitempty"`
	// GCLogs are the JVMs whose GC logs gave the rounds' pauses (node1,
	// ..., broker); none: no pauses were read.
	GCLogs []string `json:"gc_logs,omitempty"`
	// ClusterJVM is the Cassandra JVMs' heap and collector settings.
	ClusterJVM string `json:"cluster_jvm,omitempty"`
	// Pinning says which cores each process was pinned to (-pin), or why
	// none was.
	Pinning string `json:"pinning,omitempty"`
	// Soak is the soak phase's samples and verdicts (soak.go).
	Soak *Soak `json:"soak,omitempty"`
}

type runFlags struct {
	orderd, contactPoints, phases, concurrency, label, jsonOut, nodeLogs, kafka, kafkaDir, consumer, costVariants string
	gcLogs, brokerGCLog                                                                                           string
	requests, rounds                                                                                              int
	soak                                                                                                          time.Duration
	soakFlags                                                                                                     soakFlags
	pin                                                                                                           bool
}

func runCmd(args []string) error {
	var f runFlags
	fs := flag.NewFlagSet("orderbench run", flag.ContinueOnError)
	fs.StringVar(&f.orderd, "orderd", "bin/orderd", "orderd binary to start")
	fs.StringVar(&f.contactPoints, "contact-points", "127.0.0.1,127.0.0.2,127.0.0.3", "Cassandra contact points")
	fs.StringVar(&f.phases, "phases", "compare,storm,replay,mix", "phases to run: compare, storm, replay, mix, outbox, commit, cost, instances, lwt, changes, soak")
	fs.StringVar(&f.concurrency, "concurrency", "1,8,16,32,64", "concurrency levels of the compare phase")
	fs.IntVar(&f.requests, "requests", 2000, "requests per driver and concurrency level (a quarter at concurrency 1), split over -rounds; the storm's replays and new requests")
	fs.IntVar(&f.rounds, "rounds", 5, "rounds of drivers that take turns, per concurrency level (each driver's requests split over them)")
	fs.StringVar(&f.gcLogs, "gc-logs", ".cluster/node*/logs/gc.log", "Cassandra nodes' GC logs to read each round's pauses from (glob)")
	fs.StringVar(&f.brokerGCLog, "broker-gc-log", ".kafka/logs/gc.log", "the Kafka broker's GC log (read when it exists)")
	fs.BoolVar(&f.pin, "pin", false, "pin the Cassandra JVMs, the broker, orderd and this client to separate cores for the run (taskset); the report says how")
	fs.DurationVar(&f.soak, "soak", time.Hour, "length of the soak phase")
	f.soakFlags.register(fs)
	fs.StringVar(&f.label, "label", "", "label for this run's results (e.g. paxos v1)")
	fs.StringVar(&f.jsonOut, "json", "", "write results as JSON to this file")
	fs.StringVar(&f.kafka, "kafka", "127.0.0.1:19092", "Kafka broker orderd publishes order events to (make kafka-up)")
	fs.StringVar(&f.kafkaDir, "kafka-dir", ".kafka", "state folder of the local broker (make kafka-up): orderd, the consumer and the benchmark's reader log in over SASL_SSL with its users' passwords and CA; empty: plaintext")
	fs.StringVar(&f.consumer, "orderconsumer", "bin/orderconsumer", "the reference consumer's binary: the outbox phase measures delivery up to its apply")
	fs.StringVar(&f.costVariants, "cost-variants", defaultCostVariants, `orderd configurations the cost phase compares, ";"-separated: name or name:K=V,K=V (environment; the key "orderd" names another binary); the first is the reference`)
	fs.StringVar(&f.nodeLogs, "node-logs", ".cluster/node*/logs/system.log", "Cassandra node logs to check for tombstone warnings (glob)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if f.rounds < 1 {
		return fmt.Errorf("rounds %d: want at least 1", f.rounds)
	}
	var levels []int
	for _, s := range strings.Split(f.concurrency, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fmt.Errorf("concurrency %q", s)
		}
		levels = append(levels, n)
	}
	ctx := context.Background()
	hosts := strings.Split(f.contactPoints, ",")
	keyspace := fmt.Sprintf("bench_%d", time.Now().Unix())
	// The reconciler runs in orderd as it would in production, with the
	// default grace: it reads every entry the run writes once it falls due
	// (its reads must meet no tombstones at the benchmark's rate).
	// orderd publishes every order's event, as by default, to a topic of
	// the run's own.
	topic := keyspace + ".events"
	env := append(os.Environ(), "ORDERD_CASSANDRA_CONTACT_POINTS="+f.contactPoints, "ORDERD_KEYSPACE="+keyspace,
		"ORDERD_LOG_LEVEL=warn", "ORDERD_KAFKA_BROKERS="+f.kafka, "ORDERD_KAFKA_TOPIC="+topic,
		// The benchmark measures capacity, not the per-tenant limits: a
		// replay storm can pass their defaults.
		"ORDERD_RATE_ATTEMPTS=0", "ORDERD_RATE_REPLAYS=0", "ORDERD_RATE_READS=0")
	kafkaConn, err := benchKafka(f.kafkaDir)
	if err != nil {
		return err
	}
	env = append(env, kafkaEnv("ORDERD_", kafkaConn(localcluster.OrderdUser))...)
	// orderd is secured as in production: TLS, and every call carries an
	// API key the server verifies.
	secDir, err := os.MkdirTemp("", "orderbench-security-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(secDir)
	secFiles, apiKey, err := devsetup.Write(secDir, "default", 24*time.Hour)
	if err != nil {
		return err
	}
	env = append(env, secFiles.ServerEnv()...)
	creds := secFiles.Client(apiKey)
	migrate := exec.Command(f.orderd, "migrate")
	migrate.Env = env
	if out, err := migrate.CombinedOutput(); err != nil {
		return fmt.Errorf("migrate %s: %w\n%s", keyspace, err, out)
	}
	session, err := cassandra.NewSession(cassandra.Config{Hosts: hosts, Keyspace: keyspace})
	if err != nil {
		return err
	}
	defer func() {
		_ = session.Query(`DROP KEYSPACE IF EXISTS ` + keyspace).Exec()
		session.Close()
	}()
	store, err := ledger.NewCassandraStore(cassandra.Wrap(session), ledger.Config{})
	if err != nil {
		return err
	}
	// The lwt phase leaves its claims PENDING on purpose: their entries fall
	// due after the run, so the reconciler does not finish them while later
	// measurements run.
	lwtStore, err := ledger.NewCassandraStore(cassandra.Wrap(session), ledger.Config{DueAfter: 2 * time.Hour})
	if err != nil {
		return err
	}
	// The baselines issue the two-LWT protocol orderd ran before, whose
	// claims wrote their due entries one request each.
	legacyStore, err := ledger.NewBaseline(ledger.NewCQLTable(cassandra.Wrap(session)), ledger.Config{}, ledger.Alone{Entries: true, Reads: true})
	if err != nil {
		return err
	}
	proj := projection.NewStore(cassandra.Wrap(session), nil)
	// ... and wrote every projection row alone.
	legacyProj := projection.New(projection.Config{Batch: 1}, cassandra.Wrap(session), nil)

	od, err := startOrderd(f.orderd, env, creds)
	if err != nil {
		return err
	}
	defer od.stop()

	logs := watchNodeLogs(f.nodeLogs)
	run := Run{Command: "orderbench run " + strings.Join(args, " "), Machine: machine(), Cassandra: version(ctx, session),
		Started: time.Now().UTC(), NodeLogs: len(logs.start)}
	b := &bench{od: od, cql: session, store: store, legacy: legacyStore, lwtStore: lwtStore, proj: proj, legacyProj: legacyProj, label: f.label, rounds: f.rounds}
	run.Rounds = f.rounds
	run.ClusterJVM = clusterJVM()
	if f.pin {
		pins, err := pinProcesses(od.pid())
		if err != nil {
			return err
		}
		defer pins.restore()
		b.pins = pins
		run.Pinning = pins.describe()
		fmt.Fprintln(os.Stderr, "orderbench: "+run.Pinning)
	}
	for _, phase := range strings.Split(f.phases, ",") {
		var rs []Result
		switch phase {
		case "compare":
			rs, err = b.comparePhase(ctx, levels, f.requests, f.orderd, env, creds)
		case "storm":
			rs, err = b.storm(ctx, 64, f.requests)
		case "replay":
			rs, err = b.replay(ctx, 32, f.requests)
		case "mix":
			rs, err = b.mix(ctx, 64, f.requests)
		case "lwt":
			rs, err = b.lwt(ctx, []int{1, 32}, f.requests)
		case "changes":
			rs, err = b.changesPhase(ctx, []int{16, 64}, f.requests)
		case "outbox":
			rs, err = b.outboxPhase(ctx, outboxSetup{levels: []int{16, 64}, requests: f.requests, orderd: f.orderd, consumer: f.consumer,
				env: env, creds: creds, brokers: f.kafka, kafka: kafkaConn, topic: keyspace + ".outbox", keyspace: keyspace + "_consumer", hosts: f.contactPoints})
		case "instances":
			rs, err = b.instancesPhase(ctx, []int{16, 64}, f.requests, f.orderd, env, creds)
		case "commit":
			rs, err = b.commitPhase(ctx, []int{1, 16, 64}, f.requests, f.orderd, env, creds)
		case "cost":
			var variants []costVariant
			if variants, err = parseCostVariants(f.costVariants); err == nil {
				rs, err = b.costPhase(ctx, []int{16, 64}, f.requests, f.orderd, variants, env, creds)
			}
		case "soak":
			var soak *Soak
			soak, err = b.soakPhase(ctx, f.soakFlags.setup(f, env, creds, kafkaConn, keyspace))
			if soak != nil {
				run.Soak, rs = soak, []Result{soak.Summary}
			}
		default:
			err = fmt.Errorf("unknown phase %q", phase)
		}
		if err != nil {
			return fmt.Errorf("phase %s: %w", phase, err)
		}
		run.Results = append(run.Results, rs...)
	}
	sources := gcSources(f.gcLogs, f.brokerGCLog)
	pauses := readGCLogs(sources)
	attachGCPauses(run.Results, pauses)
	if run.Soak != nil {
		attachSoakGCPauses(run.Soak, pauses)
		run.Soak.judge()
	}
	for name := range sources {
		run.GCLogs = append(run.GCLogs, name)
	}
	slices.Sort(run.GCLogs)
	printResults(os.Stdout, run.Results)
	run.TombstoneWarnings = logs.tombstoneWarnings()
	fmt.Printf("orderbench: %d tombstone warnings in %d node logs during the run\n", len(run.TombstoneWarnings), run.NodeLogs)
	for _, w := range run.TombstoneWarnings {
		fmt.Println("  " + w)
	}
	if f.jsonOut != "" {
		raw, _ := json.MarshalIndent(run, "", "  ")
		return os.WriteFile(f.jsonOut, raw, 0o644)
	}
	return nil
}

type bench struct {
	od       *orderdProc
	cql      *gocql.Session
	store    *ledger.Ledger
	legacy   *ledger.Ledger    // the two-lwt and naive plans': every entry its own write
	lwtStore *ledger.Ledger    // the lwt phase's: its entries fall due after the run
	proj     *projection.Store // group-committed rows, as orderd writes them
	// legacyProj: the two-lwt and naive plans', every row its own write.
	legacyProj *projection.Store
	label      string
	rounds     int // of drivers taking turns (-rounds)
	// pins, when set, pins every orderd the run starts beside the first.
	pins *pinning
	// background: the one-lwt driver's entry releases, made after its
	// answer as orderd makes them.
	background sync.WaitGroup
}

// op performs one request; i numbers it.
type op func(ctx context.Context, i int) error

// driver is one way of performing a request, measured under its name.
type driver struct {
	name string
	// outcome, when set, is the one answer every request of this driver
	// gets (the storm phase's "new" and "replayed").
	outcome string
	do      op
	// orderd, if set, is the orderd process this driver calls, whose CPU
	// the result reports (default: the benchmark's orderd, for "orderd").
	orderd *orderdProc
	// counters, if set, reads cumulative counters (orderd's metrics, CPU
	// seconds): each round keeps what they gained during it.
	counters func() map[string]float64
}

// measure runs n ops at concurrency c and returns latencies and resource use.
func (b *bench) measure(ctx context.Context, phase, name string, c, n int, do op) (Result, error) {
	r, _, err := b.measureRaw(ctx, phase, driver{name: name, do: do}, c, n)
	return r, err
}

// measureRaw is measure, also returning the sorted latencies.
func (b *bench) measureRaw(ctx context.Context, phase string, d driver, c, n int) (Result, []time.Duration, error) {
	od := d.orderd
	if od == nil {
		od = b.od
	}
	od0, cl0, me0 := procCPU(od.pid()), clusterCPU(), selfCPU()
	start := time.Now()
	lat, errCount, firstErr := runOps(ctx, c, n, d.do)
	elapsed := time.Since(start)
	b.background.Wait() // their CPU counts, their time does not (as orderd's releases)
	od1, cl1, me1 := procCPU(od.pid()), clusterCPU(), selfCPU()
	slices.Sort(lat)
	per1k := func(d time.Duration) float64 { return d.Seconds() * 1000 / float64(n) }
	r := Result{Label: b.label, Phase: phase, Driver: d.name, Outcome: d.outcome, Concurrency: c, Requests: n, Errors: errCount,
		Seconds: elapsed.Seconds(), Throughput: float64(n) / elapsed.Seconds(),
		P50ms: ms(loadgen.Percentile(lat, 50)), P95ms: ms(loadgen.Percentile(lat, 95)), P99ms: ms(loadgen.Percentile(lat, 99)),
		ClusterCPUPer1k: per1k(cl1 - cl0), ClientCPUPer1k: per1k(me1 - me0), OrderdPeakRSSMB: peakRSSMB(od.pid())}
	if d.name == "orderd" || d.orderd != nil {
		r.OrderdCPUPer1k = per1k(od1 - od0)
	}
	// A few failed calls (a statement timing out in a node's GC pause) are
	// counted and reported with the round; more than one in twenty means
	// the round measured something else than the driver's work.
	if firstErr != nil && r.Errors > n/20 {
		return r, nil, fmt.Errorf("%s/%s%s at %d: %d of %d failed, first: %w", phase, d.name, outcomeSuffix(d.outcome), c, r.Errors, n, firstErr)
	}
	fmt.Fprintf(os.Stderr, "orderbench: %-8s %-16s c=%-3d n=%-5d %8.1f req/s  p50 %7.2f ms  p99 %7.2f ms\n",
		phase, d.name+outcomeSuffix(d.outcome), c, n, r.Throughput, r.P50ms, r.P99ms)
	return r, lat, nil
}

// outcomeSuffix names an outcome after a driver in progress lines and errors.
func outcomeSuffix(outcome string) string {
	if outcome == "" {
		return ""
	}
	return "/" + outcome
}

// runOps runs ops 0..n-1 on c goroutines and returns each op's latency (by
// op number), how many failed and the first error seen.
//
// The first error is kept under a mutex, not in an atomic.Value: ops fail
// with errors of different concrete types (a gRPC status, a *fault.Error, a
// wrapped error), and atomic.Value panics when a value of another type is
// swapped into it.
func runOps(ctx context.Context, c, n int, do op) (lat []time.Duration, failed int, first error) {
	lat = make([]time.Duration, n)
	var (
		next atomic.Int64
		mu   sync.Mutex
		wg   sync.WaitGroup
	)
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t0 := time.Now()
				err := do(ctx, i)
				lat[i] = time.Since(t0)
				if err != nil {
					mu.Lock()
					failed++
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return lat, failed, first
}

// merge pools rounds of one driver: latencies together, times and CPU added.
func merge(rounds []Result, lats [][]time.Duration) Result {
	r := rounds[0]
	var all []time.Duration
	r.Requests, r.Errors, r.Seconds = 0, 0, 0
	var odCPU, clCPU, meCPU float64
	for i, x := range rounds {
		all = append(all, lats[i]...)
		r.Requests += x.Requests
		r.Errors += x.Errors
		r.Seconds += x.Seconds
		odCPU += x.OrderdCPUPer1k * float64(x.Requests)
		clCPU += x.ClusterCPUPer1k * float64(x.Requests)
		meCPU += x.ClientCPUPer1k * float64(x.Requests)
		r.OrderdPeakRSSMB = max(r.OrderdPeakRSSMB, x.OrderdPeakRSSMB)
	}
	slices.Sort(all)
	n := float64(r.Requests)
	r.Throughput = n / r.Seconds
	r.P50ms, r.P95ms, r.P99ms = ms(loadgen.Percentile(all, 50)), ms(loadgen.Percentile(all, 95)), ms(loadgen.Percentile(all, 99))
	r.OrderdCPUPer1k, r.ClusterCPUPer1k, r.ClientCPUPer1k = odCPU/n, clCPU/n, meCPU/n
	return r
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// benchCustomer is request i's customer: requests spread over 100
// customers' listing partitions, through orderd and in every plan alike.
func benchCustomer(i int) string { return fmt.Sprintf("bench-%03d", i%100) }

func newRequest(i int) *ordersv1.CreateOrderRequest {
	return &ordersv1.CreateOrderRequest{RequestId: uuid.NewString(), CustomerId: benchCustomer(i), Total: "12.34", Currency: "EUR"}
}

// viaOrderd creates one order through orderd.
func (b *bench) viaOrderd(ctx context.Context, i int) error {
	_, err := b.od.client.CreateOrder(ctx, newRequest(i))
	return err
}

// benchCommand is the command of request i, as newRequest(i) is through
// orderd.
func benchCommand(i int) order.Command {
	return order.Command{CustomerID: benchCustomer(i), Total: "12.34", Currency: "EUR"}
}

// claimRecord is the claim the handler would write for new request i.
func claimRecord(i int) ledger.Record {
	id, encoded := uuid.New(), benchCommand(i).Encode()
	return ledger.Record{
		Key:         ledger.Key{Tenant: "default", Operation: order.OperationCreate, RequestID: id},
		EntityID:    order.ID("default", id),
		Fingerprint: order.Fingerprint(encoded),
		Command:     encoded,
		CreatedAt:   time.Now().UTC().Truncate(time.Millisecond),
		Attempts:    1,
		ClaimToken:  uuid.New(),
	}
}

// claim is store.Claim (due-queue entry alongside check, if any, then the
// claim LWT) of a new request, which must win.
func claim(ctx context.Context, store *ledger.Ledger, rec ledger.Record, check func(context.Context) error) (ledger.Record, error) {
	won, cur, err := store.Claim(ctx, rec, check)
	switch {
	case err != nil:
		return ledger.Record{}, fmt.Errorf("claim request %s: %w", rec.RequestID, err)
	case !won:
		return ledger.Record{}, fmt.Errorf("claim request %s: not won", rec.RequestID)
	}
	return cur, nil
}

// orderAbsent is the LOCAL_QUORUM read of orders_by_id for o's id (derived
// from the request id), which must find nothing: o is new.
func (b *bench) orderAbsent(ctx context.Context, p *projection.Store, o order.Order) error {
	_, err := p.Order(ctx, o.Tenant, o.ID)
	switch {
	case errors.Is(err, projection.ErrNotFound):
		return nil
	case err == nil:
		return fmt.Errorf("order %s of a new request already exists", o.ID)
	}
	return fmt.Errorf("read order %s: %w", o.ID, err)
}

// legacyCompleteCQL is the conditional COMPLETE of the protocol before
// one-LWT, as ledger.Ledger issued it (every cell rewritten with the
// row's TTL): the baseline's second Paxos round.
const legacyCompleteCQL = `UPDATE write_requests_by_id USING TTL ?
	SET entity_id = ?, payload_hash = ?, command = ?, created_at = ?, claim_token = ?, attempts = ?, last_error = ?,
		state = 'COMPLETE', completed_at = ?, outcome = ?
	WHERE tenant = ? AND operation = ? AND request_id = ? IF state = 'PENDING' AND claim_token = ?`

// complete is the old protocol's completion: the COMPLETE LWT, which must
// apply, then the claim's entry delete.
func (b *bench) complete(ctx context.Context, rec ledger.Record, o order.Order) error {
	ttl := int(rec.ExpiresAt(7 * 24 * time.Hour).Sub(time.Now()).Seconds())
	applied, err := b.cql.Query(legacyCompleteCQL, ttl, rec.EntityID.String(), rec.Fingerprint, rec.Command, rec.CreatedAt,
		rec.ClaimToken.String(), rec.Attempts, nil, time.Now().UTC(), o.EncodeOutcome(),
		rec.Tenant, rec.Operation, rec.RequestID.String(), rec.ClaimToken.String()).
		SerialConsistency(gocql.LocalSerial).MapScanCASContext(ctx, map[string]any{})
	switch {
	case err != nil:
		return fmt.Errorf("complete request %s: %w", rec.RequestID, err)
	case !applied:
		return fmt.Errorf("complete request %s: not applied", rec.RequestID)
	}
	// The old plan removed its entry at once, with one statement of its own.
	if err := b.legacy.RemoveEntry(ctx, b.legacy.ClaimEntry(rec)); err != nil {
		return fmt.Errorf("remove the entry of request %s: %w", rec.RequestID, err)
	}
	return nil
}

// writeConcurrently projects o into tables at once.
func (b *bench) writeConcurrently(ctx context.Context, o order.Order, tables ...string) error {
	g, gctx := errgroup.WithContext(ctx)
	for _, table := range tables {
		g.Go(func() error { return b.proj.WriteOne(gctx, o, table) })
	}
	return g.Wait()
}

// twoLWT issues today's handler plan (workflow createOrder and Finish) from
// this process, in the handler's order: due-queue entry and claim LWT, the
// read of orders_by_id that Finish makes before writing, the projections
// (projection.Store.Write: orders_by_id, then the other two concurrently),
// the COMPLETE LWT and the entry delete. It is orderd with zero overhead of
// its own.
func (b *bench) twoLWT(ctx context.Context, i int) error {
	rec, err := claim(ctx, b.legacy, claimRecord(i), nil)
	if err != nil {
		return err
	}
	o := order.New(rec.Tenant, rec.RequestID, benchCommand(i), rec.CreatedAt)
	if err := b.orderAbsent(ctx, b.legacyProj, o); err != nil {
		return err
	}
	if err := b.legacyProj.Write(ctx, o); err != nil {
		return err
	}
	return b.complete(ctx, rec, o)
}

// oneLWT issues orderd's one-LWT protocol from this process: the read
// of orders_by_id alongside the due-queue entry, the claim LWT, orders_by_customer_time and
// order_events_by_order concurrently, then orders_by_id; the claim's entry
// is released after the answer, in the background, as orderd releases it
// (Store.Release: group-committed per due-queue partition). There is no COMPLETE LWT: the request stays PENDING in the
// ledger, and with its entry gone the reconciler never looks at it.
func (b *bench) oneLWT(ctx context.Context, i int) error {
	rec := claimRecord(i)
	o := order.New(rec.Tenant, rec.RequestID, benchCommand(i), rec.CreatedAt)
	rec, err := claim(ctx, b.store, rec, func(ctx context.Context) error { return b.orderAbsent(ctx, b.proj, o) })
	if err != nil {
		return err
	}
	if err := b.writeConcurrently(ctx, o, projection.OrdersByCustomerTime, projection.EventsByOrder); err != nil {
		return err
	}
	if err := b.proj.WriteOne(ctx, o, projection.OrdersByID); err != nil {
		return err
	}
	b.background.Go(func() { _ = b.store.Release(context.WithoutCancel(ctx), rec) })
	return nil
}

// floor writes the three projections concurrently and nothing else (no
// ledger, no idempotency): the least a create can cost.
func (b *bench) floor(ctx context.Context, i int) error {
	o := order.New("default", uuid.New(), benchCommand(i), time.Now().UTC().Truncate(time.Millisecond))
	return b.writeConcurrently(ctx, o, projection.Tables...)
}

// naive issues twoLWT's statements one after another, in the order a
// request's rows are written.
func (b *bench) naive(ctx context.Context, i int) error {
	rec, err := claim(ctx, b.legacy, claimRecord(i), nil)
	if err != nil {
		return err
	}
	o := order.New(rec.Tenant, rec.RequestID, benchCommand(i), rec.CreatedAt)
	if err := b.orderAbsent(ctx, b.legacyProj, o); err != nil {
		return err
	}
	for _, table := range projection.Tables {
		if err := b.legacyProj.WriteOne(ctx, o, table); err != nil {
			return err
		}
	}
	return b.complete(ctx, rec, o)
}

// warmUp runs every driver a little first (connections, prepared
// statements, JIT), so that none pays for them inside a measurement.
func (b *bench) warmUp(ctx context.Context, drivers []driver) error {
	for _, d := range drivers {
		if _, _, err := b.measureRaw(ctx, "warmup", d, 8, 200); err != nil {
			return err
		}
	}
	return nil
}

// inTurns measures n ops of every driver at concurrency c. The drivers take
// turns in b.rounds rounds, so drift on a shared, noisy machine falls on all
// of them alike, and each round's figures are kept (Result.Rounds): a
// reader sees the spread between rounds, not only one figure. Each round
// starts with the next driver: the cluster's own periodic work (memtable
// flushes, compactions) comes at the same points of a run that writes the
// same rows, and would otherwise fall on the same driver's turn every time.
func (b *bench) inTurns(ctx context.Context, phase string, c, n int, drivers []driver) ([]Result, error) {
	return b.turns(ctx, phase, c, n, drivers, true)
}

// inFixedTurns is inTurns with every round running the drivers in the
// order given: for drivers that use what an earlier one made in the same
// round (the changes phase replays the amends made before it).
func (b *bench) inFixedTurns(ctx context.Context, phase string, c, n int, drivers []driver) ([]Result, error) {
	return b.turns(ctx, phase, c, n, drivers, false)
}

// turns runs b.rounds rounds of every driver, n ops per driver split over
// the rounds, and returns each driver's rounds merged (merge).
func (b *bench) turns(ctx context.Context, phase string, c, n int, drivers []driver, rotate bool) ([]Result, error) {
	rounds, step := max(b.rounds, 1), 0
	if rotate {
		step = 1
	}
	results := make([][]Result, len(drivers))
	lats := make([][][]time.Duration, len(drivers))
	kept := make([][]Round, len(drivers))
	for round := range rounds {
		for i := range drivers {
			k := (round*step + i) % len(drivers)
			start := time.Now()
			before := readCounters(drivers[k])
			r, lat, err := b.measureRaw(ctx, phase, drivers[k], c, max(n/rounds, 1))
			if err != nil {
				return nil, err
			}
			gained := counterDelta(before, readCounters(drivers[k]))
			results[k] = append(results[k], r)
			lats[k] = append(lats[k], lat)
			kept[k] = append(kept[k], Round{Index: round, Start: start.UTC(), End: time.Now().UTC(), Requests: r.Requests, Errors: r.Errors,
				Throughput: r.Throughput, P50ms: r.P50ms, P95ms: r.P95ms, P99ms: r.P99ms, Counters: gained})
		}
	}
	out := make([]Result, len(drivers))
	for k := range drivers {
		out[k] = merge(results[k], lats[k])
		out[k].Rounds = kept[k]
		out[k].Throughput = median(kept[k], func(r Round) float64 { return r.Throughput })
		out[k].P50ms = median(kept[k], func(r Round) float64 { return r.P50ms })
		out[k].P95ms = median(kept[k], func(r Round) float64 { return r.P95ms })
		out[k].P99ms = median(kept[k], func(r Round) float64 { return r.P99ms })
	}
	return out, nil
}

func (b *bench) compare(ctx context.Context, levels []int, requests int, od *orderdProc) ([]Result, error) {
	drivers := []driver{
		{name: "orderd", orderd: od, do: func(ctx context.Context, i int) error {
			_, err := od.client.CreateOrder(ctx, newRequest(i))
			return err
		}},
		{name: "two-lwt", do: b.twoLWT},
		{name: "one-lwt", do: b.oneLWT},
		{name: "floor", do: b.floor},
		{name: "claim", do: b.claimOnly},
		{name: "naive", do: b.naive},
	}
	if err := b.warmUp(ctx, drivers); err != nil {
		return nil, err
	}
	var out []Result
	for _, c := range levels {
		n := requests
		if c == 1 {
			n = max(requests/4, 50)
		}
		rs, err := b.inTurns(ctx, "compare", c, n, drivers)
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	return out, nil
}

// comparePhase runs compare through an orderd of its own with event
// delivery off (ORDERD_DELIVERY=false): none of the statement plans it is
// compared with publishes an event, so orderd is measured on the same
// work; the outbox phase measures what delivery adds.
func (b *bench) comparePhase(ctx context.Context, levels []int, requests int, orderd string, env []string, creds clientcreds.Options) ([]Result, error) {
	od, err := startOrderd(orderd, append(slices.Clone(env), "ORDERD_DELIVERY=false"), creds)
	if err != nil {
		return nil, fmt.Errorf("start an orderd with delivery off: %w", err)
	}
	defer od.stop()
	return b.compare(ctx, levels, requests, od)
}

// storm is a replay storm through orderd: one request is created, then the
// very same CreateOrderRequest is sent n times from c streams at once, and
// every answer must be a replay. New requests at the same concurrency take
// turns with it, so the replay/new ratios come from one run.
func (b *bench) storm(ctx context.Context, c, n int) ([]Result, error) {
	req := newRequest(0)
	first, err := b.od.client.CreateOrder(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("create the storm's order (request %s): %w", req.RequestId, err)
	}
	if first.Replayed {
		return nil, fmt.Errorf("the storm's first request %s was answered as a replay", req.RequestId)
	}
	// Counted apart from failed calls: measureRaw tolerates a few errors,
	// but an answer other than a replay is wrong, not slow.
	var notReplayed atomic.Int64
	replay := func(ctx context.Context, _ int) error {
		resp, err := b.od.client.CreateOrder(ctx, req)
		if err == nil && !resp.Replayed {
			notReplayed.Add(1)
			err = fmt.Errorf("request %s was not replayed", req.RequestId)
		}
		return err
	}
	drivers := []driver{
		{name: "orderd", outcome: "new", do: b.viaOrderd},
		{name: "orderd", outcome: "replayed", do: replay},
	}
	if err := b.warmUp(ctx, drivers); err != nil {
		return nil, err
	}
	rs, err := b.inTurns(ctx, "storm", c, n, drivers)
	if err != nil {
		return nil, err
	}
	if k := notReplayed.Load(); k > 0 {
		return nil, fmt.Errorf("%d answers to the storm's request %s were not replays", k, req.RequestId)
	}
	return rs, nil
}

func (b *bench) replay(ctx context.Context, c, n int) ([]Result, error) {
	reqs := make([]*ordersv1.CreateOrderRequest, n)
	for i := range reqs {
		reqs[i] = newRequest(i)
	}
	newR, err := b.measure(ctx, "replay", "orderd", c, n, func(ctx context.Context, i int) error {
		_, err := b.od.client.CreateOrder(ctx, reqs[i])
		return err
	})
	if err != nil {
		return nil, err
	}
	newR.Outcome = "new"
	repR, err := b.measure(ctx, "replay", "orderd", c, n, func(ctx context.Context, i int) error {
		resp, err := b.od.client.CreateOrder(ctx, reqs[i])
		if err == nil && !resp.Replayed {
			err = fmt.Errorf("request %s was not replayed", reqs[i].RequestId)
		}
		return err
	})
	repR.Outcome = "replayed"
	return []Result{newR, repR}, err
}

func (b *bench) mix(ctx context.Context, c, n int) ([]Result, error) {
	od0, cl0 := procCPU(b.od.pid()), clusterCPU()
	rep := loadgen.Run(ctx, b.od.client, loadgen.Config{Intents: n, Concurrency: c, DuplicateShare: 0.2, ConflictShare: 0.05, RetryFor: 30 * time.Second})
	od1, cl1 := procCPU(b.od.pid()), clusterCPU()
	fmt.Fprint(os.Stderr, rep.String())
	var out []Result
	for _, o := range []loadgen.Outcome{loadgen.New, loadgen.Replayed, loadgen.Conflict, loadgen.InProgress, loadgen.Failed} {
		l := rep.Latency[o]
		if len(l) == 0 {
			continue
		}
		out = append(out, Result{Label: b.label, Phase: "mix", Driver: "orderd", Outcome: string(o), Concurrency: c, Requests: len(l),
			Seconds: rep.Elapsed.Seconds(), Throughput: float64(rep.Calls) / rep.Elapsed.Seconds(),
			P50ms: ms(loadgen.Percentile(l, 50)), P95ms: ms(loadgen.Percentile(l, 95)), P99ms: ms(loadgen.Percentile(l, 99)),
			OrderdCPUPer1k:  (od1 - od0).Seconds() * 1000 / float64(rep.Calls),
			ClusterCPUPer1k: (cl1 - cl0).Seconds() * 1000 / float64(rep.Calls)})
	}
	if rep.Unacked > 0 || len(rep.Problems) > 0 {
		return out, fmt.Errorf("mix: %d unacknowledged, problems %v", rep.Unacked, rep.Problems)
	}
	return out, nil
}

func (b *bench) lwt(ctx context.Context, levels []int, n int) ([]Result, error) {
	var out []Result
	if _, err := b.measure(ctx, "warmup", "-", 8, 200, b.claimOnly); err != nil {
		return nil, err
	}
	for _, c := range levels {
		r, err := b.measure(ctx, "lwt", "claim", c, n, b.claimOnly)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// claimOnly is a new request's claim as orderd's ledger issues it (its
// due entry, group-committed, then the claim LWT) and nothing else. Its
// entries fall due after the run (lwtStore), so no reconciler finishes
// them meanwhile.
func (b *bench) claimOnly(ctx context.Context, i int) error {
	won, _, err := b.lwtStore.Claim(ctx, claimRecord(i), nil)
	if err == nil && !won {
		err = errors.New("claim not won")
	}
	return err
}

// orderdProc is the orderd child process under measurement.
type orderdProc struct {
	cmd    *exec.Cmd
	conn   *grpc.ClientConn
	client ordersv1.OrderServiceClient
}

func startOrderd(bin string, env []string, creds clientcreds.Options) (*orderdProc, error) {
	addr, err := freeport.Addr()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "serve")
	if orderdCPUs != "" {
		// taskset execs orderd: the pid is orderd's, pinned from its start.
		cmd = exec.Command("taskset", "-c", orderdCPUs, bin, "serve")
	}
	// Metrics are off unless env sets an address (a later duplicate wins).
	cmd.Env = append(append([]string{"ORDERD_METRICS_ADDR="}, env...), "ORDERD_GRPC_ADDR="+addr)
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	dial, err := creds.DialOptions()
	if err != nil {
		_ = cmd.Process.Kill()
		return nil, err
	}
	conn, err := grpc.NewClient(addr, dial...)
	if err != nil {
		_ = cmd.Process.Kill()
		return nil, err
	}
	p := &orderdProc{cmd: cmd, conn: conn, client: ordersv1.NewOrderServiceClient(conn)}
	health := healthpb.NewHealthClient(conn)
	for deadline := time.Now().Add(60 * time.Second); ; {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && resp.Status == healthpb.HealthCheckResponse_SERVING {
			return p, nil
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("orderd not serving within 60s: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (p *orderdProc) pid() int { return p.cmd.Process.Pid }

func (p *orderdProc) stop() {
	p.conn.Close()
	terminate(p.cmd)
}

// terminate sends SIGTERM and waits for the process to exit, killing it
// after 30 s.
func terminate(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
	}
}

func version(ctx context.Context, s *gocql.Session) string {
	var v string
	_ = s.Query(`SELECT release_version FROM system.local`).Consistency(gocql.One).ScanContext(ctx, &v)
	return "Apache Cassandra " + v
}

// benchKafka says how each user connects to the local broker whose state
// is in dir: plaintext when dir is empty.
func benchKafka(dir string) (func(user string) kafkaconn.Settings, error) {
	if dir == "" {
		return func(string) kafkaconn.Settings { return kafkaconn.Settings{Plaintext: true} }, nil
	}
	b, err := localcluster.NewBroker(localcluster.KafkaConfig{StateDir: dir})
	if err != nil {
		return nil, err
	}
	return b.Conn, nil
}

// kafkaEnv is the environment that connects a binary (prefix ORDERD_ or
// ORDERCONSUMER_) as c says.
func kafkaEnv(prefix string, c kafkaconn.Settings) []string {
	if c.Plaintext {
		return []string{prefix + "KAFKA_PLAINTEXT=true"}
	}
	return []string{prefix + "KAFKA_USERNAME=" + c.Username, prefix + "KAFKA_PASSWORD_FILE=" + c.PasswordFile,
		prefix + "KAFKA_TLS_CA_FILE=" + c.CAFile}
}
