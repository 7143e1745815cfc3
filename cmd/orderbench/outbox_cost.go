package main

import (
	"fmt"
	"strings"
)

// deliveryGoal is the goal on delivery's cost: with delivery on, orderd
// keeps at least 90% of its throughput with delivery off.
var deliveryGoal = goal{0.9, true}

// deliveryGoalStreams is the concurrency the goal is set at.
const deliveryGoalStreams = 64

// writeOutboxCost reports what delivery costs per order, from the outbox
// phase's rounds: the statements each process ran by label, the events it
// published, and the CPU of orderd, the cluster and the broker.
func writeOutboxCost(b *strings.Builder, rs []Result) {
	var levels []int
	for _, c := range concurrencies(rs) {
		on, ok1 := find(rs, "outbox-on", c)
		off, ok2 := find(rs, "outbox-off", c)
		if ok1 && ok2 && hasCounters(on) && hasCounters(off) {
			levels = append(levels, c)
		}
	}
	if len(levels) == 0 {
		return
	}
	fmt.Fprintf(b, "\n### Delivery's cost per order\n\n")
	fmt.Fprintf(b, "From the same rounds: what each process's counters (its `/metrics`) and the CPU of orderd, the three Cassandra JVMs and the Kafka broker (`/proc`) gained during its turns, over the orders of those turns. ")
	fmt.Fprintf(b, "Statements count every attempt orderd's driver made (`orderd_cql_duration_seconds`), the reconciler's and the background releases included; a group-committed batch counts once. ")
	fmt.Fprintf(b, "The broker's requests are not counted: orderd's producer exports none, and the broker's request metrics are JMX-only; *events acked* and *publishes* (`orderd_outbox_deliveries_total`, `orderd_outbox_publish_duration_seconds`) are per order, and the producer batches records (so its produce requests are at most the publishes). ")
	fmt.Fprintf(b, "The broker's CPU includes serving this benchmark's consumer of the topic, which polls in both drivers' turns. The setup above says whether the broker had a core of its own.\n\n")
	fmt.Fprintf(b, "| concurrency | driver | CQL statements/order | events acked/order | publishes/order | orderd CPU ms/order | cluster CPU ms/order | broker CPU ms/order |\n|---|---|---|---|---|---|---|---|\n")
	for _, c := range levels {
		for _, d := range []string{"outbox-on", "outbox-off"} {
			r, _ := find(rs, d, c)
			fmt.Fprintf(b, "| %d | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", c, d, statementsPerOrder(r), perOrder(r, deliveriesAcked), perOrder(r, publishes),
				1000*perOrder(r, cpuOrderd), 1000*perOrder(r, cpuCluster), 1000*perOrder(r, cpuBroker))
		}
	}
	for _, c := range levels {
		on, _ := find(rs, "outbox-on", c)
		off, _ := find(rs, "outbox-off", c)
		fmt.Fprintf(b, "\nStatements per order by label at concurrency %d:\n\n| statement | on | off | on − off |\n|---|---|---|---|\n", c)
		for _, k := range statementLabels(on, off) {
			a, z := perOrder(on, k), perOrder(off, k)
			fmt.Fprintf(b, "| %s | %.3f | %.3f | %+.3f |\n", strings.TrimPrefix(k, cqlPrefix), a, z, a-z)
		}
	}
	fmt.Fprintf(b, "\nGoal: delivery costs at most 10%% of throughput at %d streams (throughput on / off ≥ %.1f, paired by round; judged as the compare phase's goals):\n\n", deliveryGoalStreams, deliveryGoal.value)
	for _, c := range levels {
		on, _ := find(rs, "outbox-on", c)
		off, _ := find(rs, "outbox-off", c)
		thr := pairedRatios(on, off, roundThroughput)
		v := goalVerdict(deliveryGoal, thr)
		if c != deliveryGoalStreams {
			v = "(the goal is set at " + fmt.Sprint(deliveryGoalStreams) + ")"
		}
		fmt.Fprintf(b, "- concurrency %d: throughput on / off %s %s; p50 on / off %s\n", c, ratioRounds(thr, on.Throughput, off.Throughput), v,
			ratioRounds(pairedRatios(on, off, roundP50), on.P50ms, off.P50ms))
	}
}
