#!/usr/bin/env bash
# Builds Docker Compose (the `docker compose` CLI plugin) from its Go module
# and installs it where the docker CLI looks for plugins, for machines whose
# package manager has no compose v2 and that reach the Go module proxy but
# no GitHub release downloads.
#
#   deploy/docker/images/compose-plugin.sh     # then: docker compose version
#
# `go install github.com/docker/compose/v5/cmd@VERSION` is refused (its
# go.mod has replace and exclude directives, which go install does not
# accept), so a throwaway module requires compose and builds its command
# from there; its go.mod's directives are copied in so that the build uses
# the dependency versions compose's own release was built with.
# Settings: COMPOSE_VERSION (v5.6.0), DOCKER_CONFIG (~/.docker).
set -euo pipefail

version=${COMPOSE_VERSION:-v5.6.0}
dest=${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins/docker-compose
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

start=$SECONDS
cd "$work"
go mod init local/compose-plugin >/dev/null 2>&1
# Getting the command's package (not only the module) records every module
# its build needs.
go get "github.com/docker/compose/v5/cmd@$version" >/dev/null 2>&1 ||
	{ go get "github.com/docker/compose/v5/cmd@$version"; exit 1; }
# compose's own replace directives (a module moved or a fork it needs): the
# dependent build only honours the main module's.
modfile=$(go list -m -f '{{.GoMod}}' "github.com/docker/compose/v5")
awk '/^replace[[:space:]]*\($/ { inblock = 1; print; next }
	inblock { print; if ($0 ~ /^\)/) inblock = 0; next }
	/^replace[[:space:]]/ { print }' "$modfile" >>go.mod
mkdir -p "$(dirname "$dest")"
go build -trimpath -ldflags "-s -w -X github.com/docker/compose/v5/internal.Version=$version" \
	-o "$dest" github.com/docker/compose/v5/cmd
echo "compose-plugin: $dest ($version) built in $((SECONDS - start)) s" >&2
docker compose version
