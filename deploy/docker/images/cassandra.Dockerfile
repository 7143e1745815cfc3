# Apache Cassandra from its Maven Central artifacts, on the JRE image built
# from the debootstrapped Debian base: for machines with no image registry.
# Configured like the official `cassandra` image (the same CASSANDRA_*
# variables, /etc/cassandra, /var/lib/cassandra, `cassandra -f`, nodetool),
# so deploy/docker/compose.yaml and the e2e docker backend take either.
#
# The context is assembled by build.sh: lib/ and conf/ come from
# `cassandra-local image-context` (the jars and the configuration the local
# launcher's nodes run with), the scripts from this folder.
ARG JRE_IMAGE=local/jre:17
FROM ${JRE_IMAGE}
ARG CASSANDRA_VERSION
LABEL org.opencontainers.image.title="Apache Cassandra ${CASSANDRA_VERSION} (orderd test image)" \
      org.opencontainers.image.version="${CASSANDRA_VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd -r -g 999 cassandra \
 && useradd -r -u 999 -g cassandra -d /var/lib/cassandra cassandra \
 && mkdir -p /var/lib/cassandra /etc/cassandra /opt/cassandra/bin \
 && chown cassandra:cassandra /var/lib/cassandra /etc/cassandra
COPY lib/ /opt/cassandra/lib/
COPY --chown=cassandra:cassandra conf/ /etc/cassandra/
COPY cassandra-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
COPY cassandra-run.sh /opt/cassandra/bin/cassandra
COPY cassandra-nodetool.sh /opt/cassandra/bin/nodetool
ENV CASSANDRA_HOME=/opt/cassandra \
    CASSANDRA_CONF=/etc/cassandra \
    PATH=/opt/cassandra/bin:$PATH
VOLUME /var/lib/cassandra
# 7000: intra-node, 9042: CQL, 7199: JMX (local only; JMX_PORT moves it).
EXPOSE 7000 9042 7199
ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["cassandra", "-f"]
