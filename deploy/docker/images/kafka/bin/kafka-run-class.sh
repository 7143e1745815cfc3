#!/usr/bin/env bash
# kafka-run-class.sh CLASS [ARGS...]: runs one of Kafka's command-line tools
# from the image's jars, as the script of the same name in Kafka's
# distribution does: a small heap and warnings only, on stderr, so that
# its output is the tool's.
set -euo pipefail
# shellcheck disable=SC2086 # KAFKA_TOOLS_HEAP_OPTS is a list of options
exec java ${KAFKA_TOOLS_HEAP_OPTS:--Xmx256M} -XX:TieredStopAtLevel=1 -Djava.awt.headless=true \
	-Dlog4j2.configurationFile=/opt/kafka/config/tools-log4j2.properties \
	-cp '/opt/kafka/libs/*' "$@"
