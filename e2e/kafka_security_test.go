package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/atlasmart/orderd/internal/tools/localcluster"
)

// An orderd whose Kafka password is wrong still accepts orders, says why
// their events wait (a log line naming the refused login, the connect error
// and failed delivery counters), and publishes nothing. When the password
// file is corrected (a rotation done right) the same process publishes the
// waiting event, without a restart: the file is read at every login.
func TestKafkaWrongPasswordIsRefusedAndNothingPublished(t *testing.T) {
	if broker.Conn(localcluster.OrderdUser).Plaintext {
		failInCIElseSkip(t, "the run's broker serves PLAINTEXT: no login to refuse ("+broker.Describe()+")")
	}
	isolated(t)
	passFile := filepath.Join(t.TempDir(), "orderd.password")
	if err := os.WriteFile(passFile, []byte("not-the-password\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The topic exists, as in production (orderd creates it only at start,
	// and cannot with a refused login).
	topic := fmt.Sprintf("e2e.%d.wrongpass", time.Now().UnixNano())
	createTopic(t, topic)
	p := startOrderd(t, append(fastReconciler, "ORDERD_KAFKA_TOPIC="+topic, "ORDERD_KAFKA_PASSWORD_FILE="+passFile,
		"ORDERD_PUBLISH_TIMEOUT=2s")...)

	req := newRequest("12.34")
	if _, _, err := create(t, p.client, req); err != nil {
		t.Fatalf("CreateOrder with the broker refusing orderd's login: %v, want the order accepted", err)
	}
	if _, err := eventually(30*time.Second, func() error {
		if n := scrape(t, p, `orderd_outbox_deliveries_total{result="failed"}`); n < 1 {
			return errors.New("no failed delivery counted")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if errs := scrapeSum(t, p, "orderd_kafka_connect_errors_total"); errs < 1 {
		t.Errorf("orderd_kafka_connect_errors_total = %v, want the refused logins counted", errs)
	}
	if line := logLine(p.output.String(), "order event not delivered"); !strings.Contains(line, "SASL_AUTHENTICATION_FAILED") {
		t.Errorf("the failed publication's log line does not name the refused login (SASL_AUTHENTICATION_FAILED): %q", line)
	}
	if n := recordsIn(t, topic); n != 0 {
		t.Fatalf("%d records in %s with a wrong password, want none", n, topic)
	}

	// The right password in the same file: the next login succeeds.
	right, err := os.ReadFile(broker.Conn(localcluster.OrderdUser).PasswordFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(passFile, right, 0o600); err != nil {
		t.Fatal(err)
	}
	counts := publishedEvents(t, topic, createdEventIDs(req.RequestId), time.Minute)
	if n := counts[createdEventIDOf(tenant, req.RequestId)]; n != 1 {
		t.Errorf("event published %d times after the password was corrected, want once", n)
	}
}

// logLine is the first line of out that holds msg.
func logLine(out, msg string) string {
	for line := range strings.SplitSeq(out, "\n") {
		if strings.Contains(line, msg) {
			return line
		}
	}
	return ""
}

// createTopic creates topic (3 partitions) with a real client.
func createTopic(t *testing.T, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(newKafkaClient(t, broker.Addr())).CreateTopic(ctx, 3, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// recordsIn is how many records topic holds, read by a real client (the
// reference consumer's user).
func recordsIn(t *testing.T, topic string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(newKafkaClient(t, broker.Addr())).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	var n int64
	var missing bool
	ends.Each(func(o kadm.ListedOffset) {
		if errors.Is(o.Err, kerr.UnknownTopicOrPartition) {
			missing = true
			return
		}
		if o.Err != nil {
			t.Fatalf("end offset of %s/%d: %v", topic, o.Partition, o.Err)
		}
		n += o.Offset
	})
	if missing {
		t.Fatalf("topic %s does not exist", topic)
	}
	return n
}

// scrapeSum is the sum of every series of metric name at p's /metrics.
func scrapeSum(t *testing.T, p *orderdProcess, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + p.metricsAddr + "/metrics")
	if err != nil {
		t.Fatalf("scrape %s/metrics: %v", p.metricsAddr, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var sum float64
	for _, m := range regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(name)+`(?:\{[^}]*\})? ([0-9.e+-]+)$`).FindAllSubmatch(body, -1) {
		v, err := strconv.ParseFloat(string(m[1]), 64)
		if err != nil {
			t.Fatalf("sample %s: %v", name, err)
		}
		sum += v
	}
	return sum
}

// kafkaEnv is the environment that connects a binary (prefix ORDERD_ or
// ORDERCONSUMER_) to the run's broker as user.
func kafkaEnv(prefix, user string) []string {
	c := broker.Conn(user)
	if c.Plaintext {
		return []string{prefix + "KAFKA_PLAINTEXT=true"}
	}
	return []string{prefix + "KAFKA_USERNAME=" + c.Username, prefix + "KAFKA_PASSWORD_FILE=" + c.PasswordFile,
		prefix + "KAFKA_TLS_CA_FILE=" + c.CAFile}
}

// kafkaConnOpts are the franz-go options that connect the tests' own
// clients to the run's broker, as the reference consumer's user.
func kafkaConnOpts(t testing.TB) []kgo.Opt {
	t.Helper()
	opts, err := broker.Conn(localcluster.ConsumerUser).ClientOpts()
	if err != nil {
		t.Fatal(err)
	}
	return opts
}
