"""`cronwire serve` in kafka mode against Apache Kafka: a topic that is missing and that
the broker refuses to create stops the start with one line naming why (exit 2)."""

from __future__ import annotations

import uuid

from cronwire.adapters.embedded.postgres import free_port
from tests.support.apache_kafka import KafkaCluster
from tests.support.processes import clean_env, run_cli


def test_a_topic_the_broker_will_not_create_stops_serve_with_one_line(
    database_url: str, apache_kafka: KafkaCluster | str
) -> None:
    bootstrap = apache_kafka if isinstance(apache_kafka, str) else apache_kafka.bootstrap
    topic = f"refused-{uuid.uuid4().hex[:8]}"
    result = run_cli("serve", timeout=120, env=clean_env(
        SCHEDULER_DATABASE_URL=database_url, SCHEDULER_CLAIM_SOURCE="kafka",
        SCHEDULER_KAFKA_BOOTSTRAP_SERVERS=bootstrap, SCHEDULER_KAFKA_TOPIC=topic,
        SCHEDULER_KAFKA_REPLICATION_FACTOR="3", SCHEDULER_HTTP_PORT=str(free_port()),
        SCHEDULER_LOG_LEVEL="error"))
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert lines[0].startswith(f"cronwire: SCHEDULER_KAFKA_TOPIC: kafka topic '{topic}' "
                               "does not exist and the broker refused to create it")
    assert "InvalidReplicationFactor" in lines[0]
