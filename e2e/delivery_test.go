package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/atlasmart/orderd/internal/adapters/outbox"
	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/platform/failpoint"
	"github.com/atlasmart/orderd/internal/tools/localcluster"
	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

// publishedEvents reads topic from its start until every event
// id in want was seen at least once (then a little longer, to count
// copies), and returns how many records each event id has. Every record is
// checked to be a well-formed order event keyed by its order id, its id and
// type in its headers (an ORDER_CREATED's id derives from its tenant and
// request id; a change's makes version 2 or more).
func publishedEvents(t *testing.T, topic string, want []string, within time.Duration) map[string]int {
	t.Helper()
	c := newKafkaClient(t, broker.Addr(), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	counts := map[string]int{}
	missing := func() []string {
		var out []string
		for _, id := range want {
			if counts[id] == 0 {
				out = append(out, id)
			}
		}
		return out
	}
	deadline := time.Now().Add(within)
	var settleUntil time.Time // once all are seen: read on briefly for copies
	for {
		now := time.Now()
		if len(missing()) == 0 && settleUntil.IsZero() {
			settleUntil = now.Add(time.Second)
		}
		if !settleUntil.IsZero() && now.After(settleUntil) {
			return counts
		}
		if now.After(deadline) {
			t.Fatalf("events of %d of %d orders not published within %s (e.g. %v)", len(missing()), len(want), within, missing()[:min(3, len(missing()))])
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fetches := c.PollFetches(ctx)
		cancel()
		fetches.EachRecord(func(r *kgo.Record) {
			ev, err := outbox.Decode(r)
			if err != nil {
				t.Fatalf("record %s/%d@%d: %v", r.Topic, r.Partition, r.Offset, err)
			}
			created := ev.GetType() == ordersv1.OrderEventType_ORDER_EVENT_TYPE_CREATED
			if string(r.Key) != ev.GetOrder().GetOrderId() || outbox.Header(r, outbox.HeaderEventID) != ev.GetEventId() ||
				outbox.Header(r, outbox.HeaderEventType) != "ORDER_"+strings.TrimPrefix(ev.GetType().String(), "ORDER_EVENT_TYPE_") ||
				created && ev.GetEventId() != createdEventIDOf(ev.GetTenant(), ev.GetRequestId()) || !created && ev.GetOrderVersion() < 2 ||
				ev.GetOrder().GetVersion() != ev.GetOrderVersion() {
				t.Fatalf("record %s/%d@%d is not a well-formed order event: key %q, headers %v, event %v",
					r.Topic, r.Partition, r.Offset, r.Key, r.Headers, ev)
			}
			counts[ev.GetEventId()]++
		})
	}
}

// createdEventIDOf is the id of the ORDER_CREATED event of tenant's request.
func createdEventIDOf(tenant, requestID string) string {
	id, err := uuid.Parse(requestID)
	if err != nil {
		return ""
	}
	return order.EventID(tenant, order.OperationCreate, id).String()
}

// createdEventIDs are the ids of the ORDER_CREATED events of the run's
// tenant's requests.
func createdEventIDs(requestIDs ...string) []string {
	out := make([]string, len(requestIDs))
	for i, id := range requestIDs {
		out[i] = createdEventIDOf(tenant, id)
	}
	return out
}

// Every accepted order's event is published once on the happy path: the
// first attempt publishes it after answering; duplicates, answered from the
// recorded outcome, publish nothing. The acknowledgement is counted.
func TestAcceptedOrdersArePublishedOnceEach(t *testing.T) {
	p := server(t)
	ackedBefore := scrape(t, p, `orderd_outbox_deliveries_total{result="acked"}`)
	var ids []string
	for i := range 20 {
		req := newRequest(fmt.Sprintf("%d.50", 10+i))
		for range 2 { // the client retries each once
			if _, _, err := create(t, p.client, req); err != nil {
				t.Fatalf("CreateOrder: %v", err)
			}
		}
		ids = append(ids, req.RequestId)
	}
	events := createdEventIDs(ids...)
	counts := publishedEvents(t, eventsTopic, events, 30*time.Second)
	for _, id := range events {
		if counts[id] != 1 {
			t.Errorf("event %s published %d times, want once", id, counts[id])
		}
	}
	if acked := scrape(t, p, `orderd_outbox_deliveries_total{result="acked"}`) - ackedBefore; acked < float64(len(ids)) {
		t.Errorf("deliveries acked = %v, want at least %d", acked, len(ids))
	}
}

// The worker's crash cases for an event: the process dies before it sent the event
// (after the client's order was recorded), or after the broker acknowledged
// it but before the delivery was recorded (the due entry released). Either
// way a fresh orderd's reconciler publishes it: at least once, every copy
// with the same event id, and the reference consumer applies it once.
func TestDeliveryWorkerKilledBeforeSendingOrAfterTheAck(t *testing.T) {
	cases := []struct {
		point   string
		atLeast int // records of the event once healed
	}{
		{failpoint.BeforePublish, 1},
		{failpoint.AfterPublish, 2}, // the crashed process's and the reconciler's
	}
	for _, c := range cases {
		t.Run(c.point, func(t *testing.T) {
			topic := fmt.Sprintf("e2e.%d.worker", time.Now().UnixNano())
			crashing := startOrderd(t, withoutReconciler("ORDERD_FAILPOINTS="+c.point+"=exit", "ORDERD_KAFKA_TOPIC="+topic)...)
			req := newRequest("63.00")
			// The failpoint fires in the background delivery, after the
			// answer: the client may or may not see it before the exit.
			_, _, err := create(t, crashing.client, req)
			if code := crashing.waitExit(t, 20*time.Second); code != failpoint.ExitCode {
				t.Fatalf("orderd exit code %d, want %d (the failpoint's); CreateOrder said %v", code, failpoint.ExitCode, err)
			}
			r := readRows(t, req.RequestId, "", "", "")
			if r.ledger == nil {
				t.Fatal("no ledger row after the crash")
			}
			if n := dueEntries(t, req.RequestId); n != 1 {
				t.Fatalf("due entries after the crash = %d, want 1 (the delivery obligation)", n)
			}

			healer := startOrderd(t, append(slices.Clone(fastReconciler), "ORDERD_KAFKA_TOPIC="+topic)...)
			// The entry goes only once the healer's publication was acknowledged.
			waitNoDueEntries(t, req.RequestId, 30*time.Second)
			event := createdEventIDOf(tenant, req.RequestId)
			counts := publishedEvents(t, topic, []string{event}, 30*time.Second)
			if counts[event] < c.atLeast {
				t.Errorf("event published %d times, want at least %d", counts[event], c.atLeast)
			}
			t.Logf("event published %d times", counts[event])

			consumer, consumed := runConsumer(t, topic)
			wantConsumerCounts(t, consumer, map[string]float64{"applied": 1, "duplicate": float64(counts[event] - 1)})
			inbox, err := consumerInbox(consumed)
			if err != nil {
				t.Fatal(err)
			}
			if len(inbox) != 1 || inbox[uuid.MustParse(event)] != 1 {
				t.Errorf("consumer inbox = %v, want exactly the order's event, once", inbox)
			}
			wr := waitRequestState(t, healer.client, req.RequestId, ordersv1.RequestState_REQUEST_STATE_COMPLETE, 10*time.Second)
			if wr.OrderId == "" {
				t.Errorf("GetRequest = %v, want the order", wr)
			}
		})
	}
}

// The broker down for a while: orders are still accepted (the event is not
// on the client's path); their events wait in the due queue, the backlog
// and parked gauges rise, GetRequest shows DELIVERY_FAILED; once the broker
// is back every event is published, the backlog falls to zero and every
// due entry is gone. Nothing is lost.
func TestBrokerDownEventsWaitAndAreAllDeliveredWhenItReturns(t *testing.T) {
	if !broker.CanControl() {
		failInCIElseSkip(t, "this run cannot stop its Kafka broker: "+broker.Describe())
	}
	p := startOrderd(t, append(slices.Clone(fastReconciler), "ORDERD_PUBLISH_TIMEOUT=1s", "ORDERD_RECONCILE_MAX_ATTEMPTS=2")...)
	startBroker := killBroker(t)

	var ids []string
	for i := range 10 {
		req := newRequest(fmt.Sprintf("%d.25", 70+i))
		if _, _, err := create(t, p.client, req); err != nil {
			t.Fatalf("CreateOrder with the broker down: %v (delivery must not be on the client's path)", err)
		}
		ids = append(ids, req.RequestId)
	}
	// Every order's event is owed and, past two attempts, parked: the
	// gauges count them all at once, though a pass lists only those that
	// fell due since the one before.
	var backlog, parked float64
	if _, err := eventually(60*time.Second, func() error {
		backlog, parked = scrape(t, p, "orderd_outbox_backlog"), scrape(t, p, "orderd_outbox_parked")
		if backlog != float64(len(ids)) || parked != float64(len(ids)) {
			return fmt.Errorf("backlog %v, parked %v", backlog, parked)
		}
		return nil
	}); err != nil {
		t.Fatalf("with the broker down the backlog did not come to all %d orders, all parked: %v", len(ids), err)
	}
	age := scrape(t, p, "orderd_outbox_oldest_undelivered_age_seconds")
	resp, err := p.client.GetRequest(callCtx(t), &ordersv1.GetRequestRequest{RequestId: ids[0]})
	if err != nil || resp.GetRequest().GetLastError() != string(fault.ReasonDeliveryFailed) || resp.GetRequest().GetAttempts() < 1 {
		t.Errorf("GetRequest of an undelivered order = %v, %v; want last_error DELIVERY_FAILED with its attempts", resp, err)
	}
	t.Logf("broker down: backlog %v, parked %v, oldest %.1fs", backlog, parked, age)
	for _, id := range ids {
		if n := dueEntries(t, id); n < 1 {
			t.Errorf("request %s: %d due entries while its event is undelivered, want at least 1", id, n)
		}
	}

	startBroker()
	events := createdEventIDs(ids...)
	counts := publishedEvents(t, eventsTopic, events, 90*time.Second)
	for _, id := range events {
		if counts[id] < 1 {
			t.Errorf("event %s not published", id)
		}
	}
	if _, err := eventually(60*time.Second, func() error {
		if b := scrape(t, p, "orderd_outbox_backlog"); b != 0 {
			return fmt.Errorf("backlog %v", b)
		}
		return nil
	}); err != nil {
		t.Errorf("backlog did not fall to 0 after the broker returned: %v", err)
	}
	for _, id := range ids {
		waitNoDueEntries(t, id, 30*time.Second)
	}
}

// The broker down for longer than a request's retention: the ledger row
// goes with the retention (here a minute), and the order's due entry stays,
// since it owes the event (a delivery attempt failed). Once the broker is
// back the reconciler publishes the event from the order's rows, and only
// then does the entry go. Before, the entry expired with the claim and the
// event was never delivered, without a trace. In a keyspace of its own:
// the request expires there after a minute, which the run's keyspace,
// verified with the default retention, would report as an order without
// its request.
func TestAnEventOwedPastTheRetentionIsDeliveredWhenTheBrokerReturns(t *testing.T) {
	if !broker.CanControl() {
		failInCIElseSkip(t, "this run cannot stop its Kafka broker: "+broker.Describe())
	}
	ks := fmt.Sprintf("e2e_owed_%d", time.Now().UnixNano()/1e6)
	if out, err := runOrderd(context.Background(), "migrate", "--keyspace", ks); err != nil {
		t.Fatalf("migrate %s: %v\n%s", ks, err, out)
	}
	t.Cleanup(func() { dropKeyspace(context.Background(), ks) })
	p := startOrderd(t, append(slices.Clone(fastReconciler), "ORDERD_KEYSPACE="+ks, "ORDERD_PUBLISH_TIMEOUT=1s",
		"ORDERD_RECONCILE_MAX_ATTEMPTS=2", "ORDERD_RETENTION=1m")...)
	startBroker := killBroker(t)
	req := newRequest("91.00")
	if _, _, err := create(t, p.client, req); err != nil {
		t.Fatalf("CreateOrder with the broker down: %v", err)
	}
	if _, err := eventually(3*time.Minute, func() error {
		var n int
		if err := freshSession(t).Query(`SELECT count(*) FROM `+ks+`.write_requests_by_id WHERE tenant = ? AND operation = ? AND request_id = ?`,
			tenant, order.OperationCreate, req.RequestId).ScanContext(callCtx(t), &n); err != nil {
			return err
		}
		if n != 0 {
			return errors.New("the ledger row is still there")
		}
		return nil
	}); err != nil {
		t.Fatalf("the request's retention of a minute: %v", err)
	}
	if n := dueEntriesIn(t, ks, req.RequestId); n != 1 {
		t.Fatalf("due entries once the claim is gone = %d, want 1 (the event is still owed)", n)
	}
	if parked := scrape(t, p, "orderd_outbox_parked"); parked < 1 {
		t.Errorf("orderd_outbox_parked = %v past the retention, want the owed event counted", parked)
	}

	startBroker()
	events := createdEventIDs(req.RequestId)
	if counts := publishedEvents(t, eventsTopic, events, 90*time.Second); counts[events[0]] < 1 {
		t.Errorf("event %s not published after the broker returned", events[0])
	}
	if _, err := eventually(60*time.Second, func() error {
		if n := dueEntriesIn(t, ks, req.RequestId); n != 0 {
			return fmt.Errorf("%d due entries", n)
		}
		return nil
	}); err != nil {
		t.Errorf("once the event was delivered: %v left, want none", err)
	}
}

// killBroker kills the run's Kafka broker and returns what starts it again;
// if the test ends before that, its cleanup starts it.
func killBroker(t *testing.T) (start func()) {
	t.Helper()
	if err := broker.Kill(context.Background()); err != nil {
		t.Fatalf("kill the broker: %v", err)
	}
	started := false
	t.Cleanup(func() {
		if !started {
			_ = broker.Start(context.Background())
		}
	})
	return func() {
		t.Helper()
		if err := broker.Start(context.Background()); err != nil {
			t.Fatalf("start the broker again: %v", err)
		}
		started = true
	}
}

// dueEntries counts the live due-queue entries of a request (any claim,
// any minute; a settled entry is marked done, not deleted).
func dueEntries(t *testing.T, requestID string) int {
	t.Helper()
	return dueEntriesIn(t, keyspace, requestID)
}

func waitNoDueEntries(t *testing.T, requestID string, within time.Duration) {
	t.Helper()
	if _, err := eventually(within, func() error {
		if n := dueEntries(t, requestID); n != 0 {
			return fmt.Errorf("%d due entries", n)
		}
		return nil
	}); err != nil {
		t.Fatalf("request %s: %v left after delivery, want none", requestID, err)
	}
}

// runConsumer starts the reference consumer (cmd/orderconsumer) on topic,
// from its start, with a group and a keyspace of its own (dropped at the
// test's end), waits until it consumes, and returns it with a session on
// its keyspace. extra are more flags.
func runConsumer(t *testing.T, topic string, extra ...string) (*consumerProcess, *gocql.Session) {
	t.Helper()
	ks := fmt.Sprintf("e2e_consumer_%d", time.Now().UnixNano())
	t.Cleanup(func() { dropKeyspace(context.Background(), ks) }) // after the process stops: cleanups run last-in first-out
	args := []string{"-brokers", broker.Addr(), "-topic", topic, "-group", ks, "-keyspace", ks,
		"-cassandra", strings.Join(cluster.ContactPoints(), ","), "-local-dc", "dc1", "-session-timeout", "6s", "-log-format", "text"}
	p := startConsumer(t, buildConsumer(t), append(args, extra...)...)
	p.keyspace = ks
	return p, consumerSession(t, p, ks)
}

// Orders accepted while delivery was off are owed no event: no due entry
// waits for one. `orderd republish` publishes their whole story (creation
// and changes, each under its stable id) for a tenant and a time range;
// -dry-run counts them and publishes nothing.
func TestRepublishDeliversWhatDeliveryOffNeverOwed(t *testing.T) {
	p := startOrderd(t, "ORDERD_DELIVERY=false", "ORDERD_RECONCILER=false")
	from := time.Now().UTC().Add(-time.Second)
	var events []string
	for i := range 2 {
		req := newRequest(fmt.Sprintf("%d.25", 30+i))
		resp, _, err := create(t, p.client, req)
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, createdEventIDOf(tenant, req.RequestId))
		if i == 0 {
			amended := &ordersv1.AmendOrderRequest{RequestId: uuid.NewString(), OrderId: resp.GetOrder().GetOrderId(), ExpectedVersion: 1, ShippingNote: "republished"}
			if _, _, err := amend(t, p.client, amended); err != nil {
				t.Fatal(err)
			}
			events = append(events, order.ChangeID(tenant, order.OperationAmend, uuid.MustParse(amended.RequestId)).String())
		}
	}
	to := time.Now().UTC().Add(time.Second)
	topic := fmt.Sprintf("e2e.%d.republish", time.Now().UnixNano())
	env := append([]string{"ORDERD_KEYSPACE=" + keyspace, "ORDERD_KAFKA_BROKERS=" + broker.Addr(), "ORDERD_KAFKA_TOPIC=" + topic, "ORDERD_METRICS_ADDR="},
		kafkaEnv("ORDERD_", localcluster.OrderdUser)...)
	args := []string{"republish", "-tenant", tenant, "-from", from.Format(time.RFC3339Nano), "-to", to.Format(time.RFC3339Nano)}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := runOrderdEnv(ctx, env, append(args, "-dry-run")...)
	if err != nil || !strings.Contains(out, "would republish") {
		t.Fatalf("republish -dry-run: %v\n%s", err, out)
	}
	out, err = runOrderdEnv(ctx, env, args...)
	if err != nil || !strings.Contains(out, "republished") {
		t.Fatalf("republish: %v\n%s", err, out)
	}
	counts := publishedEvents(t, topic, events, 30*time.Second)
	for _, id := range events {
		if counts[id] != 1 {
			t.Errorf("event %s published %d times by one republish (dry run included), want once", id, counts[id])
		}
	}
}
