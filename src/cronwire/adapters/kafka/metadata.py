"""MetadataProbe: the cluster's metadata (brokers, every topic), from whichever broker
answers.

A broker that is frozen (SIGSTOP), or too busy to answer, still accepts TCP connections:
the kernel completes the handshake. A client that asks it and waits makes the whole
cluster look lost, although the other brokers know the same metadata. The probe therefore
bootstraps starting from the broker that answered last, and then asks the brokers one at a
time, each bounded by the request timeout, until one answers. Only when none answers is
the broker down.

It asks for every topic with a null topic list, never for ours by name: some brokers
create a topic that a metadata request names.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka.client import AIOKafkaClient
from aiokafka.protocol.metadata import MetadataRequest

from cronwire.adapters.kafka.calls import KAFKA_FAILURES, bounded
from cronwire.domain.errors import BrokerError


class MetadataProbe:
    def __init__(self, bootstrap: str, request_timeout_ms: int) -> None:
        self._servers = [server.strip() for server in bootstrap.split(",") if server.strip()]
        self._request_timeout_ms = request_timeout_ms
        self._answered: str | None = None  # host:port of the broker that answered last

    @property
    def servers(self) -> str:
        """The bootstrap list, the broker that answered last first."""
        first = [self._answered] if self._answered else []
        return ",".join(first + [s for s in self._servers if s != self._answered])

    async def fetch(self) -> dict[str, Any]:
        """The metadata as ``{"brokers": [...], "topics": [...]}``; BrokerError when no
        broker answers within its request timeout."""
        client = AIOKafkaClient(bootstrap_servers=self.servers, client_id="cronwire-probe",
                                request_timeout_ms=self._request_timeout_ms)
        bound = self._request_timeout_ms / 1000
        failures: list[str] = []
        try:
            # aiokafka's bootstrap moves past a silent server after the request timeout.
            async with asyncio.timeout(bound * (len(self._servers) + 1)):
                await client.bootstrap()
            brokers = {b.nodeId: f"{b.host}:{b.port}" for b in client.cluster.brokers()}
            order = sorted(brokers, key=lambda node: brokers[node] != self._answered)
            for node in order:
                try:
                    async with asyncio.timeout(bound):
                        answer = await client.send(node, MetadataRequest(None))
                except KAFKA_FAILURES as exc:
                    failures.append(f"{brokers[node]}: {type(exc).__name__}: {exc}")
                    continue
                self._answered = brokers[node]
                metadata: dict[str, Any] = answer.to_object()
                return metadata
        except KAFKA_FAILURES as exc:
            failures.append(f"{type(exc).__name__}: {exc}")
        finally:
            # In a task of its own: aiokafka's close swallows a cancellation that meets it
            # (it awaits its own cancelled task), which would keep the link's probe loop
            # running after KafkaLink.close() cancelled it.
            await bounded(client.close(), 3.0)
        raise BrokerError(f"cannot reach a Kafka broker at {','.join(self._servers)}: "
                          + "; ".join(failures))
