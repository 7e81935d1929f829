#!/bin/sh
# As in the Apache Kafka distribution: the brokers' API versions (the compose file's
# healthcheck asks the broker through it).
exec java -Xmx96m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:-UsePerfData \
  -Dlog4j2.configurationFile=/opt/kafka/config/log4j2.yaml \
  -cp '/opt/kafka/libs/*' org.apache.kafka.tools.BrokerApiVersionsCommand "$@"
