package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/platform/failpoint"
	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

// previousRelease is the commit of the release before this one: the
// upgrade test runs a binary built from it beside this one. Move it forward
// when a release is cut.
const previousRelease = "f720c36c11fb98536d2b0d518a7b7a6f9c7ae67a"

// buildRelease builds orderd (the test build, which can arm failpoints) as
// it was at commit, from this repository's history, and returns its path.
func buildRelease(t *testing.T, commit string) string {
	t.Helper()
	src := t.TempDir()
	archive := exec.Command("sh", "-c", fmt.Sprintf("git archive --format=tar %s | tar -x -C %s", commit, src))
	archive.Dir = repoRoot()
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("check out the previous release %s (the upgrade test needs this repository's history: a clone with it, not a shallow one): %v\n%s", commit, err, out)
	}
	bin := filepath.Join(t.TempDir(), "orderd-"+commit[:12])
	build := exec.Command("go", "build", "-buildvcs=false", "-tags", "failpoints", "-o", bin, "./cmd/orderd")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the previous release %s: %v\n%s", commit, err, out)
	}
	return bin
}

// A fleet of two releases on one keyspace: the previous release and this
// one each leave change requests claimed and unfinished (the process dies
// right after the claim), and the other release's reconciler finishes them,
// forward and back. Nothing is withdrawn, dead-lettered or left undelivered:
// every change is applied once, at the version it expected, its request
// COMPLETE, its due entry gone and its event published under its change id.
func TestUpgradeAndRollbackFinishEachOthersChanges(t *testing.T) {
	isolated(t)
	previous := buildRelease(t, previousRelease)
	// The previous release cannot log in to Kafka (it predates SASL_SSL):
	// it publishes to the broker's PLAINTEXT listener.
	plain := broker.PlaintextAddr()
	if plain == "" {
		failInCIElseSkip(t, "the previous release needs a PLAINTEXT listener and the run's broker has none ("+broker.Describe()+
			"): start it with ORDERD_KAFKA_PLAINTEXT_ADDR=127.0.0.1:19094, or let the run start it")
	}
	envOf := func(bin string, env []string) []string {
		if bin == previous {
			return append(env, "ORDERD_KAFKA_BROKERS="+plain)
		}
		return env
	}
	ks := "e2e_upgrade_" + uuid.NewString()[:8]
	if out, err := runOrderd(context.Background(), "migrate", "--keyspace", ks); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	t.Cleanup(func() { dropKeyspace(context.Background(), ks) })
	topic := fmt.Sprintf("e2e.%d.upgrade", time.Now().UnixNano())
	own := []string{"ORDERD_KEYSPACE=" + ks, "ORDERD_KAFKA_TOPIC=" + topic}

	for _, c := range []struct {
		name             string
		writer, finisher string
	}{
		{"previous claims, this release finishes", previous, orderdBinary},
		{"this release claims, previous finishes", orderdBinary, previous},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Orders to change (this release's: its ORDER_CREATED events carry
			// the event ids publishedEvents checks for; no reconciler yet).
			maker := startOrderd(t, append(slices.Clone(own), "ORDERD_RECONCILER=false")...)
			var changes []pendingChange
			for _, op := range []string{order.OperationAmend, order.OperationCancel} {
				resp, _, err := create(t, maker.client, newRequest("19.90"))
				if err != nil {
					t.Fatalf("CreateOrder: %v", err)
				}
				changes = append(changes, pendingChange{op: op, orderID: resp.GetOrder().GetOrderId(), requestID: uuid.NewString()})
			}
			if err := maker.stop(); err != nil {
				t.Fatal(err)
			}

			// The writer claims each change and dies right after its claim.
			for _, ch := range changes {
				crashing := startBinary(t, c.writer, envOf(c.writer, withoutReconciler(append(slices.Clone(own), "ORDERD_FAILPOINTS="+failpoint.AfterClaim+"=exit")...))...)
				if err := ch.send(t, crashing.client); status.Code(err) != codes.Unavailable {
					t.Fatalf("%s on a process that dies after its claim = %v, want UNAVAILABLE (connection lost)", ch.op, err)
				}
				if code := crashing.waitExit(t, 20*time.Second); code != failpoint.ExitCode {
					t.Fatalf("writer exit code %d, want %d (the failpoint's)", code, failpoint.ExitCode)
				}
			}

			// The other release's reconciler finishes them.
			finisher := startBinary(t, c.finisher, envOf(c.finisher, append(slices.Clone(fastReconciler), own...))...)
			var eventIDs []string
			for _, ch := range changes {
				r := waitChangeState(t, finisher.client, ch, ordersv1.RequestState_REQUEST_STATE_COMPLETE, 90*time.Second)
				if r.GetLastError() != "" && r.GetLastError() != "DELIVERY_FAILED" {
					t.Errorf("%s %s: last error %q", ch.op, ch.requestID, r.GetLastError())
				}
				got, err := finisher.client.GetOrder(callCtx(t), &ordersv1.GetOrderRequest{OrderId: ch.orderID})
				if err != nil || got.GetOrder().GetVersion() != 2 {
					t.Fatalf("%s: order after the change = %v, %v; want version 2 (applied once)", ch.op, got, err)
				}
				if ch.op == order.OperationCancel && got.GetOrder().GetStatus() != ordersv1.OrderStatus_ORDER_STATUS_CANCELLED {
					t.Errorf("cancelled order is %s", got.GetOrder().GetStatus())
				}
				eventIDs = append(eventIDs, order.ChangeID(tenant, ch.op, uuid.MustParse(ch.requestID)).String())
			}
			counts := publishedEvents(t, topic, eventIDs, 60*time.Second)
			for _, id := range eventIDs {
				if counts[id] < 1 {
					t.Errorf("change event %s not published", id)
				}
			}
			for _, ch := range changes {
				if n := dueEntriesIn(t, ks, ch.requestID); n != 0 {
					t.Errorf("%s %s: %d due entries left, want none (event delivered, request settled)", ch.op, ch.requestID, n)
				}
			}
			if c.finisher == previous {
				changesWaitForTheOlderReconciler(t, own, finisher, changes[0].orderID)
			}
		})
	}
}

