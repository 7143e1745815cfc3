#!/usr/bin/env bash
# Regenerates the Go code for every .proto file under proto/.
#
#   scripts/generate.sh          (what `make generate` runs)
#
# Pinned tools are installed into ./bin (gitignored) when missing or at the
# wrong version. protoc itself comes from Debian's protobuf-compiler package;
# the well-known types (google/protobuf/timestamp.proto, ...) come from
# libprotobuf-dev under /usr/include. The generated files record the tool
# versions in their headers, so the versions below are pinned exactly:
# running this twice, or on another machine, gives no git diff.
set -euo pipefail

PROTOC_GEN_GO_VERSION=v1.36.12     # google.golang.org/protobuf
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2  # google.golang.org/grpc/cmd/protoc-gen-go-grpc
PROTOC_VERSION=3.21.12             # Debian bookworm's protobuf-compiler

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BIN="$ROOT/bin"
PROTO_DIR=proto

log() { echo "generate: $*" >&2; }
die() { echo "generate: error: $*" >&2; exit 1; }

# --- Go plugins, pinned, in ./bin -------------------------------------------
# install_tool NAME PACKAGE VERSION VERSION_STRING_EXPECTED
install_tool() {
  local name=$1 pkg=$2 version=$3 want=$4 have=""
  if [[ -x "$BIN/$name" ]]; then
    have="$("$BIN/$name" --version 2>/dev/null || true)"
  fi
  if [[ "$have" != "$want" ]]; then
    log "installing $pkg@$version into bin/"
    # GOFLAGS cleared so a caller's -mod=vendor etc. cannot interfere;
    # `go install pkg@version` ignores this module's go.mod.
    GOBIN="$BIN" GOFLAGS= go install "$pkg@$version"
    have="$("$BIN/$name" --version)"
    [[ "$have" == "$want" ]] || die "$name reports '$have', expected '$want'"
  fi
}
mkdir -p "$BIN"
install_tool protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go \
  "$PROTOC_GEN_GO_VERSION" "protoc-gen-go $PROTOC_GEN_GO_VERSION"
install_tool protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc \
  "$PROTOC_GEN_GO_GRPC_VERSION" "protoc-gen-go-grpc ${PROTOC_GEN_GO_GRPC_VERSION#v}"

# --- protoc and the well-known types -------------------------------------------
APT_HINT="apt-get install -y protobuf-compiler libprotobuf-dev"
apt_install() {
  if [[ "$(id -u)" -ne 0 ]]; then
    die "$1 not found; install it as root with: $APT_HINT"
  fi
  command -v apt-get >/dev/null 2>&1 || die "$1 not found and apt-get is unavailable; install protoc $PROTOC_VERSION and its include files"
  log "$1 not found; running: $APT_HINT"
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y protobuf-compiler libprotobuf-dev >&2; then
    DEBIAN_FRONTEND=noninteractive apt-get update >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y protobuf-compiler libprotobuf-dev >&2
  fi
}

PROTOC="${PROTOC:-$(command -v protoc || true)}"
if [[ -z "$PROTOC" ]]; then
  apt_install protoc
  PROTOC="$(command -v protoc)" || die "protoc still not found after installing protobuf-compiler"
fi
have_protoc="$("$PROTOC" --version)"
if [[ "$have_protoc" != "libprotoc $PROTOC_VERSION" ]]; then
  msg="$PROTOC is '$have_protoc', expected 'libprotoc $PROTOC_VERSION' (its version is written into the generated files)"
  if [[ "${ALLOW_PROTOC_MISMATCH:-}" == 1 ]]; then
    log "warning: $msg; continuing because ALLOW_PROTOC_MISMATCH=1"
  else
    die "$msg; install it with '$APT_HINT' (Debian bookworm) or set ALLOW_PROTOC_MISMATCH=1"
  fi
fi

find_wkt() {
  local d
  for d in "$(dirname "$PROTOC")/../include" /usr/include /usr/local/include; do
    if [[ -f "$d/google/protobuf/timestamp.proto" ]]; then
      (cd "$d" && pwd)
      return 0
    fi
  done
  return 1
}
WKT_INCLUDE="$(find_wkt || true)"
if [[ -z "$WKT_INCLUDE" ]]; then
  apt_install google/protobuf/timestamp.proto
  WKT_INCLUDE="$(find_wkt)" || die "google/protobuf/timestamp.proto still not found; install libprotobuf-dev"
fi

# --- generate ----------------------------------------------------------------
mapfile -t PROTOS < <(cd "$PROTO_DIR" && find . -name '*.proto' -not -path './google/*' | sed 's|^\./||' | LC_ALL=C sort)
[[ ${#PROTOS[@]} -gt 0 ]] || die "no .proto files under $PROTO_DIR/"

# Generate into a scratch tree, then move into place only what changed and
# delete generated files whose .proto is gone; an unchanged file is left
# untouched (not even its mtime), and a failed run changes nothing.
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT

log "protoc ($have_protoc) on ${#PROTOS[@]} file(s): ${PROTOS[*]}"
"$PROTOC" \
  --plugin=protoc-gen-go="$BIN/protoc-gen-go" \
  --plugin=protoc-gen-go-grpc="$BIN/protoc-gen-go-grpc" \
  -I "$PROTO_DIR" -I "$WKT_INCLUDE" \
  --go_out="$OUT" --go_opt=paths=source_relative \
  --go-grpc_out="$OUT" --go-grpc_opt=paths=source_relative \
  "${PROTOS[@]}"

changed=0
while IFS= read -r f; do
  f="${f#./}"
  if ! cmp -s "$OUT/$f" "$PROTO_DIR/$f"; then
    mkdir -p "$(dirname "$PROTO_DIR/$f")"
    cp "$OUT/$f" "$PROTO_DIR/$f"
    log "wrote $PROTO_DIR/$f"
    changed=1
  fi
done < <(cd "$OUT" && find . -type f -name '*.pb.go' | LC_ALL=C sort)

while IFS= read -r f; do
  f="${f#./}"
  if [[ ! -f "$OUT/$f" ]]; then
    rm -f "$PROTO_DIR/$f"
    log "removed stale $PROTO_DIR/$f"
    changed=1
  fi
done < <(cd "$PROTO_DIR" && find . -type f -name '*.pb.go' | LC_ALL=C sort)

[[ $changed -eq 1 ]] || log "generated code is up to date"
