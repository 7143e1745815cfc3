# The Go toolchain orderd's go.mod names, on the debootstrapped Debian base,
# taken from the Go module proxy (golang.org/toolchain): a builder for the
# repo-root Dockerfile where no golang image can be pulled
# (--build-arg BUILD_IMAGE=local/golang:<version>). Built by build.sh.
ARG BASE_IMAGE=local/debian:bookworm
FROM ${BASE_IMAGE}
ARG GO_VERSION
ARG GOPROXY=https://proxy.golang.org
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      ca-certificates curl unzip git \
 && rm -rf /var/lib/apt/lists/*
# Extra CAs to trust (build.sh copies a TLS-intercepting proxy's here; empty
# elsewhere).
COPY ca/ /usr/local/share/ca-certificates/
RUN update-ca-certificates \
 && curl -fsSL -o /tmp/go.zip "${GOPROXY}/golang.org/toolchain/@v/v0.0.1-go${GO_VERSION}.linux-amd64.zip" \
 && unzip -q /tmp/go.zip -d /tmp/go \
 && mv "/tmp/go/golang.org/toolchain@v0.0.1-go${GO_VERSION}.linux-amd64" /usr/local/go \
 && rm -rf /tmp/go /tmp/go.zip \
 && /usr/local/go/bin/go version
ENV PATH=/usr/local/go/bin:/root/go/bin:$PATH \
    GOTOOLCHAIN=local \
    GOPROXY=${GOPROXY}
