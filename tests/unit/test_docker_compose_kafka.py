"""docker-compose.kafka.yml: Postgres, a KRaft Kafka and two kafka-mode replicas, wired
with health checks (the file is parsed, not run: CI has no Docker engine)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]

COMPOSE = Path(__file__).resolve().parents[2] / "docker-compose.kafka.yml"


def _services() -> dict[str, Any]:
    services: dict[str, Any] = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))["services"]
    return services


def test_the_stack_has_postgres_kraft_kafka_and_two_kafka_mode_replicas() -> None:
    services = _services()
    assert {"postgres", "kafka", "cronwire-1", "cronwire-2"} <= set(services)
    kafka = services["kafka"]["environment"]
    assert "controller" in kafka["KAFKA_PROCESS_ROLES"] and "broker" in kafka["KAFKA_PROCESS_ROLES"]
    assert "ZOOKEEPER" not in " ".join(kafka)
    ids = set()
    for name in ("cronwire-1", "cronwire-2"):
        replica = services[name]
        assert replica["build"] == {"context": ".", "dockerfile": "Dockerfile"}
        env = replica["environment"]
        assert env["SCHEDULER_CLAIM_SOURCE"] == "kafka"
        assert env["SCHEDULER_KAFKA_BOOTSTRAP_SERVERS"] == "kafka:9092"
        assert env["SCHEDULER_DATABASE_URL"].startswith("postgresql://")
        ids.add(env["SCHEDULER_INSTANCE_ID"])
        assert replica["depends_on"] == {
            "postgres": {"condition": "service_healthy"},
            "kafka": {"condition": "service_healthy"},
        }
        assert "/readyz" in " ".join(replica["healthcheck"]["test"])
    assert len(ids) == 2


def test_every_service_has_a_healthcheck() -> None:
    assert all("healthcheck" in service for service in _services().values())
