#!/usr/bin/env bash
# Lints proto/ with buf (rules in buf.yaml). Installs the pinned buf into
# ./bin (gitignored) when missing or at another version; building it from
# source takes a minute or two the first time.
set -euo pipefail

BUF_VERSION=v1.75.0

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BIN="$ROOT/bin"

have=""
if [[ -x "$BIN/buf" ]]; then
  have="$("$BIN/buf" --version 2>/dev/null || true)"
fi
if [[ "$have" != "${BUF_VERSION#v}" ]]; then
  echo "buf-lint: installing github.com/bufbuild/buf/cmd/buf@$BUF_VERSION into bin/" >&2
  mkdir -p "$BIN"
  GOBIN="$BIN" GOFLAGS= go install "github.com/bufbuild/buf/cmd/buf@$BUF_VERSION"
fi

"$BIN/buf" lint
echo "buf-lint: ok" >&2
