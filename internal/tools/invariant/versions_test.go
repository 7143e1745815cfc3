package invariant

import (
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/domain/order"
)

// A change id in two orders' histories (a change request id reused for
// another order and accepted there) is a violation naming both orders;
// each history alone is sound, and distinct changes of two orders are
// none.
func TestAChangeInTwoOrdersHistoriesIsAViolation(t *testing.T) {
	shared := order.ChangeID("t", order.OperationCancel, uuid.New())
	a, b := key{"t", uuid.New()}, key{"t", uuid.New()}
	hist := func(id uuid.UUID) *history {
		return &history{current: 2, status: order.StatusCancelled, rows: []historyRow{{version: 2, changeID: id, status: order.StatusCancelled}}}
	}
	v := changesOfTwoOrders(map[key]*history{a: hist(shared), b: hist(shared)})
	if len(v) != 1 || !strings.Contains(v[0], shared.String()) || !strings.Contains(v[0], a.id.String()) || !strings.Contains(v[0], b.id.String()) {
		t.Errorf("violations %q, want one naming change %s and orders %s, %s", v, shared, a.id, b.id)
	}
	if v := changesOfTwoOrders(map[key]*history{a: hist(shared), b: hist(uuid.New())}); len(v) != 0 {
		t.Errorf("two orders with changes of their own: violations %q, want none", v)
	}
}
