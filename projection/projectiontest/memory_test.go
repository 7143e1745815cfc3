package projectiontest

import "testing"

func TestProjectionContractMemory(t *testing.T) {
	Run(t, func(t *testing.T) Subject {
		m := NewMemory()
		return Subject{Store: m.Store, Arm: m.Arm, Events: m.Events}
	})
}
