#!/usr/bin/env bash
# Starts a Docker engine if none answers: Debian's dockerd (apt-get install
# docker.io), with no bridge network and no iptables rules, since every
# container orderd's tests and compose override start uses the host's
# network on loopback addresses. Its log goes to bin/dockerd.log.
set -euo pipefail
cd "$(dirname "$0")/.."

if docker info >/dev/null 2>&1; then
	echo "dockerd-up: a Docker engine answers"
	exit 0
fi
command -v dockerd >/dev/null || { echo "dockerd-up: no dockerd: apt-get install -y docker.io" >&2; exit 1; }
mkdir -p bin
echo "dockerd-up: starting dockerd (log: bin/dockerd.log)"
nohup dockerd --bridge=none --iptables=false >bin/dockerd.log 2>&1 &
for _ in $(seq 60); do
	if docker info >/dev/null 2>&1; then
		docker version --format 'dockerd-up: Docker engine {{.Server.Version}} (API {{.Server.APIVersion}})'
		exit 0
	fi
	sleep 1
done
echo "dockerd-up: dockerd did not answer within 60 s; the end of its log:" >&2
tail -20 bin/dockerd.log >&2
exit 1
