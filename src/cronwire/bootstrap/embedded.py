"""The embedded servers, for whoever runs without a configured one: `cronwire serve` and
the operator commands with no SCHEDULER_DATABASE_URL (or, in kafka mode, no
SCHEDULER_KAFKA_BOOTSTRAP_SERVERS), and the load-test and chaos harnesses, which start
their own on loopback. The harnesses get the adapters' classes from here, the composition
root, never from the adapters themselves."""

from __future__ import annotations

import dataclasses
import logging

from cronwire.adapters.embedded.kafka import EmbeddedBroker
from cronwire.adapters.embedded.postgres import FAST_UNSAFE_SETTINGS, EmbeddedPostgres
from cronwire.adapters.embedded.postgres_pair import EmbeddedPostgresPair
from cronwire.bootstrap.factories import uses_kafka
from cronwire.config import Settings

__all__ = ["FAST_UNSAFE_SETTINGS", "EmbeddedBroker", "EmbeddedPostgres", "EmbeddedPostgresPair",
           "start_embedded_broker", "start_embedded_postgres"]

log = logging.getLogger("cronwire")


def start_embedded_postgres(settings: Settings) -> tuple[Settings, EmbeddedPostgres | None]:
    """With no SCHEDULER_DATABASE_URL, start (or reuse) Postgres under SCHEDULER_HOME."""
    if not settings.embedded_database:
        return settings, None
    server = EmbeddedPostgres(settings.home / "postgres")
    dsn = server.start()
    log.info("embedded postgres (no SCHEDULER_DATABASE_URL): data in %s, dsn %s",
             server.data_dir, dsn)
    return dataclasses.replace(settings, database_url=dsn), server


def start_embedded_broker(settings: Settings) -> tuple[Settings, EmbeddedBroker | None]:
    """Kafka mode with no SCHEDULER_KAFKA_BOOTSTRAP_SERVERS: start tansu on a free
    loopback port (memory storage: a restart loses topics and offsets; the sweeper covers)."""
    if not (settings.embedded_broker and uses_kafka(settings)):
        return settings, None
    broker = EmbeddedBroker(settings.home / "kafka" / "tansu.log")
    bootstrap = broker.start()
    log.info("embedded kafka broker (no SCHEDULER_KAFKA_BOOTSTRAP_SERVERS): tansu, memory "
             "storage, bootstrap %s, log %s", bootstrap, broker.log_file)
    return dataclasses.replace(settings, kafka_bootstrap_servers=bootstrap), broker
