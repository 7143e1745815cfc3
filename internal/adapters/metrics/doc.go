// Package metrics owns orderd's Prometheus metrics and the hooks that feed
// them, so that no domain package imports Prometheus or OpenTelemetry:
//
//   - *Metrics implements workflow.Observer (CreateOrder outcomes, retry
//     ages) and has UnknownOutcome for ledger.Config.OnSettle;
//   - UnaryServerInterceptor counts and times gRPC calls;
//   - NewCQLObserver is the gocql.QueryObserver that times every CQL
//     statement and, when given a tracer, makes it a child span of the
//     request that ran it;
//   - RegisterReconciler exports reconciler.Loop.Stats as gauge and counter
//     functions read at scrape time.
//
// Every metric is registered on the Registerer given to New (cmd passes a
// dedicated registry; nothing uses the global one) and named orderd_*. A nil
// *Metrics is valid and records nothing, for tests and for processes that
// export no metrics. Label values are all drawn from small fixed sets: the
// CQL statement label is derived from the statement text as <verb>_<table>
// (StatementLabel), never from bound values.
package metrics
