# orderd container image.
#
#   docker build --build-arg VERSION=$(git describe --tags --always) \
#                --build-arg REVISION=$(git rev-parse HEAD) \
#                --build-arg CREATED=$(date -u +%Y-%m-%dT%H:%M:%SZ) -t atlasmart/orderd:dev .
#   docker run --rm atlasmart/orderd:dev migrate   # or: serve (the default)
#
# deploy/docker/images/build.sh (make images) passes every build argument.
#
# Used by deploy/docker/compose.yaml and deploy/kubernetes. The build context
# is the repo root; .dockerignore keeps .git, bin/ and the local state
# folders (.cluster/, .kafka/, .dev/, .images/) out of it.
#
# Both base images are build arguments whose defaults are pinned by digest,
# so a build today and a rebuild next month use the same bytes; the tag
# beside each digest says what it was. To move to newer images (security
# fixes), update tag and digest together:
#   crane digest golang:1.26.8-bookworm
#   crane digest gcr.io/distroless/static-debian12:nonroot
# (or let Renovate/Dependabot propose it). The digests were taken from
# published references; this machine has no registry access to re-resolve
# them, which is why deploy/docker's test checks that they are pinned, not
# what they point to.
#
# Where no registry is reachable, deploy/docker/images/build.sh builds both
# from Debian's packages and the Go module proxy and passes them in:
#   --build-arg BUILD_IMAGE=local/golang:1.26.8 --build-arg RUNTIME_IMAGE=local/static:nonroot
#
# The file uses only what Docker's legacy builder understands as well as
# BuildKit (no `# syntax=` line, no RUN --mount), so that it builds on an
# engine without BuildKit too; the price is a Go build cache that does not
# outlive a changed source layer.

# go.mod pins go 1.26.8 and the golang images set GOTOOLCHAIN=local, so the
# builder's Go must be at least that patch.
ARG BUILD_IMAGE=golang:1.26.8-bookworm@sha256:dc9ad6c05acc7a88e5b71bde60a5fe3bd4b9f0db209011711b464107438a8107
# A static runtime with ca-certificates, tzdata and the nonroot user 65532
# whose home /home/nonroot compose.yaml mounts into.
ARG RUNTIME_IMAGE=gcr.io/distroless/static-debian12:nonroot@sha256:afa5c872c891853ca7fcf1f12c3edb23f7eeef36189728842dd51042ff57f7ab

FROM ${BUILD_IMAGE} AS build
WORKDIR /src

# Dependencies first, in their own layer, so source edits do not refetch them.
# The API module (proto/) is a replace target of the main module's go.mod.
COPY go.mod go.sum ./
COPY proto/go.mod proto/go.sum ./proto/
RUN go mod download && go mod verify

COPY . .
ARG VERSION=dev
ARG REVISION=unknown
# -buildvcs=false: the context may be a git worktree whose .git points outside
# it; the revision comes in as a build argument instead (orderd version and
# the orderd_build_info metric show it: internal/platform/buildinfo).
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false \
        -ldflags="-s -w -X github.com/prometheus/common/version.Version=${VERSION} -X github.com/prometheus/common/version.Revision=${REVISION}" \
        -o /out/orderd ./cmd/orderd \
 && mkdir -p /out/dev

FROM ${RUNTIME_IMAGE}
COPY --from=build /out/orderd /orderd
# The folder compose.yaml mounts a volume on for `orderd dev-setup`: a new
# named volume takes the owner of the folder it is mounted over, and
# without this one it would be root's, which the nonroot user cannot write.
COPY --from=build --chown=65532:65532 /out/dev /home/nonroot/dev
# Numeric, so that Kubernetes' runAsNonRoot can verify it (a user name
# cannot be checked without reading the image's /etc/passwd). 65532 is
# distroless's nonroot.
USER 65532:65532
# A container listens on every interface (the binary's defaults are
# loopback, for a developer's machine). 8080: gRPC, 8081: plaintext gRPC
# health for probes, 9090: metrics. Override with the same variables.
ENV ORDERD_GRPC_ADDR=0.0.0.0:8080 \
    ORDERD_HEALTH_ADDR=0.0.0.0:8081 \
    ORDERD_METRICS_ADDR=0.0.0.0:9090
EXPOSE 8080 8081 9090
# Healthy while serve says SERVING: it reaches a quorum of its cluster.
# `orderd healthcheck` reads serve's settings from the same variables (the
# health port above, else the gRPC port with serve's certificate). The
# start period covers serve's wait for its cluster (ORDERD_CONNECT_WAIT,
# 60 s). Kubernetes ignores it (deploy/kubernetes has its own probes);
# compose's one-shot services turn it off.
HEALTHCHECK --interval=15s --timeout=5s --start-period=90s --retries=3 \
    CMD ["/orderd", "healthcheck", "-timeout", "4s"]
ENTRYPOINT ["/orderd"]
CMD ["serve"]

# The OCI annotations (https://github.com/opencontainers/image-spec,
# annotations.md), last so that a new build time rebuilds nothing else.
# LICENSES is an SPDX expression; the repository declares no licence yet,
# hence NOASSERTION (SPDX's "not stated") until it does.
ARG VERSION=dev
ARG REVISION=unknown
ARG CREATED=unknown
ARG SOURCE=https://github.com/atlasmart/orderd
ARG LICENSES=NOASSERTION
LABEL org.opencontainers.image.title="orderd" \
      org.opencontainers.image.description="Idempotent order creation on Apache Cassandra (gRPC)" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.licenses="${LICENSES}"
