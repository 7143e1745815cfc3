#!/usr/bin/env bash
# Checks the API module (proto/: the proto files, their Go code and the Go
# client) as a client team gets it:
#   - go.mod is tidy and vet passes (make test-unit runs its tests);
#   - it depends on none of the service's heavy dependencies (the Cassandra
#     driver, testcontainers, Docker's client);
#   - it builds with the oldest Go it claims, OLDEST_GO (its go.mod says
#     go 1.24.0). That toolchain is fetched through the Go module proxy
#     (golang.org/toolchain) on the first run, into the module cache.
set -euo pipefail

OLDEST_GO=go1.24.13

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT/proto"
log() { echo "api-check: $*" >&2; }

go mod tidy -diff || { log "error: proto/go.mod is not tidy: run (cd proto && go mod tidy)"; exit 1; }
go vet ./...

forbidden='github.com/apache/cassandra-gocql-driver|github.com/testcontainers|github.com/moby|github.com/docker'
if deps="$(go list -deps -test ./... | grep -E "$forbidden")"; then
  log "error: the API module depends on the service's dependencies:"
  echo "$deps" >&2
  exit 1
fi
log "no dependency on the driver, testcontainers or Docker"

GOTOOLCHAIN="$OLDEST_GO" go build ./...
GOTOOLCHAIN="$OLDEST_GO" go vet ./...
log "builds with $OLDEST_GO"