// changesWaitForTheOlderReconciler: while a reconciler of the previous
// release is live (its heartbeats say nothing of the operations it
// finishes), this release accepts no change (UNAVAILABLE,
// OPERATION_NOT_ENABLED, nothing claimed) but still takes orders; once it
// has left, the change goes through.
func changesWaitForTheOlderReconciler(t *testing.T, own []string, older *orderdProcess, orderID string) {
	t.Helper()
	newer := startOrderd(t, append(slices.Clone(own), "ORDERD_RECONCILER=false")...)
	held := &ordersv1.AmendOrderRequest{RequestId: uuid.NewString(), OrderId: orderID, ExpectedVersion: 2, ShippingNote: "once the rollout completes"}
	_, err := newer.client.AmendOrder(callCtx(t), held)
	if st := status.Convert(err); st.Code() != codes.Unavailable || reason(st) != "OPERATION_NOT_ENABLED" {
		t.Fatalf("AmendOrder beside a live older reconciler = %v, want UNAVAILABLE with OPERATION_NOT_ENABLED", err)
	}
	if r, err := newer.client.GetRequest(callCtx(t), &ordersv1.GetRequestRequest{RequestId: held.RequestId, Operation: order.OperationAmend}); status.Code(err) != codes.NotFound {
		t.Errorf("the refused change's request = %v, %v; want NOT_FOUND (never claimed)", r, err)
	}
	if _, _, err := create(t, newer.client, newRequest("5.00")); err != nil {
		t.Errorf("CreateOrder beside a live older reconciler = %v", err)
	}
	if err := older.stop(); err != nil { // leaves the reconciler group on its way out
		t.Fatal(err)
	}
	if _, err := eventually(30*time.Second, func() error {
		_, err := newer.client.AmendOrder(callCtx(t), held)
		return err
	}); err != nil {
		t.Fatalf("AmendOrder once the older reconciler left: %v", err)
	}
	getOrder(t, newer.client, orderID, 3)
}

// pendingChange is one change request of the upgrade test.
type pendingChange struct {
	op                 string
	orderID, requestID string
}

// send sends the change, expected at version 1.
func (ch pendingChange) send(t *testing.T, c ordersv1.OrderServiceClient) error {
	t.Helper()
	var err error
	switch ch.op {
	case order.OperationAmend:
		_, err = c.AmendOrder(callCtx(t), &ordersv1.AmendOrderRequest{RequestId: ch.requestID, OrderId: ch.orderID, ExpectedVersion: 1, ShippingNote: "after the upgrade"})
	default:
		_, err = c.CancelOrder(callCtx(t), &ordersv1.CancelOrderRequest{RequestId: ch.requestID, OrderId: ch.orderID, ExpectedVersion: 1})
	}
	return err
}

// waitChangeState waits until GetRequest shows the change request in want;
// a FAILED or NOT_FOUND request (dead-lettered, withdrawn) fails at once.
func waitChangeState(t *testing.T, c ordersv1.OrderServiceClient, ch pendingChange, want ordersv1.RequestState, within time.Duration) *ordersv1.WriteRequest {
	t.Helper()
	var last *ordersv1.WriteRequest
	if _, err := eventually(within, func() error {
		resp, err := c.GetRequest(callCtx(t), &ordersv1.GetRequestRequest{RequestId: ch.requestID, Operation: ch.op})
		if status.Code(err) == codes.NotFound {
			t.Fatalf("%s %s: NOT_FOUND (withdrawn), want %s", ch.op, ch.requestID, want)
		}
		if err != nil {
			return err
		}
		last = resp.GetRequest()
		if last.GetState() == ordersv1.RequestState_REQUEST_STATE_FAILED {
			t.Fatalf("%s %s: FAILED (dead-lettered, last error %q), want %s", ch.op, ch.requestID, last.GetLastError(), want)
		}
		if last.GetState() != want {
			return fmt.Errorf("state %s", last.GetState())
		}
		return nil
	}); err != nil {
		t.Fatalf("%s %s not %s within %s: %v (last %v)", ch.op, ch.requestID, want, within, err, last)
	}
	return last
}

// dueEntriesIn counts the live due-queue entries of a request in keyspace
// ks (any claim, any minute; a settled entry is marked done, not deleted).
func dueEntriesIn(t *testing.T, ks, requestID string) int {
	t.Helper()
	it := freshSession(t).Query(`SELECT done FROM `+ks+`.due_requests WHERE request_id = ? ALLOW FILTERING`, requestID).IterContext(callCtx(t))
	var done *bool
	n := 0
	for it.Scan(&done) {
		if done == nil || !*done {
			n++
		}
	}
	if err := it.Close(); err != nil {
		t.Fatalf("read due entries of %s: %v", requestID, err)
	}
	return n
}
