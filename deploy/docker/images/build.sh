#!/usr/bin/env bash
# Builds the container images orderd's compose file and the e2e docker
# backend use, here, with no image registry: every image starts from a
# Debian root filesystem made by debootstrap from Debian's packages, and the
# Cassandra and Kafka jars are the ones the local launcher fetches from
# Maven Central.
#
#   deploy/docker/images/build.sh [all|base|jre|golang|static|cassandra|kafka|orderd]...
#
# Needs a Docker engine, and debootstrap for the base image. NO_CACHE=1
# rebuilds every layer (docker build --no-cache), e.g. for security fixes. Each image is
# built by `docker build` (its layers cached: a second run with nothing
# changed takes seconds); the base image is made once and kept. Tags (each
# overridable by its variable):
#
#   BASE_IMAGE      local/debian:bookworm     debootstrap --variant=minbase
#   JRE_IMAGE       local/jre:17              + openjdk-17-jre-headless
#   GOLANG_IMAGE    local/golang:<go.mod>     + the Go toolchain from the module proxy
#   STATIC_IMAGE    local/static:nonroot      + ca-certificates, tzdata, user 65532 (distroless's stand-in)
#   CASSANDRA_IMAGE orderd/cassandra:<ver>    Cassandra from Maven Central
#   KAFKA_IMAGE     orderd/kafka:<ver>        Kafka from Maven Central (the version
#                                             `kafka-local runtime` resolves)
#   ORDERD_IMAGE    atlasmart/orderd:dev      the repo-root Dockerfile
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
bin=$root/bin
work=$root/.images # build contexts assembled here (git-ignored)
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
go_version=$(awk '$1 == "go" { print $2 }' "$root/go.mod")

: "${BASE_IMAGE:=local/debian:bookworm}"
: "${JRE_IMAGE:=local/jre:17}"
: "${GOLANG_IMAGE:=local/golang:$go_version}"
: "${STATIC_IMAGE:=local/static:nonroot}"
: "${CASSANDRA_IMAGE:=orderd/cassandra:5.0.9}"
: "${ORDERD_IMAGE:=atlasmart/orderd:dev}"

log() { printf 'images: %s\n' "$*" >&2; }

# Temporary files and folders, removed however the script ends.
scratch=()
trap 'rm -rf "${scratch[@]}"' EXIT

# timed NAME CMD... runs CMD and says how long building NAME took.
timed() {
	local name=$1 start=$SECONDS
	shift
	"$@"
	log "$name ready in $((SECONDS - start)) s"
}

# build TAG DOCKERFILE CONTEXT [ARGS...]: the legacy builder (no BuildKit
# plugin is installed here), host network for apt and the Go module proxy.
# Its output (and the CLI's notice that the legacy builder is deprecated)
# is shown only when the build fails.
build() {
	local tag=$1 file=$2 ctx=$3 out
	shift 3
	out=$(mktemp)
	if ! docker build --network host ${NO_CACHE:+--no-cache} -t "$tag" -f "$file" "$@" "$ctx" >"$out" 2>&1; then
		tail -40 "$out" >&2
		rm -f "$out"
		return 1
	fi
	rm -f "$out"
}

has_image() { docker image inspect "$1" >/dev/null 2>&1; }

image_base() {
	if has_image "$BASE_IMAGE"; then
		log "$BASE_IMAGE: present, kept"
		return
	fi
	command -v debootstrap >/dev/null || { log "debootstrap is missing: apt-get install -y debootstrap"; return 1; }
	local rootfs
	rootfs=$(mktemp -d)
	scratch+=("$rootfs" "$rootfs.log")
	log "$BASE_IMAGE: debootstrap bookworm from $mirror"
	debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$rootfs.log" 2>&1 ||
		{ tail -20 "$rootfs.log" >&2; return 1; }
	tar -C "$rootfs" -c . | docker import -c 'CMD ["/bin/bash"]' - "$BASE_IMAGE" >/dev/null
}

image_jre() {
	build "$JRE_IMAGE" "$here/jre.Dockerfile" "$here" --build-arg BASE_IMAGE="$BASE_IMAGE"
}

