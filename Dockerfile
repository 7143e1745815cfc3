# syntax=docker/dockerfile:1
#
# orderd container image.
#
#   docker build -t atlasmart/orderd:dev .
#   docker run --rm atlasmart/orderd:dev migrate   # or: serve (the default)
#
# Used by deploy/docker/compose.yaml. The build context is the repo root; keep
# a .dockerignore there listing .git, .cluster/ (deploy/local's data) and bin/
# so they are not sent to the builder.

# go.mod pins go 1.26.x and the golang images set GOTOOLCHAIN=local, so the
# builder's Go must be at least the go.mod patch: the floating 1.26 tag is.
FROM golang:1.26 AS build
WORKDIR /src

# Dependencies first, in their own layer, so source edits do not refetch them.
COPY go.mod go.sum ./
RUN go mod download && go mod verify

COPY . .
# -buildvcs=false: the context may be a git worktree whose .git points outside it.
RUN --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags='-s -w' \
        -o /out/orderd ./cmd/orderd

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/orderd /orderd
USER nonroot:nonroot
# 8080: gRPC (ORDERD_GRPC_ADDR), 9090: metrics (ORDERD_METRICS_ADDR).
EXPOSE 8080 9090
ENTRYPOINT ["/orderd"]
CMD ["serve"]
