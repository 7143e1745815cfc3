# A Java 17 runtime on the debootstrapped Debian base: what the Cassandra
# and Kafka images run on.
ARG BASE_IMAGE=local/debian:bookworm
FROM ${BASE_IMAGE}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      openjdk-17-jre-headless procps \
 && rm -rf /var/lib/apt/lists/*
