"""KafkaLink: one replica's view of the broker — reachable or not — and the topic.

It finds or creates the topic (``topic``: partitions, replication factor)
before any client of ours asks for its metadata: some brokers (tansu) create an unknown
topic on a metadata request, with their own default partition count; a topic that is
missing and that the broker refuses to create is a start-up error naming why. It asks
the broker whether it grants producer ids (``capabilities``: the publisher is idempotent
only then). It then probes the broker every ``probe_seconds``:

* probe fails -> down: listeners close their clients (a client left reconnecting would
  re-create a lost topic with the broker's defaults the moment the broker returns), the
  hybrid claim source degrades to its sweeper, ``/readyz`` names ``kafka``;
* probe succeeds again, or the topic is gone (a memory-only broker restarted) -> the
  topic is created again and ``generation`` moves on: clients start afresh, so committed
  offsets (or their absence) are read again instead of stale positions.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Awaitable, Callable

from aiokafka.admin import AIOKafkaAdminClient

from cronwire.adapters.kafka.calls import KAFKA_FAILURES, bounded, finish_lingering
from cronwire.adapters.kafka.capabilities import grants_producer_ids
from cronwire.adapters.kafka.metadata import MetadataProbe
from cronwire.adapters.kafka.topic import (
    TopicLayout,
    TopicRefused,
    create_topic,
    existing_layout,
    partitions_in,
    replication_factor_for,
)
from cronwire.domain.errors import BrokerError, ConfigError

log = logging.getLogger(__name__)
__all__ = ["KAFKA_FAILURES", "KafkaLink", "bounded", "finish_lingering", "unreachable_servers"]
class KafkaLink:
    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        *,
        replication_factor: int | None = None,
        probe_seconds: float = 1.0,
        request_timeout_ms: int = 5000,
        on_change: Callable[[bool], None] | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self._probe = MetadataProbe(bootstrap, request_timeout_ms)
        self.topic = topic
        self.partitions = partitions
        self.replication_factor = replication_factor
        self.layout: TopicLayout | None = None  # the topic as found or created, latest join
        self.idempotent = False  # the broker granted a producer id at the latest join
        self.request_timeout_ms = request_timeout_ms
        self._probe_seconds = probe_seconds
        self._on_change = on_change
        self._up = False
        self._generation = 0
        self._up_event = asyncio.Event()
        self._down_listeners: list[Callable[[], Awaitable[None]]] = []
        self._suspect = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def healthy(self) -> bool:
        return self._up

    @property
    def generation(self) -> int:
        """Moves on each time the broker is (re)joined; clients of an older one restart."""
        return self._generation

    def on_down(self, listener: Callable[[], Awaitable[None]]) -> None:
        self._down_listeners.append(listener)

    def suspect(self) -> None:
        """A client saw a failure: probe now rather than at the next interval."""
        self._suspect.set()

    async def wait_up(self, seconds: float) -> bool:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._up_event.wait(), seconds)
        return self._up

    async def start(self, within: float = 15.0) -> None:
        """Reach the broker and create the topic if missing; BrokerError after ``within`` s,
        ConfigError at once if the topic is missing and the broker refuses to create it."""
        deadline = asyncio.get_running_loop().time() + within
        while True:
            try:
                await self._ensure_topic()
                break
            except TopicRefused as refused:
                raise ConfigError(f"SCHEDULER_KAFKA_TOPIC: {refused}") from refused
            except BrokerError:
                if asyncio.get_running_loop().time() >= deadline:
                    raise
                await asyncio.sleep(0.5)
        await self._join()
        self._task = asyncio.create_task(self._watch(), name="kafka-link")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await finish_lingering(5.0)

    # -- probing ---------------------------------------------------------------------

    async def _watch(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._suspect.wait(), self._probe_seconds)
            self._suspect.clear()
            try:
                topic_partitions = await self._describe()
                if topic_partitions is None:
                    log.warning("kafka topic %s is gone (broker restarted?); creating it again",
                                self.topic)
                    await self._ensure_topic()
                    await self._join()
                elif not self._up:
                    log.info("kafka broker %s is back; resuming kafka claims", self.bootstrap)
                    await self._join()
            except BrokerError as exc:
                if self._up:
                    log.warning("kafka broker %s lost (%s); claiming by sweeper only",
                                self.bootstrap, exc)
                    self._set_up(False)
                    for listener in self._down_listeners:
                        await bounded(listener(), 6.0)

    async def _join(self) -> None:
        """A new generation: clients start afresh, idempotent if the broker allows it.
        A broker that granted a producer id once is not asked again: a restarted Apache
        Kafka answers COORDINATOR_NOT_AVAILABLE for seconds, and waiting for it here
        would hold back the consumer too (the producer's own start waits for its id,
        within the publisher's bound)."""
        if not self.idempotent:
            self.idempotent = await grants_producer_ids(
                self.bootstrap, request_timeout_ms=self.request_timeout_ms)
        self._set_up(True, new_generation=True)

    def _set_up(self, up: bool, *, new_generation: bool = False) -> None:
        if new_generation:
            self._generation += 1
        changed = up != self._up
        self._up = up
        if up:
            self._up_event.set()
        else:
            self._up_event.clear()
        if changed and self._on_change is not None:
            self._on_change(up)

    async def _describe(self) -> int | None:
        """Partitions of the topic, None if it does not exist."""
        return partitions_in(await self._probe.fetch(), self.topic)

    async def _ensure_topic(self) -> None:
        """Find the topic, or create it with a replication factor the cluster can hold."""
        for _ in range(2):  # again once if another replica created it meanwhile
            metadata = await self._probe.fetch()
            found = partitions_in(metadata, self.topic)
            if found is not None:
                self.layout = existing_layout(self.topic, found, self.partitions)
                return
            factor = replication_factor_for(self.replication_factor,
                                            len(metadata.get("brokers") or []))
            created = await self._create(factor)
            if created is not None:
                self.layout = created
                return
        raise BrokerError(f"kafka topic {self.topic} was created elsewhere but is not listed")

    async def _create(self, factor: int) -> TopicLayout | None:
        admin = AIOKafkaAdminClient(bootstrap_servers=self._probe.servers,
                                    client_id="cronwire-admin",
                                    request_timeout_ms=self.request_timeout_ms)
        try:
            async with asyncio.timeout(2 * self.request_timeout_ms / 1000):
                await admin.start()
                return await create_topic(admin, self.topic, self.partitions, factor)
        except KAFKA_FAILURES as exc:
            raise BrokerError(f"creating kafka topic {self.topic}: {type(exc).__name__}: "
                              f"{exc}") from exc
        finally:
            await bounded(admin.close(), 3.0)


def unreachable_servers(bootstrap: str, within: float) -> list[str]:
    """Bootstrap servers no TCP connection reaches within ``within`` seconds (retrying);
    empty as soon as one answers. A plain socket, so a start-up refusal is one line and
    not a client library's reconnect log."""
    servers = [server.strip() for server in bootstrap.split(",") if server.strip()]
    deadline = time.monotonic() + within
    while True:
        for server in servers:
            host, _, port = server.rpartition(":")
            try:
                with socket.create_connection((host.strip("[]"), int(port)), timeout=1.0):
                    return []
            except (OSError, ValueError):
                continue
        if time.monotonic() >= deadline:
            return servers
        time.sleep(0.25)
