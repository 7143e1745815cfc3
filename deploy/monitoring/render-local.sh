#!/bin/bash
# Renders docs/dashboard.png from a short run on the local cluster (about 4
# minutes): orderd serve (orderd-0, gRPC and a reconciler) and orderd
# reconcile (orderd-1) in a keyspace and topic of their own, under
# cmd/orderload with duplicates, conflicts and changes, a low
# ORDERD_RATE_ATTEMPTS so that some calls are limited, a trickle of invalid
# and unauthenticated calls, and orderd-0 killed with SIGKILL and restarted
# 100 s in (requests left PENDING for takeovers and the reconciler). The
# cluster is shared: the script holds /tmp/orderd-heavy.lock and stops the
# cluster and the broker at the end. The samples stay in $OUT/tsdb:
#   go run ./cmd/render-dashboard -data $OUT/tsdb -render-only -out ../../docs/dashboard.png
# draws them again. Usage: deploy/monitoring/render-local.sh [OUT_DIR]
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-/tmp/orderd-dashboard}
if [ -z "${RENDER_LOCKED:-}" ]; then
  exec env RENDER_LOCKED=1 flock /tmp/orderd-heavy.lock "$0" "$@"
fi
mkdir -p "$OUT" && B=$OUT/bin && mkdir -p "$B" && rm -f "$OUT/serve.pid"
cd "$ROOT"
export ORDERD_CLUSTER_DIR=${ORDERD_CLUSTER_DIR:-$ROOT/.cluster}
t0=$(date +%s)
log() { echo "[render $(( $(date +%s)-t0 ))s] $*"; }
for c in orderd cassandra-local kafka-local orderload orderctl; do go build -o "$B/$c" ./cmd/$c || exit 1; done
(cd deploy/monitoring && go build -o "$B/render-dashboard" ./cmd/render-dashboard) || exit 1
cleanup() {
  log "cleanup"
  [ -n "${serve:-}" ] && kill "$serve" 2>/dev/null
  [ -f "$OUT/serve.pid" ] && kill "$(cat "$OUT/serve.pid")" 2>/dev/null
  [ -n "${rec:-}" ] && kill "$rec" 2>/dev/null
  [ -n "${bad:-}" ] && kill "$bad" 2>/dev/null
  wait 2>/dev/null
  "$B/cassandra-local" down; "$B/kafka-local" down
}
trap cleanup EXIT
for p in 8080 9090 9091; do
  if (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null; then log "port $p in use"; exit 1; fi
done
log "cluster up"; "$B/cassandra-local" up || exit 1
export ORDERD_KEYSPACE=orderd_dashboard ORDERD_KAFKA_TOPIC=orderd.dashboard.events ORDERD_LOG_LEVEL=warn
"$B/orderd" migrate || exit 1
"$B/orderd" dev-setup -dir .dev > "$OUT/dev-setup.out" || exit 1
# The broker serves SASL_SSL with .dev's certificate; orderd logs in as orderd.
log "kafka up"; ORDERD_DEV_DIR=.dev "$B/kafka-local" up || exit 1
export ORDERD_KAFKA_USERNAME=orderd ORDERD_KAFKA_PASSWORD_FILE=.kafka/users/orderd.password ORDERD_KAFKA_TLS_CA_FILE=.kafka/tls/ca.pem
export ORDERD_TLS_CERT_FILE=.dev/server.pem ORDERD_TLS_KEY_FILE=.dev/server-key.pem ORDERD_TLS_CLIENT_CA_FILE=.dev/ca.pem
start_serve() {
  ORDERD_RATE_ATTEMPTS=120 ORDERD_METRICS_ADDR=127.0.0.1:9090 "$B/orderd" serve 2>>"$OUT/serve.log" & serve=$!
}
start_serve
ORDERD_METRICS_ADDR=127.0.0.1:9091 "$B/orderd" reconcile 2>"$OUT/reconcile.log" & rec=$!
sleep 4
CREDS="-ca-file .dev/ca.pem -cert-file .dev/client.pem -key-file .dev/client-key.pem"
( for _ in $(seq 200); do
    "$B/orderctl" --ca-file .dev/ca.pem --cert-file .dev/client.pem --key-file .dev/client-key.pem create --customer c-1 --total -1 --currency EUR >/dev/null 2>&1
    "$B/orderctl" --ca-file .dev/ca.pem --timeout 2s get 00000000-0000-0000-0000-000000000001 >/dev/null 2>&1
    sleep 1
  done ) & bad=$!
( sleep 100; log "kill -9 orderd-0"; kill -9 "$serve"; sleep 3; log "restart orderd-0"; start_serve; echo "$serve" > "$OUT/serve.pid" ) &
crash=$!
rm -rf "$OUT/tsdb"
"$B/render-dashboard" -dashboard deploy/monitoring/grafana/orderd.json \
  -target orderd-0=http://127.0.0.1:9090/metrics -target orderd-1=http://127.0.0.1:9091/metrics \
  -data "$OUT/tsdb" -html "$OUT/dashboard.html" -out "$OUT/dashboard.png" -tail 20s -- \
  "$B/orderload" $CREDS -intents 40000 -concurrency 16 -duplicates 0.3 -conflicts 0.05 -changes 0.1 \
     -max-duration 200s -retry-for 30s -acks "$OUT/acks.jsonl"
log "render-dashboard exit $?: $OUT/dashboard.png"
wait "$crash"
