#!/usr/bin/env bash
# Which statements no test runs, over everything `make test` runs: the unit
# tests (both build tag sets) and the e2e tests, including the orderd
# processes they start (built with -cover; GOCOVERDIR collects what each one
# ran when it exits; a process the test SIGKILLs leaves nothing, so a
# statement that only such a process ran shows as unreached).
#
# Writes bin/cover/all.out (one profile, a statement counted when any test
# ran it), bin/cover/cover.html, and prints each package's share and every
# unreached block of the packages that decide a request's outcome.
# Needs what make test-e2e needs (it starts the cluster when none answers).
# Usage: scripts/cover.sh [go test -run pattern for e2e]
set -euo pipefail
cd "$(dirname "$0")/.."
out=bin/cover
rm -rf "$out" && mkdir -p "$out/binary"
run=${1:-.}

# The service's packages by import path: the e2e suite is a module of its
# own (e2e/go.mod), where ./... would name only its own.
svc=$(go list ./... | paste -sd, -)
echo "== unit tests"
go test -count=1 -coverpkg="$svc" -coverprofile="$out/unit.out" ./... >"$out/unit.log" 2>&1 ||
	{ tail -50 "$out/unit.log"; exit 1; }
go test -count=1 -tags failpoints -coverpkg="$svc" -coverprofile="$out/unit-failpoints.out" \
	./internal/platform/failpoint/ ./internal/app/workflow/ ./cmd/orderd/ >>"$out/unit.log" 2>&1 ||
	{ tail -50 "$out/unit.log"; exit 1; }

echo "== e2e tests (about 25 minutes; log in $out/e2e.log)"
go build -tags failpoints -cover -coverpkg="$svc" -o "$out/orderd" ./cmd/orderd
# Not GOCOVERDIR: go test -cover sets that for the test process itself.
ORDERD_E2E_GOCOVERDIR="$(pwd)/$out/binary" ORDERD_E2E_BINARY="$(pwd)/$out/orderd" \
	go -C e2e test -count=1 -p 1 -parallel 4 -timeout 45m -run "$run" -coverpkg="$svc" -coverprofile="$(pwd)/$out/e2e.out" -v . \
	>"$out/e2e.log" 2>&1 || { scripts/e2e-failures.sh "$out/e2e.log"; exit 1; }
go tool covdata textfmt -i "$out/binary" -o "$out/binary.out"

# One profile: the same block in several profiles is reached when any
# profile counts it (mode set: counts are 0 or 1).
{
	echo "mode: set"
	awk 'FNR == 1 { next } { key = $1 " " $2; if (!(key in hit) || $3 > hit[key]) hit[key] = $3 }
		END { for (k in hit) print k, (hit[k] > 0 ? 1 : 0) }' \
		"$out"/unit.out "$out"/unit-failpoints.out "$out"/e2e.out "$out"/binary.out | sort
} >"$out/all.out"
go tool cover -html="$out/all.out" -o "$out/cover.html"

module=$(go list -m)
echo "== statements reached, by package"
awk -v m="$module/" 'NR > 1 { split($1, f, ":"); p = f[1]; sub(/\/[^\/]*$/, "", p); sub(m, "", p)
	total[p] += $2; if ($3 > 0) hit[p] += $2 }
	END { for (p in total) printf "%5.1f%%  %5d/%-5d  %s\n", 100 * hit[p] / total[p], hit[p], total[p], p }' \
	"$out/all.out" | sort -k4

echo "== unreached blocks in ledger, reconciler, projection, internal/app/workflow (file:lines statements)"
awk -v m="$module/" 'NR > 1 && $3 == 0 && $1 ~ ("^" m "(ledger|reconciler|projection|internal/app/workflow)/") && $1 !~ /test/ {
	sub(m, "", $1); split($1, f, /[:,]/); split(f[2], a, "."); split(f[3], b, ".")
	printf "%s:%s-%s %s\n", f[1], a[1], b[1], $2 }' "$out/all.out" | sort -t: -k1,1 -k2n
echo "HTML: $out/cover.html"
