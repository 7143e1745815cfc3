package e2e

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/atlasmart/orderd/internal/tools/invariant"
	"github.com/atlasmart/orderd/internal/tools/loadgen"
	"github.com/atlasmart/orderd/ledger"
	ordersv1 "github.com/atlasmart/orderd/proto/atlasmart/orders/v1"
)

// Claims committed at ANY (ORDERD_CLAIM_COMMIT=any, docs/architecture.md
// "Claim commit at ANY"): orderd asks every node for its Paxos settings at
// start (the local cluster purges Paxos state as `repaired`), and the
// request path keeps every guarantee: one order per intent, the recorded
// answer to every retry, a reused id rejected with nothing changed, one
// order out of 32 identical attempts, and a claim whose answer was lost
// settled as applied.
func TestClaimCommitAtAny(t *testing.T) {
	p := startOrderd(t, "ORDERD_CLAIM_COMMIT=any", "ORDERD_CQL_FAULTS=ledger.claim=lose-response")
	log := p.output.String()
	if !strings.Contains(log, "claims commit at ANY") || !strings.Contains(log, "nodes=3") {
		t.Fatalf("orderd did not report checking the 3 nodes for commit at ANY:\n%s", log)
	}

	t.Run("a claim whose answer was lost is settled as applied", func(t *testing.T) {
		req := newRequest("64.00") // the first claim: its armed fault loses the answer
		resp, replayed, err := create(t, p.client, req)
		if err != nil {
			t.Fatalf("CreateOrder: %v; want the claim settled as applied", err)
		}
		if resp.Replayed || replayed != "false" {
			t.Errorf("replayed=%v header=%q, want false", resp.Replayed, replayed)
		}
		assertExactlyOneOrder(t, req, resp.Order, "64.00")
		if log := p.output.String(); !strings.Contains(log, "op=claim settled=applied") {
			t.Errorf("orderd did not report settling the claim:\n%s", log)
		}
	})

	t.Run("accept once, replay, reuse rejected", func(t *testing.T) {
		req := newRequest("77.7")
		first, _, err := create(t, p.client, req)
		if err != nil {
			t.Fatalf("CreateOrder: %v", err)
		}
		assertExactlyOneOrder(t, req, first.Order, "77.70")
		retry, replayed, err := create(t, p.client, req)
		if err != nil || !retry.Replayed || replayed != "true" || !proto.Equal(retry.Order, first.Order) {
			t.Fatalf("retry = %v (replayed %q), %v; want the recorded order replayed", retry, replayed, err)
		}
		other := proto.Clone(req).(*ordersv1.CreateOrderRequest)
		other.Total = "99.99"
		_, _, err = create(t, p.client, other)
		if st := status.Convert(err); st.Code() != codes.FailedPrecondition || reason(st) != "REQUEST_ID_REUSED" {
			t.Fatalf("reuse: %v, want FailedPrecondition REQUEST_ID_REUSED", err)
		}
		assertExactlyOneOrder(t, req, first.Order, "77.70")
		gr, err := p.client.GetRequest(callCtx(t), &ordersv1.GetRequestRequest{RequestId: req.RequestId})
		if err != nil || gr.Request.State != ordersv1.RequestState_REQUEST_STATE_COMPLETE {
			t.Errorf("GetRequest = %v, %v; want COMPLETE", gr.GetRequest(), err)
		}
	})

	t.Run("32 identical attempts at once: one order", func(t *testing.T) {
		assertIdenticalAttemptsMakeOneOrder(t, p.client, 32)
	})
	verifyKeyspace(t, nil, 30*time.Second)
}

// The ledger store with its claims committed at ANY passes the same
// contract as with LOCAL_QUORUM commits (every branch of every LWT), on the
// real cluster.
func TestLedgerContractClaimCommitAny(t *testing.T) {
	runLedgerContract(t, ledger.Config{ClaimCommitAny: true})
}

// TestLoadWithOneNodeKilledClaimCommitAny is the node-kill load test on
// claims committed at ANY: a coordinator that dies may have answered a
// claim whose commit never left it. Every acknowledged request is present
// exactly once, every retry gets its recorded answer, and the checker
// passes (it reads again, linearizably, any request the quorum scan
// missed).
func TestLoadWithOneNodeKilledClaimCommitAny(t *testing.T) {
	if !cluster.CanControlNodes() {
		failInCIElseSkip(t, "this cluster offers no node control: "+cluster.Describe())
	}
	p := startOrderd(t, append(slices.Clone(fastReconciler), "ORDERD_CLAIM_COMMIT=any")...)
	t.Cleanup(func() {
		if err := cluster.StartNode(context.Background(), 2); err != nil {
			t.Errorf("restart node 2: %v", err)
		}
	})
	var once sync.Once
	killed := false
	rep := loadgen.Run(context.Background(), p.client, loadgen.Config{
		Intents: 600, Concurrency: 32, DuplicateShare: 0.2, ConflictShare: 0.05, RetryFor: 90 * time.Second,
		OnCall: func(calls int) {
			if calls == 200 {
				once.Do(func() {
					killed = true
					if err := cluster.KillNode(context.Background(), 2); err != nil {
						t.Errorf("kill node 2: %v", err)
					}
				})
			}
		},
	})
	if !killed {
		t.Fatal("node 2 was never killed")
	}
	checkLoad(t, rep)
	verifyKeyspace(t, rep.Acks, 2*time.Minute)
}

// The checker reads again, at the serial level, a request an
// acknowledgement names that its quorum scan did not return, before it
// reports it missing.
func TestVerifyReadsAMissedRequestAgain(t *testing.T) {
	s := freshSession(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	id := uuid.NewString()
	rep, err := invariant.Check(ctx, s, invariant.Config{Acks: []invariant.Ack{{Tenant: tenant, RequestID: id, OrderID: uuid.NewString()}}})
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if !slices.ContainsFunc(rep.Violations, func(v string) bool { return strings.Contains(v, "acknowledged request "+id+" is missing") }) {
		t.Errorf("violations %v, want the request that does not exist reported missing", rep.Violations)
	}
	if rep.ReadAgain != 0 {
		t.Errorf("ReadAgain = %d for a request that does not exist, want 0", rep.ReadAgain)
	}
}