# context NAME FILES...: a fresh build context in .images/NAME with FILES
# and the extra CA certificates (EXTRA_CA_DIR, default this machine's
# /usr/local/share/ca-certificates: a TLS-intercepting egress proxy signs
# with one) that a build step fetching over HTTPS must trust.
context() {
	local dir=$work/$1
	shift
	rm -rf "$dir" && mkdir -p "$dir/ca"
	cp "$@" "$dir/"
	local ca=${EXTRA_CA_DIR:-/usr/local/share/ca-certificates}
	if compgen -G "$ca/*.crt" >/dev/null; then cp "$ca"/*.crt "$dir/ca/"; fi
	echo "$dir"
}

image_golang() {
	local ctx
	ctx=$(context golang "$here/golang.Dockerfile")
	build "$GOLANG_IMAGE" "$ctx/golang.Dockerfile" "$ctx" \
		--build-arg BASE_IMAGE="$BASE_IMAGE" --build-arg GO_VERSION="$go_version" \
		--build-arg GOPROXY="$(go env GOPROXY | cut -d, -f1)"
}

# The launcher's jars and configuration (cassandra-local image-context),
# the entrypoint and scripts of this folder.
image_cassandra() {
	local ctx version
	ctx=$(context cassandra "$here/cassandra.Dockerfile" "$here"/cassandra-*.sh)
	(cd "$root" && go build -o "$bin/cassandra-local" ./cmd/cassandra-local)
	# The launcher's jars (CASSANDRA_VERSION pins one) and node configuration.
	version=$("$bin/cassandra-local" image-context "$ctx")
	if [ "${CASSANDRA_IMAGE##*:}" != "$version" ]; then
		log "note: $CASSANDRA_IMAGE holds Cassandra $version"
	fi
	build "$CASSANDRA_IMAGE" "$ctx/cassandra.Dockerfile" "$ctx" \
		--build-arg JRE_IMAGE="$JRE_IMAGE" --build-arg CASSANDRA_VERSION="$version"
}

image_static() {
	build "$STATIC_IMAGE" "$here/static.Dockerfile" "$here" --build-arg BASE_IMAGE="$BASE_IMAGE"
}

# The repo-root Dockerfile with the builder and runtime made here, stamped
# with the version and revision as `make build` stamps bin/orderd, and
# labelled with them, the build time (SOURCE_DATE_EPOCH, if set, for a
# reproducible one), the source (the module's repository) and the licence
# (ORDERD_LICENSES, an SPDX expression; the Dockerfile's default says none
# is stated).
image_orderd() {
	local version revision created source
	version=$(git -C "$root" describe --tags --always --dirty 2>/dev/null || echo dev)
	revision=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)
	created=$(date -u ${SOURCE_DATE_EPOCH:+-d "@$SOURCE_DATE_EPOCH"} +%Y-%m-%dT%H:%M:%SZ)
	source=https://$(awk '$1 == "module" { print $2 }' "$root/go.mod")
	build "$ORDERD_IMAGE" "$root/Dockerfile" "$root" \
		--build-arg BUILD_IMAGE="$GOLANG_IMAGE" --build-arg RUNTIME_IMAGE="$STATIC_IMAGE" \
		--build-arg VERSION="$version" --build-arg REVISION="$revision" \
		--build-arg CREATED="$created" --build-arg SOURCE="$source" \
		${ORDERD_LICENSES:+--build-arg LICENSES="$ORDERD_LICENSES"}
	log "$ORDERD_IMAGE: orderd $version ($revision), built $created"
}

# kafka_runtime prints the folder of the Kafka jars the local launcher runs
# (fetching them from Maven Central the first time; KAFKA_VERSION pins one);
# its name ends in the version.
kafka_runtime() {
	(cd "$root" && go build -o "$bin/kafka-local" ./cmd/kafka-local)
	"$bin/kafka-local" runtime
}

# The launcher's jars, the tools' jar (kafka/tools-pom.xml), the entrypoint
# and configuration (kafka/).
image_kafka() {
	local lib version ctx
	lib=$(kafka_runtime)
	version=${lib##*/kafka-}
	: "${KAFKA_IMAGE:=orderd/kafka:$version}"
	ctx=$(context kafka "$here/kafka.Dockerfile")
	cp -r "$here/kafka" "$ctx/kafka"
	cp -r "$lib" "$ctx/libs"
	mvn -q -B -f "$here/kafka/tools-pom.xml" -Dkafka.version="$version" \
		dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$ctx/libs" >"$ctx/mvn.log" 2>&1 ||
		{ tail -30 "$ctx/mvn.log" >&2; return 1; }
	rm -f "$ctx/mvn.log"
	build "$KAFKA_IMAGE" "$ctx/kafka.Dockerfile" "$ctx" --build-arg JRE_IMAGE="$JRE_IMAGE"
	log "$KAFKA_IMAGE: Kafka $version"
}

images=()
for target in "${@:-all}"; do
	case $target in
	all) images+=(base jre golang static cassandra kafka orderd) ;;
	base | jre | golang | static | cassandra | kafka | orderd) images+=("$target") ;;
	*) log "unknown image $target (all, base, jre, golang, static, cassandra, kafka, orderd)"; exit 2 ;;
	esac
done
for image in "${images[@]}"; do
	timed "$image" "image_$image"
done
