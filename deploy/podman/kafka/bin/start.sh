#!/bin/bash
# KAFKA_* variables -> server.properties (upper snake to dotted lower case, as the official
# image maps them; its own JVM variables excepted), KRaft storage formatted once, then the
# broker in the foreground.
set -euo pipefail
home=/var/lib/kafka
props=$home/server.properties
mkdir -p "$home/data"
: >"$props"
while IFS='=' read -r name _; do
  case "$name" in
    KAFKA_HEAP_OPTS|KAFKA_OPTS|KAFKA_JVM_PERFORMANCE_OPTS|KAFKA_LOG4J_OPTS|KAFKA_JMX_OPTS) ;;
    KAFKA_*)
      key=${name#KAFKA_}; key=${key,,}; key=${key//_/.}
      echo "$key=${!name}" >>"$props" ;;
  esac
done < <(env)
echo "log.dirs=$home/data" >>"$props"
java=(java -XX:+UseSerialGC -XX:-UsePerfData -Dlog4j2.configurationFile=/opt/kafka/config/log4j2.yaml
      -cp '/opt/kafka/libs/*')
"${java[@]}" -Xmx128m kafka.tools.StorageTool format --ignore-formatted \
  "--cluster-id=${CLUSTER_ID:-5L6g3nShT-eMCtK--X86sw}" -c "$props" >/dev/null
exec "${java[@]}" ${KAFKA_HEAP_OPTS:--Xms64m -Xmx384m} kafka.Kafka "$props"
