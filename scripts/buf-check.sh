#!/usr/bin/env bash
# Checks proto/ with buf (rules in buf.yaml):
#   lint      the STANDARD rules (the vendored google/ files excepted)
#   breaking  FILE-level wire and source compatibility against the last
#             released API, proto/release-v1.binpb (a buf image committed
#             with the release; rebuild it when a release ships, see
#             proto/README.md)
# Installs the pinned buf into ./bin (gitignored) when missing or at another
# version; building it from source takes a minute or two the first time.
set -euo pipefail

BUF_VERSION=v1.75.0
RELEASE_IMAGE=proto/release-v1.binpb

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BIN="$ROOT/bin"

have=""
if [[ -x "$BIN/buf" ]]; then
  have="$("$BIN/buf" --version 2>/dev/null || true)"
fi
if [[ "$have" != "${BUF_VERSION#v}" ]]; then
  echo "buf-check: installing github.com/bufbuild/buf/cmd/buf@$BUF_VERSION into bin/" >&2
  mkdir -p "$BIN"
  GOBIN="$BIN" GOFLAGS= go install "github.com/bufbuild/buf/cmd/buf@$BUF_VERSION"
fi

"$BIN/buf" lint
echo "buf-check: lint ok" >&2
"$BIN/buf" breaking --against "$RELEASE_IMAGE"
echo "buf-check: no breaking change against $RELEASE_IMAGE" >&2
