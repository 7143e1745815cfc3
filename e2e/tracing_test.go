package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc/metadata"

	"github.com/atlasmart/orderd/internal/adapters/outbox"
	"github.com/atlasmart/orderd/internal/platform/failpoint"
)

// One CreateOrder's trace, followed from the client's traceparent to the
// reference consumer's apply, on the real broker, with both processes
// exporting spans to stderr (ORDERD_TRACING=stdout, -tracing stdout):
// orderd's "create order" line carries the client's trace id, the event's
// record carries it in its traceparent header (the background delivery
// after the answer), orderd exported the record's publish span in it, and
// the consumer's apply (its log line and its process span) continues it.
func TestOneCreateOrdersTraceReachesTheConsumersApply(t *testing.T) {
	topic := fmt.Sprintf("e2e.trace.%d", time.Now().UnixNano())
	t.Cleanup(func() {
		_, _ = kadm.NewClient(newKafkaClient(t, broker.Addr())).DeleteTopics(context.Background(), topic)
	})
	p := startOrderd(t, "ORDERD_TRACING=stdout", "ORDERD_KAFKA_TOPIC="+topic)
	consumer, _ := runConsumer(t, topic, "-tracing", "stdout", "-log-level", "debug")

	traceID, parent := randomHex(t, 16), randomHex(t, 8)
	req := newRequest("41.00")
	ctx := metadata.AppendToOutgoingContext(callCtx(t), "traceparent", "00-"+traceID+"-"+parent+"-01")
	if _, err := p.client.CreateOrder(ctx, req); err != nil {
		t.Fatalf("CreateOrder: %v", err)
	}
	event := createdEventIDOf(tenant, req.RequestId)
	t.Logf("request %s, event %s, trace %s", req.RequestId, event, traceID)

	line := waitLine(t, "orderd", p.output, `msg="create order"`, "request_id="+req.RequestId)
	wantTrace(t, "orderd's create order line", line, traceID)

	rec := recordOf(t, topic, event)
	if tp := outbox.Header(rec, "traceparent"); !strings.HasPrefix(tp, "00-"+traceID+"-") {
		t.Errorf("the event's record has traceparent %q, want trace %s (headers %v)", tp, traceID, rec.Headers)
	}

	line = waitLine(t, "orderconsumer", consumer.output, `msg="applied an order event"`, "event_id="+event)
	wantTrace(t, "the consumer's apply line", line, traceID)

	waitSpan(t, "orderd", p.output, traceID, topic+" publish")
	waitSpan(t, "orderconsumer", consumer.output, traceID, topic+" process")
}

// An event the reconciler publishes, long after the call returned, still
// goes out in the call's trace: orderd crashes after recording the order
// and before publishing its event (failpoint before-publish), and the
// record another orderd's reconciler publishes carries the traceparent of
// the CreateOrder call, which the claim kept; its publish span is exported
// in that trace.
func TestAnEventTheReconcilerPublishesKeepsTheCallsTrace(t *testing.T) {
	topic := fmt.Sprintf("e2e.trace.%d.reconciled", time.Now().UnixNano())
	t.Cleanup(func() {
		_, _ = kadm.NewClient(newKafkaClient(t, broker.Addr())).DeleteTopics(context.Background(), topic)
	})
	crashing := startOrderd(t, withoutReconciler("ORDERD_TRACING=stdout", "ORDERD_FAILPOINTS="+failpoint.BeforePublish+"=exit",
		"ORDERD_KAFKA_TOPIC="+topic)...)
	traceID := randomHex(t, 16)
	req := newRequest("43.00")
	ctx := metadata.AppendToOutgoingContext(callCtx(t), "traceparent", "00-"+traceID+"-"+randomHex(t, 8)+"-01")
	_, err := crashing.client.CreateOrder(ctx, req) // answered or not: the failpoint fires after the answer
	if code := crashing.waitExit(t, 20*time.Second); code != failpoint.ExitCode {
		t.Fatalf("orderd exit code %d, want %d (the failpoint's); CreateOrder said %v", code, failpoint.ExitCode, err)
	}

	healer := startOrderd(t, append(slices.Clone(fastReconciler), "ORDERD_TRACING=stdout", "ORDERD_KAFKA_TOPIC="+topic)...)
	event := createdEventIDOf(tenant, req.RequestId)
	rec := recordOf(t, topic, event)
	if tp := outbox.Header(rec, "traceparent"); !strings.HasPrefix(tp, "00-"+traceID+"-") {
		t.Errorf("the reconciler's record has traceparent %q, want the call's trace %s", tp, traceID)
	}
	waitSpan(t, "the healing orderd", healer.output, traceID, topic+" publish")
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// waitLine waits up to 30 s for a line of out holding every one of parts.
func waitLine(t *testing.T, who string, out *syncBuffer, parts ...string) string {
	t.Helper()
	var found string
	_, err := eventually(30*time.Second, func() error {
		for l := range strings.Lines(out.String()) {
			if containsAll(l, parts) {
				found = l
				return nil
			}
		}
		return fmt.Errorf("no %s line with %q", who, parts)
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

func wantTrace(t *testing.T, what, line, traceID string) {
	t.Helper()
	if !strings.Contains(line, "trace_id="+traceID+" ") || !strings.Contains(line, "span_id=") {
		t.Errorf("%s does not carry trace %s and a span id:\n%s", what, traceID, line)
	}
}

// recordOf reads topic from its start until the record of event.
func recordOf(t *testing.T, topic, event string) *kgo.Record {
	t.Helper()
	c := newKafkaClient(t, broker.Addr(), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		for _, r := range c.PollFetches(ctx).Records() {
			if outbox.Header(r, outbox.HeaderEventID) == event {
				return r
			}
		}
	}
	t.Fatalf("no record of event %s on %s within 30s", event, topic)
	return nil
}

// exportedSpan is what the stdout span exporter writes of a span (one JSON
// object per line), as far as this test reads it.
type exportedSpan struct {
	Name        string
	SpanContext struct{ TraceID string }
}

// waitSpan waits up to 30 s (the exporter sends in batches) for a span
// named name of trace traceID among the JSON lines of out.
func waitSpan(t *testing.T, who string, out *syncBuffer, traceID, name string) {
	t.Helper()
	_, err := eventually(30*time.Second, func() error {
		var names []string
		sc := bufio.NewScanner(strings.NewReader(out.String()))
		sc.Buffer(make([]byte, 0, 64*1024), 4<<20)
		for sc.Scan() {
			var s exportedSpan
			if !strings.HasPrefix(sc.Text(), "{") || json.Unmarshal(sc.Bytes(), &s) != nil || s.SpanContext.TraceID != traceID {
				continue
			}
			if s.Name == name {
				return nil
			}
			names = append(names, s.Name)
		}
		return fmt.Errorf("%s exported no span %q of trace %s (its spans of that trace: %q)", who, name, traceID, names)
	})
	if err != nil {
		t.Error(err)
	}
}
