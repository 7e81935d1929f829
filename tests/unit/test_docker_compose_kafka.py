"""docker-compose.kafka.yml: Postgres, a KRaft Kafka and two kafka-mode replicas, wired
with health checks (the file is parsed, not run: CI has no Docker engine)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]

from tests.support.apache_kafka import (
    APACHE_KAFKA_VERSION,
    KRAFT_SETTINGS,
    TEST_ONLY_SETTINGS,
    as_environment,
    replication_settings,
)

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


def test_the_broker_is_the_apache_kafka_release_and_kraft_settings_the_tests_run() -> None:
    """The compose file's broker is what tests/support/apache_kafka.py starts for a single
    node (the listeners differ: containers name each other; test-only settings stay out)."""
    kafka = _services()["kafka"]
    assert kafka["image"] == f"apache/kafka:{APACHE_KAFKA_VERSION}"
    environment = {name: str(value) for name, value in kafka["environment"].items()}
    tested = as_environment({**KRAFT_SETTINGS, **replication_settings(1)})
    assert {name: environment.get(name) for name in tested} == tested
    assert not set(as_environment(TEST_ONLY_SETTINGS)) & set(environment)


def test_every_service_has_a_healthcheck() -> None:
    assert all("healthcheck" in service for service in _services().values())


def test_the_deploy_tests_stand_ins_carry_the_names_the_compose_file_pulls() -> None:
    """CI reaches no registry: deploy/podman/base-images.sh makes local images under the
    names the compose file uses (a short name resolves to docker.io/library/...)."""
    script = (COMPOSE.parent / "deploy" / "podman" / "base-images.sh").read_text()
    for service in ("postgres", "kafka"):
        image = _services()[service]["image"]
        qualified = f"docker.io/{image}" if "/" in image else f"docker.io/library/{image}"
        assert f"-t {qualified} " in script, image
