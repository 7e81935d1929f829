"""The embedded servers, for whoever runs without a configured one: `cronwire serve` and
the operator commands with no SCHEDULER_DATABASE_URL (or, in kafka mode, no
SCHEDULER_KAFKA_BOOTSTRAP_SERVERS), and the load-test and chaos harnesses, which start
their own on loopback. The harnesses get the adapters' classes from here, the composition
root, never from the adapters themselves."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Iterator

from cronwire.adapters.embedded.kafka import EmbeddedBroker
from cronwire.adapters.embedded.postgres import (
    DURABLE_SETTINGS,
    FAST_UNSAFE_SETTINGS,
    EmbeddedPostgres,
)
from cronwire.adapters.embedded.postgres_pair import EmbeddedPostgresPair
from cronwire.adapters.embedded.service_user import LINKED_BINARIES
from cronwire.bootstrap.factories import uses_kafka
from cronwire.config import Settings

__all__ = ["DURABLE_SETTINGS", "FAST_UNSAFE_SETTINGS", "LINKED_BINARIES", "EmbeddedBroker",
           "EmbeddedPostgres", "EmbeddedPostgresPair", "embedded_broker", "embedded_postgres"]

log = logging.getLogger("cronwire")


@contextlib.contextmanager
def embedded_postgres(settings: Settings) -> Iterator[Settings]:
    """With no SCHEDULER_DATABASE_URL, Postgres under SCHEDULER_HOME (started, or reused if
    running) for the duration; the settings with its DSN. Stopped on the way out however
    that happens (Ctrl-C included), if it was started here."""
    if not settings.embedded_database:
        yield settings
        return
    server = EmbeddedPostgres(settings.home / "postgres")
    try:
        server.start()
        # Where, never the DSN: log lines end up in places a DSN should not (ADR 0037).
        log.info("embedded postgres (no SCHEDULER_DATABASE_URL): data in %s, listening on "
                 "%s:%s", server.data_dir, server.host, server.port)
        yield dataclasses.replace(settings, database_url=server.dsn)
    finally:
        if server.started_here:
            server.stop()
            log.info("embedded postgres stopped")


@contextlib.contextmanager
def embedded_broker(settings: Settings) -> Iterator[Settings]:
    """Kafka mode with no SCHEDULER_KAFKA_BOOTSTRAP_SERVERS: tansu on a free loopback port
    for the duration (memory storage: a restart loses topics and offsets; the sweeper
    covers)."""
    if not (settings.embedded_broker and uses_kafka(settings)):
        yield settings
        return
    broker = EmbeddedBroker(settings.home / "kafka" / "tansu.log")
    try:
        bootstrap = broker.start()
        log.info("embedded kafka broker (no SCHEDULER_KAFKA_BOOTSTRAP_SERVERS): tansu, memory "
                 "storage, bootstrap %s, log %s", bootstrap, broker.log_file)
        yield dataclasses.replace(settings, kafka_bootstrap_servers=bootstrap)
    finally:
        broker.stop()
        log.info("embedded kafka broker stopped")
