package versions_test

import (
	"testing"

	"github.com/atlasmart/orderd/internal/domain/order"
	"github.com/atlasmart/orderd/internal/stores/versions/versionstest"
)

// The fake is held to the contract the real store passes
// (e2e/contract_versions_test.go).
func TestMemoryContract(t *testing.T) {
	versionstest.Run(t, func(t *testing.T) versionstest.Subject {
		m := versionstest.NewMemory()
		return versionstest.Subject{Store: m, Arm: m.Arm, Before: m.Before,
			Unrecorded: func(_ *testing.T, ch order.Change) bool { return m.WriteUnrecorded(ch) }}
	})
}
