package grpcapi

import "github.com/atlasmart/orderd/internal/domain/fault"

// messageOf is the one table of client-facing messages, one per reason. A
// message says what happened and what to do; it never carries driver text,
// hosts or the request's payload (those go to the log, once, in Status).
var messageOf = map[fault.Reason]string{
	fault.ReasonInvalidArgument:     "the request has invalid fields",
	fault.ReasonRequestIDReused:     "this request_id was already used for a different command; use a new request_id for a new intent",
	fault.ReasonRequestFailed:       "this request failed permanently and was set aside; an operator can requeue it",
	fault.ReasonRequestInProgress:   "another attempt of this request is in progress; retry with the same request_id",
	fault.ReasonRequestNotFound:     "no such request is recorded (never claimed, or past its retention)",
	fault.ReasonOrderNotFound:       "no order with that id",
	fault.ReasonClusterUnavailable:  "the database is unavailable; retry with the same request_id",
	fault.ReasonOutcomeUnknown:      "the outcome of a write is unknown; retry with the same request_id to settle it",
	fault.ReasonCommandUnreadable:   "internal error",
	fault.ReasonRateLimited:         "too many requests for this tenant; retry after the delay in RetryInfo",
	fault.ReasonDeliveryFailed:      "the order is accepted; its event has not reached the event broker yet and will be published when the broker answers",
	fault.ReasonUnauthenticated:     "missing or invalid credentials: send a bearer token (API key or JWT) in the authorization metadata, or a client certificate",
	fault.ReasonPermissionDenied:    "this identity may not make this call",
	fault.ReasonInternal:            "internal error",
	fault.ReasonStaleVersion:        "the order is not at expected_version (its version is in the ErrorInfo metadata current_version); read the order and send a corrected change with a new request_id",
	fault.ReasonOrderCancelled:      "the order is cancelled and cannot be changed",
	fault.ReasonOperationUnknown:    "this request's operation is not known to this server's release; a server of the release that accepted it finishes it",
	fault.ReasonClockSkewed:         "this server's clock is too far from the database's to accept new work safely; retry with the same request_id (another server may answer)",
	fault.ReasonOperationNotEnabled: "this operation is not enabled yet: servers of an older release that cannot finish it are still running; retry with the same request_id once the rollout completes",
	fault.ReasonHistoryBehind:       "this order's version history is being restored and no change of it is decided meanwhile; nothing was changed: retry with the same request_id",
}
