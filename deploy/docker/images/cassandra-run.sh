#!/bin/bash
# cassandra [-f]: runs the node in the foreground (always: a container's
# main process) with the JVM options in $CASSANDRA_CONF/jvm17.options, one
# a line, then JVM_EXTRA_OPTS (as the official image's cassandra-env.sh
# adds them: later options win). The conf folder comes first on the class path: the snitch reads
# cassandra-rackdc.properties from there.
set -euo pipefail
conf=${CASSANDRA_CONF:-/etc/cassandra}
mapfile -t opts < <(grep -vE '^[[:space:]]*(#|$)' "$conf/jvm17.options")
read -ra extra <<<"${JVM_EXTRA_OPTS:-}"
exec java "${opts[@]}" "${extra[@]}" -cp "$conf:${CASSANDRA_HOME:-/opt/cassandra}/lib/*" org.apache.cassandra.service.CassandraDaemon
