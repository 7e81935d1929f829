"""Which Kafka a test runs on: tansu (the zero-install default), one Apache Kafka node,
or a 3-node Apache Kafka cluster.

A test that takes ``kafka_bootstrap`` runs once per broker in ``KAFKA_BROKERS``; a module
can choose others by overriding that fixture with ``broker_params(...)`` and
``bootstrap_of(request, kind)`` (tests/chaos/test_kafka_processes.py runs on tansu and the
3-node cluster). With ``SCHEDULER_TEST_KAFKA_BOOTSTRAP`` set, every kind is that one
broker, and each test runs once ("explicit").

The Apache brokers are session fixtures, started on first use, shared by every test (each
test uses a topic and consumer group of its own).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from cronwire.adapters.embedded.kafka import EmbeddedBroker
from cronwire.loopback import free_port
from tests.support.apache_kafka import (
    APACHE_KAFKA_VERSION,
    KRAFT_SETTINGS,
    TEST_ONLY_SETTINGS,
    KafkaCluster,
    as_environment,
    replication_settings,
)
from tests.support.servers import docker_available

EXPLICIT = "SCHEDULER_TEST_KAFKA_BOOTSTRAP"
TANSU, APACHE, APACHE_CLUSTER = "tansu", "apache", "apache-3"
KAFKA_BROKERS = (TANSU, APACHE)
_FIXTURE = {TANSU: "tansu_bootstrap", APACHE: "apache_kafka", APACHE_CLUSTER: "apache_kafka_cluster"}


def broker_params(*kinds: str) -> list[str]:
    """The parameters of a broker fixture: ``kinds``, or the one explicit broker."""
    return ["explicit"] if os.environ.get(EXPLICIT) else list(kinds)


def bootstrap_of(request: pytest.FixtureRequest, kind: str) -> str:
    """The bootstrap list of a running broker of ``kind`` (started on first use)."""
    if kind == "explicit":
        return os.environ[EXPLICIT]
    value = request.getfixturevalue(_FIXTURE[kind])
    return value if isinstance(value, str) else str(value.bootstrap)


def claim_mode_settings(request: pytest.FixtureRequest, mode: str) -> dict[str, str]:
    """Replica settings for a claim mode: ``postgres`` (none), or Kafka on a running broker
    of that kind with a new topic and consumer group of its own."""
    if mode == "postgres":
        return {}
    topic = f"runs-{uuid.uuid4().hex[:10]}"
    return {"claim_source": "kafka", "kafka_topic": topic,
            "kafka_bootstrap_servers": bootstrap_of(request, mode),
            "kafka_consumer_group": f"group-{topic}"}


@contextlib.contextmanager
def apache_kafka_server(workdir: Path, nodes: int) -> Iterator[KafkaCluster | str]:
    """A running Apache Kafka: a container when a Docker engine answers (single node
    only: the cluster's tests stop and start its nodes), else JVM processes."""
    if nodes == 1 and docker_available():
        with _container() as bootstrap:
            yield bootstrap
        return
    cluster = KafkaCluster(workdir / f"apache-kafka-{nodes}", size=nodes)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@contextlib.contextmanager
def _container() -> Iterator[str]:
    """apache/kafka in KRaft mode, advertised on a fixed loopback port (not run here:
    this machine has no Docker engine)."""
    from testcontainers.core.container import DockerContainer  # type: ignore[import-untyped]
    from testcontainers.core.waiting_utils import wait_for_logs  # type: ignore[import-untyped]

    port = free_port()
    settings = {**KRAFT_SETTINGS, **replication_settings(1), **TEST_ONLY_SETTINGS,
                "node.id": "1", "controller.quorum.voters": "1@localhost:9093",
                "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}"}
    container = DockerContainer(f"apache/kafka:{APACHE_KAFKA_VERSION}").with_bind_ports(9092, port)
    for name, value in as_environment(settings).items():
        container = container.with_env(name, value)
    with container:
        wait_for_logs(container, "Kafka Server started", timeout=120)
        yield f"127.0.0.1:{port}"


class StandaloneKafka:
    """One Apache Kafka node a test owns and stops: ``start()`` after ``stop()`` brings
    it back on its own data (topics and committed offsets survive, unlike tansu's)."""

    def __init__(self, home: Path) -> None:
        self._cluster = KafkaCluster(home, size=1)

    @property
    def bootstrap(self) -> str:
        return self._cluster.bootstrap

    def start(self) -> str:
        if not self._cluster.nodes:
            return self._cluster.start()
        self._cluster.restart(1)
        return self.bootstrap

    def stop(self) -> None:
        self._cluster.stop()


OWN_BROKERS = (TANSU, APACHE)  # a broker a test stops cannot be the explicit one


def own_broker(kind: str, workdir: Path) -> EmbeddedBroker | StandaloneKafka:
    """A broker of ``kind`` for one test, not started yet."""
    if kind == TANSU:
        return EmbeddedBroker(workdir / "own-tansu.log", port=free_port("127.0.0.1"))
    return StandaloneKafka(workdir / "own-kafka")
