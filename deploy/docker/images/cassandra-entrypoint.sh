#!/bin/bash
# The Cassandra image's entrypoint: sets each node's own settings from the
# environment, with the official image's variables and defaults, then runs
# the command (`cassandra -f`) as the cassandra user.
#
#   CASSANDRA_LISTEN_ADDRESS        default: the container's address ("auto")
#   CASSANDRA_BROADCAST_ADDRESS     default: the listen address
#   CASSANDRA_RPC_ADDRESS           default: 0.0.0.0
#   CASSANDRA_BROADCAST_RPC_ADDRESS default: the broadcast address
#   CASSANDRA_SEEDS                 default: the broadcast address
#   CASSANDRA_CLUSTER_NAME, CASSANDRA_NUM_TOKENS, CASSANDRA_ENDPOINT_SNITCH,
#   CASSANDRA_DC, CASSANDRA_RACK    set when given
#   MAX_HEAP_SIZE (e.g. 1G)         the Java heap; HEAP_NEWSIZE is accepted
#                                   and unused (G1 sizes the young generation)
#   JMX_PORT                        default 7199; several nodes sharing a host
#                                   network need one each
set -euo pipefail

if [ "${1:0:1}" = '-' ]; then
	set -- cassandra -f "$@"
fi

conf=${CASSANDRA_CONF:-/etc/cassandra}

if [ "$1" = cassandra ] && [ "$(id -u)" = 0 ]; then
	chown -R cassandra:cassandra /var/lib/cassandra "$conf"
	exec setpriv --reuid=cassandra --regid=cassandra --init-groups "$BASH_SOURCE" "$@"
fi

# set_yaml KEY VALUE replaces KEY's line in cassandra.yaml, or adds one.
set_yaml() {
	local file=$conf/cassandra.yaml
	if grep -qE "^#? *$1:" "$file"; then
		sed -ri "s|^#? *($1:).*|\\1 $2|" "$file"
	else
		printf '%s: %s\n' "$1" "$2" >>"$file"
	fi
}

# address VALUE turns "auto" into the container's first address.
address() {
	if [ "$1" = auto ]; then hostname -i | awk '{print $1}'; else echo "$1"; fi
}

if [ "$1" = cassandra ]; then
	CASSANDRA_LISTEN_ADDRESS=$(address "${CASSANDRA_LISTEN_ADDRESS:-auto}")
	CASSANDRA_BROADCAST_ADDRESS=$(address "${CASSANDRA_BROADCAST_ADDRESS:-$CASSANDRA_LISTEN_ADDRESS}")
	: "${CASSANDRA_RPC_ADDRESS:=0.0.0.0}"
	: "${CASSANDRA_BROADCAST_RPC_ADDRESS:=$CASSANDRA_BROADCAST_ADDRESS}"
	: "${CASSANDRA_SEEDS:=$CASSANDRA_BROADCAST_ADDRESS}"

	sed -ri "s|(- seeds:).*|\\1 \"$CASSANDRA_SEEDS\"|" "$conf/cassandra.yaml"
	set_yaml listen_address "$CASSANDRA_LISTEN_ADDRESS"
	set_yaml broadcast_address "$CASSANDRA_BROADCAST_ADDRESS"
	set_yaml rpc_address "$CASSANDRA_RPC_ADDRESS"
	set_yaml broadcast_rpc_address "$CASSANDRA_BROADCAST_RPC_ADDRESS"
	for key in cluster_name num_tokens endpoint_snitch; do
		var=CASSANDRA_${key^^}
		if [ -n "${!var:-}" ]; then set_yaml "$key" "${!var}"; fi
	done
	for key in dc rack; do
		var=CASSANDRA_${key^^}
		if [ -n "${!var:-}" ]; then sed -ri "s|^($key=).*|\\1${!var}|" "$conf/cassandra-rackdc.properties"; fi
	done
	if [ -n "${MAX_HEAP_SIZE:-}" ]; then
		sed -ri "s|^-Xm([sx]).*|-Xm\\1$MAX_HEAP_SIZE|" "$conf/jvm17.options"
	fi
	sed -ri "s|^(-Dcassandra.jmx.local.port=).*|\\1${JMX_PORT:-7199}|" "$conf/jvm17.options"
	mkdir -p /var/lib/cassandra/tmp /var/lib/cassandra/logs
fi

exec "$@"
