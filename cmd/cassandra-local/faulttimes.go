package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/atlasmart/orderd/internal/tools/localcluster"
)

// Statements of the probe that needs every replica. The keyspace is the
// launcher's own, dropped at the end.
const (
	probeCreateKS = `CREATE KEYSPACE IF NOT EXISTS cassandra_local_probe WITH replication = {'class': 'NetworkTopologyStrategy', 'dc1': 3}`
	probeCreateT  = `CREATE TABLE IF NOT EXISTS cassandra_local_probe.t (k int PRIMARY KEY, v int)`
	probeInsert   = `INSERT INTO cassandra_local_probe.t (k, v) VALUES (0, 0)`
	probeSelect   = `SELECT v FROM cassandra_local_probe.t WHERE k = 0`
	probeDropKS   = `DROP KEYSPACE IF EXISTS cassandra_local_probe`
)

// roleSetupWarning is what Cassandra logs each time its default-role setup
// fails (see templates/jvm17.options.tmpl).
const roleSetupWarning = "CassandraRoleManager skipped default role setup"

// runFaultTimes SIGKILLs node N and prints the figures the fault tests
// depend on: when the driver and the surviving nodes notice, when a read at
// ALL turns from a timeout into a fast UNAVAILABLE, and how much the
// survivors log and burn while N is down. With -restart M it also restarts
// node M while N is down (as fault tests that bring nodes back one at a time
// do) before the log window. Node N is started again at the end.
func runFaultTimes(ctx context.Context, c *localcluster.Cluster, args []string) error {
	fs := flag.NewFlagSet("fault-times", flag.ContinueOnError)
	restart := fs.Int("restart", 0, "restart this node while N is down, before the log window")
	window := fs.Duration("window", time.Minute, "how long to count the survivors' log lines and CPU")
	if err := fs.Parse(args); err != nil {
		return err
	}
	n, err := nodeArg(fs.Args())
	if err != nil {
		return err
	}
	if n < 1 || n > c.Nodes() || *restart == n || *restart < 0 || *restart > c.Nodes() {
		return fmt.Errorf("fault-times: node %d or -restart %d is not a usable node of 1 to %d", n, *restart, c.Nodes())
	}
	var survivors []int
	for i := 1; i <= c.Nodes(); i++ {
		if !c.Running(i) || c.Paused(i) {
			return fmt.Errorf("fault-times needs every node running and not paused; node %d is not", i)
		}
		if i != n {
			survivors = append(survivors, i)
		}
	}
	dead := c.Address(n)

	// One session that sees every node (to time the driver's view of the
	// dead one) and one that only uses survivors as coordinators, so the
	// probe measures the coordinator's failure detector, not a dead socket.
	all, err := probeSession(c.ContactPoints(), nil)
	if err != nil {
		return err
	}
	defer all.Close()
	var live []string
	for _, i := range survivors {
		live = append(live, c.Address(i))
	}
	probe, err := probeSession(live, gocql.WhiteListHostFilter(live...))
	if err != nil {
		return err
	}
	defer probe.Close()
	for _, stmt := range []string{probeCreateKS, probeCreateT} {
		if err := all.Query(stmt).ExecContext(ctx); err != nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
	}
	if err := c.WaitSchemaAgreement(ctx); err != nil {
		return err
	}
	if err := all.Query(probeInsert).Consistency(gocql.All).ExecContext(ctx); err != nil {
		return fmt.Errorf("probe write at ALL before the kill: %w", err)
	}

	killedAt := time.Now()
	if err := c.KillNode(ctx, n); err != nil {
		return err
	}
	// Whatever happens below, node n does not stay down.
	defer func() {
		if !c.Running(n) {
			if err := c.StartNode(context.WithoutCancel(ctx), n); err != nil {
				fmt.Fprintf(os.Stderr, "cassandra-local: start node %d again: %v\n", n, err)
			}
		}
	}()
	fmt.Printf("killed node %d (%s) with SIGKILL at %s\n", n, dead, killedAt.Format("15:04:05.000"))

	var wg sync.WaitGroup
	var mu sync.Mutex
	report := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf(format+"\n", args...)
	}
	detectCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	wg.Add(3)
	go func() {
		defer wg.Done()
		report("%s", driverSawDown(detectCtx, all, dead, killedAt))
	}()
	go func() {
		defer wg.Done()
		report("%s", nodetoolSawDown(detectCtx, c, survivors[0], dead, killedAt))
	}()
	go func() {
		defer wg.Done()
		report("%s", allTurnsUnavailable(detectCtx, probe, killedAt))
	}()
	wg.Wait()
	for _, i := range survivors {
		fmt.Println(loggedDown(c, i, dead, killedAt))
	}

	if *restart != 0 {
		t0 := time.Now()
		if err := c.StopNode(ctx, *restart); err != nil {
			return err
		}
		if err := c.StartNode(ctx, *restart); err != nil {
			return err
		}
		fmt.Printf("restarted node %d while node %d is down in %s\n", *restart, n, time.Since(t0).Round(100*time.Millisecond))
	}

	before := make(map[int]logUsage)
	for _, i := range survivors {
		if before[i], err = measureNode(c, i); err != nil {
			return fmt.Errorf("node %d: %w", i, err)
		}
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(*window):
	}
	perMin := float64(time.Minute) / float64(*window)
	for _, i := range survivors {
		after, err := measureNode(c, i)
		if err != nil {
			// Someone else stopped it meanwhile: say so, measure the rest.
			fmt.Printf("node %d not measured: %v\n", i, err)
			continue
		}
		d := after.minus(before[i])
		fmt.Printf("node %d while node %d is down: %.0f log lines/min (%.1f KiB/min), %.0f of them %q; CPU %.1f s/min\n",
			i, n, float64(d.lines)*perMin, float64(d.bytes)*perMin/1024, float64(d.roleWarnings)*perMin, roleSetupWarning, d.cpu*perMin)
	}

	t0 := time.Now()
	if err := c.StartNode(ctx, n); err != nil {
		return err
	}
	fmt.Printf("node %d started again and every node Up/Normal in %s\n", n, time.Since(t0).Round(100*time.Millisecond))
	if err := all.Query(probeDropKS).ExecContext(ctx); err != nil {
		return fmt.Errorf("%s: %w", probeDropKS, err)
	}
	return nil
}

