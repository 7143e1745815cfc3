package groupcommit

import "time"

// A batch's leader writes the batch through the driver, a deep call path: a
// fresh goroutine per batch grows its stack to that depth by copying it,
// batch after batch, which cost orderd about a tenth of its CPU under load.
// So leaders run on goroutines kept between batches: a leader is handed to
// an idle one, or gets a new one when none is idle; one left idle for
// leaderIdle ends.
const leaderIdle = 10 * time.Second

// idleLeaders takes a leader's work to a goroutine waiting for one.
var idleLeaders = make(chan func())

// runLeader runs lead on an idle leader goroutine, or on a new one.
func runLeader(lead func()) {
	select {
	case idleLeaders <- lead:
	default:
		go leaderLoop(lead)
	}
}

// leaderLoop runs lead, then whatever leaders it is handed, until it has
// been idle for leaderIdle.
func leaderLoop(lead func()) {
	idle := time.NewTimer(leaderIdle)
	defer idle.Stop()
	for {
		lead()
		idle.Reset(leaderIdle)
		select {
		case lead = <-idleLeaders:
		case <-idle.C:
			return
		}
	}
}
