# A stand-in for gcr.io/distroless/static-debian12:nonroot on the
# debootstrapped Debian base, for the repo-root Dockerfile's runtime stage
# where that image cannot be pulled (--build-arg RUNTIME_IMAGE=local/static:nonroot):
# what orderd relies on from it is ca-certificates, tzdata and the nonroot
# user and group 65532 with its home /home/nonroot. Unlike distroless it
# keeps a shell and apt, which a debugging session may welcome. Built by
# build.sh.
ARG BASE_IMAGE=local/debian:bookworm
FROM ${BASE_IMAGE}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates tzdata \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 65532 nonroot \
 && useradd --uid 65532 --gid 65532 --create-home --home-dir /home/nonroot --shell /usr/sbin/nologin nonroot
USER 65532:65532
WORKDIR /home/nonroot