func probeSession(hosts []string, filter gocql.HostFilter) (*gocql.Session, error) {
	cl := gocql.NewCluster(hosts...)
	cl.Consistency = gocql.LocalQuorum
	cl.Timeout = 15 * time.Second // longer than the server's read timeout (5 s)
	cl.ConnectTimeout = 5 * time.Second
	cl.HostFilter = filter
	s, err := cl.CreateSession()
	if err != nil {
		return nil, fmt.Errorf("connect to %v: %w", hosts, err)
	}
	return s, nil
}

// driverSawDown polls the driver's host list until it marks addr down.
func driverSawDown(ctx context.Context, s *gocql.Session, addr string, since time.Time) string {
	for {
		for _, h := range s.GetHosts() {
			if h.ConnectAddress().String() == addr && !h.IsUp() {
				return fmt.Sprintf("driver (gocql) marked %s down after %s", addr, time.Since(since).Round(time.Millisecond))
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Sprintf("driver (gocql) still saw %s up after %s", addr, time.Since(since).Round(time.Millisecond))
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// nodetoolSawDown runs nodetool status on node i until it lists addr DN.
// Each run takes a JVM start, so the figure is an upper bound; the log
// line (loggedDown) is exact.
func nodetoolSawDown(ctx context.Context, c *localcluster.Cluster, i int, addr string, since time.Time) string {
	runs := 0
	for {
		start := time.Since(since)
		out, err := c.Nodetool(ctx, i, "status")
		runs++
		if err == nil && strings.Contains(out, "\nDN  "+addr+" ") {
			return fmt.Sprintf("nodetool status on node %d showed DN %s after %s (run %d, which started at %s)",
				i, addr, time.Since(since).Round(100*time.Millisecond), runs, start.Round(100*time.Millisecond))
		}
		if ctx.Err() != nil {
			return fmt.Sprintf("nodetool status on node %d did not show DN %s within %s", i, addr, time.Since(since).Round(time.Second))
		}
	}
}

// allTurnsUnavailable reads one row at consistency ALL through a survivor
// until the coordinator refuses at once (Unavailable) instead of waiting
// for the dead replica (ReadTimeout).
func allTurnsUnavailable(ctx context.Context, s *gocql.Session, since time.Time) string {
	var timeouts, other int
	var slowest time.Duration
	for {
		t0 := time.Now()
		var v int
		err := s.Query(probeSelect).Consistency(gocql.All).ScanContext(ctx, &v)
		took := time.Since(t0)
		var unavailable *gocql.RequestErrUnavailable
		var timeout *gocql.RequestErrReadTimeout
		switch {
		case errors.As(err, &unavailable) && took < time.Second:
			return fmt.Sprintf("SELECT at ALL through a survivor: first fast UNAVAILABLE after %s (answered in %s); before it %d reads timed out (slowest %s) and %d failed otherwise",
				time.Since(since).Round(100*time.Millisecond), took.Round(time.Millisecond), timeouts, slowest.Round(100*time.Millisecond), other)
		case errors.As(err, &timeout):
			timeouts++
			slowest = max(slowest, took)
		case err != nil:
			other++
		}
		if ctx.Err() != nil {
			return fmt.Sprintf("SELECT at ALL never answered UNAVAILABLE within %s (last: %v)", time.Since(since).Round(time.Second), err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// downLine is the gossiper's "InetAddress /127.0.0.3:7000 is now DOWN".
var downLine = regexp.MustCompile(`^\S+\s+\[[^\]]*\] (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .* InetAddress /([0-9.]+):\d+ is now DOWN`)

// loggedDown finds node i's first "is now DOWN" line for addr after since.
func loggedDown(c *localcluster.Cluster, i int, addr string, since time.Time) string {
	f, err := os.Open(c.LogPath(i))
	if err != nil {
		return fmt.Sprintf("node %d: %v", i, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := downLine.FindStringSubmatch(sc.Text())
		if m == nil || m[2] != addr {
			continue
		}
		at, err := time.ParseInLocation("2006-01-02 15:04:05,000", m[1], time.Local)
		if err != nil || at.Before(since.Truncate(time.Millisecond)) {
			continue
		}
		return fmt.Sprintf("node %d's failure detector convicted %s after %s (logged \"is now DOWN\" at %s)",
			i, addr, at.Sub(since).Round(100*time.Millisecond), at.Format("15:04:05.000"))
	}
	return fmt.Sprintf("node %d logged no \"%s is now DOWN\" after the kill", i, addr)
}

// logUsage is what a node has written to its system logs (rolled files
// included) and the CPU time its JVM has used.
type logUsage struct {
	lines, bytes, roleWarnings int64
	cpu                        float64 // seconds
}

func (u logUsage) minus(v logUsage) logUsage {
	return logUsage{u.lines - v.lines, u.bytes - v.bytes, u.roleWarnings - v.roleWarnings, u.cpu - v.cpu}
}

func measureNode(c *localcluster.Cluster, i int) (logUsage, error) {
	var u logUsage
	files, err := filepath.Glob(filepath.Join(filepath.Dir(c.LogPath(i)), "system*.log"))
	if err != nil {
		return u, err
	}
	for _, path := range files {
		if err := countLog(path, &u); err != nil {
			return u, err
		}
	}
	u.cpu, err = cpuSeconds(c.Pid(i))
	return u, err
}

func countLog(path string, u *logUsage) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadSlice('\n')
		u.bytes += int64(len(line))
		if len(line) > 0 && line[len(line)-1] == '\n' {
			u.lines++
			if strings.Contains(string(line), roleSetupWarning) {
				u.roleWarnings++
			}
		}
		switch {
		case err == nil, errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF):
			return nil
		default:
			return err
		}
	}
}

// cpuSeconds is a process's user plus system time from /proc (clock ticks
// of 1/100 s on Linux).
func cpuSeconds(pid int) (float64, error) {
	if pid == 0 {
		return 0, errors.New("node is not running")
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	i := strings.LastIndexByte(string(raw), ')')
	f := strings.Fields(string(raw[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return float64(utime+stime) / 100, nil
}
