package client

import _ "embed" // the service config is a file so that other languages' clients can use it as is

// ServiceConfig is orderd's gRPC service config (gRFC A2, A6), also shipped
// as client/service_config.json for clients in other languages:
//
//   - round_robin over every address the target resolves to, so the load of
//     several orderd instances behind one DNS name is spread per call;
//   - a 10 s timeout per call;
//   - a retryPolicy for every method, all of which are safe to retry: the
//     writes are idempotent by request_id (a retry resends the same
//     message, so the same request_id) and the reads change nothing. It
//     retries UNAVAILABLE and ABORTED, at most 5 attempts, 0.1 s to 5 s
//     apart. orderd sends grpc-retry-pushback-ms with the delay of its
//     RetryInfo, and -1 (do not retry) on a recorded STALE_VERSION, so gRPC's
//     own retries wait as long as the server asks and never repeat a final
//     answer.
//
// What a service config cannot do — settle DEADLINE_EXCEEDED or
// OUTCOME_UNKNOWN with GetRequest, keep one request_id across calls, turn
// answers into typed errors — is what Client adds. Client uses the config's
// load balancing and timeout but retries itself (gRPC's retries are turned
// off on its connection, or every retry of Client's would be up to five).
//
//go:embed service_config.json
var ServiceConfig string
