#!/bin/bash
# nodetool ARGS...: Cassandra's NodeTool against this node's JMX port
# (JMX_PORT, default 7199), as the official image's nodetool.
set -euo pipefail
conf=${CASSANDRA_CONF:-/etc/cassandra}
mapfile -t opts < <(grep -vE '^[[:space:]]*(#|$)' "$conf/jvm17-clients.options")
exec java -Xmx128m -XX:TieredStopAtLevel=1 "${opts[@]}" -cp "${CASSANDRA_HOME:-/opt/cassandra}/lib/*" \
	org.apache.cassandra.tools.NodeTool -h 127.0.0.1 -p "${JMX_PORT:-7199}" "$@"
