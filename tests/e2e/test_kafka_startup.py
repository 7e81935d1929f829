"""`cronwire serve` in kafka mode against Apache Kafka: a topic that is missing and that
the broker refuses to create stops the start with one line naming why (exit 2)."""

from __future__ import annotations

import uuid
from pathlib import Path

from cronwire.loopback import free_port
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


def test_loadtest_kafka_bootstrap_is_checked_before_anything_starts(tmp_path: Path) -> None:
    silent = f"127.0.0.1:{free_port()}"
    cases = [
        (["--mode", "postgres", "--kafka-bootstrap", silent],
         "cronwire: --kafka-bootstrap: only with --mode kafka"),
        (["--mode", "kafka", "--kafka-bootstrap", silent],
         f"cronwire: --kafka-bootstrap: no Kafka broker answers at {silent}"),
    ]
    for args, line in cases:
        result = run_cli("loadtest", *args, "--out", str(tmp_path / "out"), env=clean_env())
        assert result.returncode == 2 and result.stderr.strip().splitlines() == [line]
    bad = run_cli("loadtest", "--mode", "kafka", "--kafka-bootstrap", "nohostport",
                  "--out", str(tmp_path / "out"), env=clean_env())
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "--kafka-bootstrap" in bad.stderr
    assert not (tmp_path / "out").exists()
