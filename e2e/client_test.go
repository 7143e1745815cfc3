package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/atlasmart/orderd/internal/domain/order"
)

// exampleSummary is the JSON the client example prints.
type exampleSummary struct {
	Intents         int     `json:"intents"`
	Orders          int     `json:"orders"`
	Replayed        int     `json:"replayed"`
	RetryableErrors int     `json:"retryable_errors"`
	FinalErrors     int     `json:"final_errors"`
	Seconds         float64 `json:"seconds"`
}

type exampleIntent struct {
	RequestID string `json:"request_id"`
	OrderID   string `json:"order_id"`
	Error     string `json:"error"`
}

// buildExample builds the client team's example program from the API
// module (github.com/atlasmart/orderd/proto/client/example).
func buildExample(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "example")
	build := exec.Command("go", "build", "-o", bin, "github.com/atlasmart/orderd/proto/client/example")
	build.Dir = repoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the client example: %v\n%s", err, out)
	}
	return bin
}

// TestClientExampleThroughNodeKillAndOrderdRestart: the client team's
// example places 1,000 orders through the Go client while a Cassandra node
// is killed and orderd is killed and restarted behind the same address.
// The program sees 1,000 orders and no error it would have to retry
// itself; Cassandra holds exactly one order per intent, and the checker
// finds every request settled.
func TestClientExampleThroughNodeKillAndOrderdRestart(t *testing.T) {
	if !cluster.CanControlNodes() {
		failInCIElseSkip(t, "this cluster offers no node control: "+cluster.Describe())
	}
	const intents, customers = 1000, 20
	bin := buildExample(t)
	first, err := launchOrderd(fastReconciler...)
	if err != nil {
		t.Fatal(err)
	}
	addr := first.addr
	var (
		mu      sync.Mutex
		current = first
	)
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		if err := current.stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("orderd output:\n%s", current.output.String())
		}
	})
	t.Cleanup(func() {
		if err := cluster.StartNode(context.Background(), 3); err != nil {
			t.Errorf("restart node 3: %v", err)
		}
	})

	prefix := fmt.Sprintf("client-example-%d", time.Now().UnixNano())
	outFile := filepath.Join(t.TempDir(), "intents.jsonl")
	creds := sec.defaultClient()
	args := []string{"-addr", addr, "-intents", strconv.Itoa(intents), "-concurrency", "16",
		"-customers", strconv.Itoa(customers), "-customer-prefix", prefix, "-out", outFile}
	if creds.CAFile != "" {
		args = append(args, "-ca-file", creds.CAFile)
	}
	if creds.CertFile != "" {
		args = append(args, "-cert-file", creds.CertFile, "-key-file", creds.KeyFile)
	}
	if creds.Plaintext {
		args = append(args, "-plaintext")
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "ORDERD_API_KEY="+creds.Token)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now().UTC()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}

	// The faults, paced by the program's own progress: node 3 dies at 300
	// orders, orderd at 600 (a new one starts on the same address).
	var nodeKilled, restarted bool
	var faultErr error
	scanner := bufio.NewScanner(stderr)
	var tail []string
	for scanner.Scan() {
		line := scanner.Text()
		tail = append(tail[max(0, len(tail)-20):], line)
		var n, total int
		if _, err := fmt.Sscanf(line, "progress %d/%d", &n, &total); err != nil {
			continue
		}
		if n >= 300 && !nodeKilled {
			nodeKilled = true
			if err := cluster.KillNode(context.Background(), 3); err != nil {
				faultErr = fmt.Errorf("kill node 3: %w", err)
			}
		}
		if n >= 600 && !restarted {
			restarted = true
			mu.Lock()
			_ = current.cmd.Process.Kill()
			<-current.exited
			next, err := launchOrderdAt(addr, fastReconciler...)
			if err != nil {
				faultErr = fmt.Errorf("restart orderd: %w", err)
			} else {
				current = next
			}
			mu.Unlock()
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("example: %v\n%s", err, strings.Join(tail, "\n"))
	}
	if faultErr != nil {
		t.Fatal(faultErr)
	}
	if !nodeKilled || !restarted {
		t.Fatalf("faults not injected (node killed %v, orderd restarted %v)", nodeKilled, restarted)
	}
	var sum exampleSummary
	if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
		t.Fatalf("summary %q: %v", stdout.String(), err)
	}
	t.Logf("example: %+v", sum)
	if sum.Intents != intents || sum.Orders != intents || sum.RetryableErrors != 0 || sum.FinalErrors != 0 {
		t.Errorf("summary %+v: want %d orders and no error", sum, intents)
	}

	// One order per intent, as the program saw it and as Cassandra holds it.
	b, err := os.ReadFile(outFile)
	if err != nil {
		t.Fatal(err)
	}
	requestIDs, orderIDs := map[string]bool{}, map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var in exampleIntent
		if err := json.Unmarshal([]byte(line), &in); err != nil {
			t.Fatalf("intent line %q: %v", line, err)
		}
		if in.Error != "" {
			t.Errorf("intent %s: %s", in.RequestID, in.Error)
		}
		requestIDs[in.RequestID], orderIDs[in.OrderID] = true, true
	}
	if len(requestIDs) != intents || len(orderIDs) != intents {
		t.Errorf("%d request ids and %d order ids over %d intents, want one each", len(requestIDs), len(orderIDs), intents)
	}
	s := freshSession(t)
	stored := map[string]int{}
	for _, month := range monthsBetween(began, time.Now().UTC()) {
		for c := range customers {
			iter := s.Query(`SELECT order_id FROM orders_by_customer_time WHERE tenant = ? AND customer_id = ? AND order_month = ?`,
				tenant, fmt.Sprintf("%s-%d", prefix, c), month).Iter()
			var id string
			for iter.Scan(&id) {
				stored[id]++
			}
			if err := iter.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	dups, missing := 0, 0
	for id, n := range stored {
		if n > 1 || !orderIDs[id] {
			dups++
		}
	}
	for id := range orderIDs {
		if stored[id] == 0 {
			missing++
		}
	}
	if len(stored) != intents || dups != 0 || missing != 0 {
		t.Errorf("Cassandra lists %d orders for the example's customers (%d duplicated or unknown, %d missing), want exactly %d", len(stored), dups, missing, intents)
	}
	verifyKeyspace(t, nil, 2*time.Minute)
}

// monthsBetween lists the stored months ("YYYY-MM-01") from a through b.
func monthsBetween(a, b time.Time) []string {
	var out []string
	for m := order.MonthOf(a); ; {
		out = append(out, m)
		if m == order.MonthOf(b) {
			return out
		}
		t, _ := time.Parse("2006-01-02", m)
		m = order.MonthOf(t.AddDate(0, 1, 0))
	}
}
