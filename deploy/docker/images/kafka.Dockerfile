# Apache Kafka (KRaft) on the JRE image, from the jars the local launcher
# fetches from Maven Central (`kafka-local runtime` prints their folder)
# plus the command-line tools' jar: what compose.yaml's kafka service runs
# where the apache/kafka image cannot be pulled. Configured like that
# image (kafka/run says how); runs as uid 1000 (appuser), data in
# /var/lib/kafka/data. Built by build.sh, which assembles the context:
#   libs/   the broker's jars and kafka-tools
#   kafka/  this folder (entrypoint, configuration, tool scripts)
ARG JRE_IMAGE=local/jre:17
FROM ${JRE_IMAGE}
RUN useradd --uid 1000 --user-group --no-create-home --home-dir /opt/kafka appuser \
 && mkdir -p /opt/kafka/config /var/lib/kafka/data /etc/kafka/docker \
 && chown appuser:appuser /opt/kafka/config /var/lib/kafka/data
COPY libs/ /opt/kafka/libs/
COPY kafka/bin/ /opt/kafka/bin/
COPY kafka/server.properties /opt/kafka/config/server.properties.defaults
COPY kafka/log4j2.properties kafka/tools-log4j2.properties /opt/kafka/config/
COPY kafka/run /etc/kafka/docker/run
ENV PATH=/opt/kafka/bin:$PATH
USER appuser
WORKDIR /opt/kafka
EXPOSE 9092 9093
CMD ["/etc/kafka/docker/run"]
