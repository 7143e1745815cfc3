package metrics

import (
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"
)

// KafkaHook is the Kafka client's own metrics, franz-go's Prometheus
// plugin (kprom) as orderd_kafka_*: connections and their errors, bytes
// written and read, produced records and bytes by broker (node_id) and
// topic, and each request's round trip. They tell what orderd_outbox_* cannot: whether the brokers are
// reached at all (orderd_kafka_connect_errors_total, which counts a refused
// login too). The plugin registers them when the client is made and
// unregisters them when it is closed, so one Metrics serves one client.
func (m *Metrics) KafkaHook() kgo.Hook {
	return kprom.NewMetrics(Namespace, kprom.Registerer(m.reg), kprom.Subsystem("kafka"),
		kprom.FetchAndProduceDetail(kprom.ByNode, kprom.ByTopic, kprom.Records, kprom.UncompressedBytes, kprom.ConsistentNaming),
		kprom.Histograms(kprom.RequestDurationE2E))
}
