#!/usr/bin/env bash
# The compose file run for real: compose.yaml with the host-network
# override (compose.host.yaml) and the locally built images, then one
# order created, retried and read back over gRPC the way a client does
# (bin/orderctl, the Go client), then everything removed again.
#
#   make compose-smoke          # builds the images and bin/orderctl first
#   deploy/docker/smoke.sh      # with the images already built
#
# Needs a Docker engine with the compose plugin (deploy/docker/images/
# compose-plugin.sh builds one), the images (deploy/docker/images/build.sh)
# and bin/orderctl (make build). Uses 127.0.0.21-25 (compose.host.yaml).
# Settings: CASSANDRA_IMAGE (orderd/cassandra:5.0.9), KAFKA_IMAGE (the
# newest orderd/kafka), ORDERD_IMAGE (atlasmart/orderd:dev), KEEP=1 to
# leave the services running (and their volumes) at the end.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
orderctl=$root/bin/orderctl
project=orderd-smoke
addr=127.0.0.25:8080

: "${CASSANDRA_IMAGE:=orderd/cassandra:5.0.9}"
: "${KAFKA_IMAGE:=orderd/kafka:$(docker image ls orderd/kafka --format '{{.Tag}}' | sort -V | tail -1)}"
: "${ORDERD_IMAGE:=atlasmart/orderd:dev}"
export CASSANDRA_IMAGE KAFKA_IMAGE ORDERD_IMAGE

log() { printf 'smoke: %s\n' "$*" >&2; }
fail() { log "FAIL: $*"; exit 1; }

compose() {
	docker compose -p "$project" -f "$here/compose.yaml" -f "$here/compose.host.yaml" "$@"
}

timings=()
# step NAME CMD...: runs CMD and records how long it took.
step() {
	local name=$1 start=$SECONDS
	shift
	log "$name"
	"$@"
	timings+=("$(printf '%-28s %4d s' "$name" $((SECONDS - start)))")
}

docker compose version >/dev/null 2>&1 || fail "no docker compose: run deploy/docker/images/compose-plugin.sh"
[ -x "$orderctl" ] || fail "no $orderctl: run make build"
for image in "$CASSANDRA_IMAGE" "$KAFKA_IMAGE" "$ORDERD_IMAGE"; do
	docker image inspect "$image" >/dev/null 2>&1 || fail "no image $image: run deploy/docker/images/build.sh"
done
log "images: $CASSANDRA_IMAGE $KAFKA_IMAGE $ORDERD_IMAGE"

work=$(mktemp -d)
finish() {
	local rc=$?
	if [ $rc -ne 0 ]; then
		compose ps -a >&2 || true
		for s in cassandra-1 cassandra-2 cassandra-3 kafka orderd-migrate orderd-dev-setup orderd; do
			printf '\n--- %s (last lines)\n' "$s" >&2
			compose logs --no-color --tail 15 "$s" >&2 || true
		done
	fi
	if [ "${KEEP:-}" = 1 ]; then
		log "KEEP=1: left running; stop with: docker compose -p $project -f $here/compose.yaml -f $here/compose.host.yaml down -v"
	else
		local start=$SECONDS
		compose down -v --remove-orphans >/dev/null 2>&1 || true
		timings+=("$(printf '%-28s %4d s' "down -v" $((SECONDS - start)))")
	fi
	rm -rf "$work"
	printf '\nsmoke timings:\n' >&2
	printf '  %s\n' "${timings[@]}" >&2
	[ $rc -eq 0 ] && log PASS
	exit $rc
}
trap finish EXIT

# A leftover of an interrupted run would be reused, not started fresh.
compose down -v --remove-orphans >/dev/null 2>&1 || true

# `up` returns once every service is started, which compose does only
# after the conditions it depends on: the Cassandra nodes one after
# another, each healthy; the migration and the credentials done; Kafka
# healthy.
step "up (cassandra, kafka, migrate)" compose up -d --no-build --pull never --quiet-pull

# Every long-running service healthy (orderd has no healthcheck: its port
# answering is checked next), the one-shot services exited 0.
check_states() {
	local s state
	for s in cassandra-1 cassandra-2 cassandra-3 kafka; do
		state=$(docker inspect -f '{{.State.Health.Status}}' "$(compose ps -q "$s")")
		[ "$state" = healthy ] || fail "$s is $state"
	done
	for s in orderd-migrate orderd-dev-setup; do
		state=$(docker inspect -f '{{.State.Status}} {{.State.ExitCode}}' "$(compose ps -a -q "$s")")
		[ "$state" = "exited 0" ] || fail "$s: $state"
	done
}
check_states

wait_orderd() {
	local deadline=$((SECONDS + 60))
	until (exec 3<>"/dev/tcp/${addr%:*}/${addr#*:}") 2>/dev/null; do
		[ $SECONDS -lt $deadline ] || fail "orderd does not answer on $addr"
		sleep 1
	done
}
step "orderd answering" wait_orderd

# The development credentials orderd-dev-setup wrote into the orderd-dev
# volume: the CA and the client certificate (every permission).
compose cp orderd:/home/nonroot/dev "$work/dev" >/dev/null
creds=(--addr "$addr" --ca-file "$work/dev/ca.pem" --cert-file "$work/dev/client.pem" --key-file "$work/dev/client-key.pem" --json)

request_id=$(cat /proc/sys/kernel/random/uuid)
# field NAME JSON: the first string value of NAME in a protojson document.
field() { grep -o "\"$1\": *\"[^\"]*\"" <<<"$2" | head -1 | sed 's/.*"\([^"]*\)"$/\1/'; }

create() {
	"$orderctl" "${creds[@]}" create --request-id "$request_id" \
		--customer smoke-customer --total 77.70 --currency EUR --line SKU-1:2:38.85
}

# capture FILE CMD...: CMD's output into FILE (a step's result).
capture() {
	local file=$1
	shift
	"$@" >"$file"
}

step "create order" capture "$work/create.json" create
first=$(<"$work/create.json")
order_id=$(field order_id "$first")
[ -n "$order_id" ] || fail "create answered no order id: $first"
grep -q '"replayed": *false' <<<"$first" || fail "the first create was answered as a replay: $first"
log "created order $order_id (request $request_id)"

step "retry (same request_id)" capture "$work/retry.json" create
again=$(<"$work/retry.json")
[ "$(field order_id "$again")" = "$order_id" ] || fail "the retry answered another order: $again"
grep -q '"replayed": *true' <<<"$again" || fail "the retry was not answered as a replay: $again"
log "retry answered order $order_id, replayed"

step "get order" capture "$work/get.json" "$orderctl" "${creds[@]}" get "$order_id"
got=$(<"$work/get.json")
[ "$(field order_id "$got")" = "$order_id" ] || fail "get answered another order: $got"
[ "$(field customer_id "$got")" = smoke-customer ] || fail "get answered another customer: $got"
log "read back: $got"

# The order's event reached Kafka (orderd's outbox, docs/outbox.md): read
# with the console consumer in the broker's image. Records are keyed by
# order id; the value is protobuf.
event() {
	local out
	out=$(compose exec -T kafka kafka-console-consumer.sh --bootstrap-server 127.0.0.24:9092 \
		--topic atlasmart.orders.v1.events --from-beginning --max-messages 1 --timeout-ms 60000 \
		--property print.key=true 2>&1) || fail "the console consumer failed: $out"
	grep -aq "^$order_id" <<<"$out" || fail "no event for order $order_id on atlasmart.orders.v1.events: $out"
}
step "event on kafka" event
log "event for order $order_id on atlasmart.orders.v1.events"
