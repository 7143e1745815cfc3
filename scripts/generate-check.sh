#!/usr/bin/env bash
# Fails when the committed generated code under proto/ is not what
# scripts/generate.sh produces from the committed .proto files.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

scripts/generate.sh

status="$(git status --porcelain --untracked-files=all -- proto/)"
if [[ -n "$status" ]]; then
  {
    echo "generate-check: error: proto/ differs from the committed tree after scripts/generate.sh:"
    echo "$status"
    git --no-pager diff --stat -- proto/ || true
    echo "generate-check: run 'make generate' (scripts/generate.sh) and commit proto/, including the generated *.pb.go files."
  } >&2
  exit 1
fi
echo "generate-check: proto/ is up to date"
