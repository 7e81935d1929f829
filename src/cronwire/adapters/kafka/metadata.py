"""MetadataProbe: the cluster's metadata (brokers, every topic), from whichever broker
answers.

A broker that is frozen (SIGSTOP), or too busy to answer, still accepts TCP connections:
the kernel completes the handshake. A client that asks it and waits makes the whole
cluster look lost, although the other brokers know the same metadata. The probe therefore
asks the broker that answered last first, then the bootstrap servers and the brokers the
last answer named, one at a time, each bounded by the request timeout, until one answers.
Only when none answers is the broker down. Each question has a connection of its own,
closed even when the probe is cancelled (one_request.py says why).

It asks for every topic with a null topic list, never for ours by name: some brokers
create a topic that a metadata request names.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka.protocol.metadata import MetadataRequest

from cronwire.adapters.kafka.calls import KAFKA_FAILURES
from cronwire.adapters.kafka.one_request import ask
from cronwire.domain.errors import BrokerError


class MetadataProbe:
    def __init__(self, bootstrap: str, request_timeout_ms: int) -> None:
        self._servers = [server.strip() for server in bootstrap.split(",") if server.strip()]
        self._request_timeout_ms = request_timeout_ms
        self._answered: str | None = None  # host:port of the broker that answered last
        self._known: list[str] = []  # the brokers the last answer listed

    @property
    def servers(self) -> str:
        """The bootstrap list, the broker that answered last first."""
        first = [self._answered] if self._answered else []
        return ",".join(first + [s for s in self._servers if s != self._answered])

    async def fetch(self) -> dict[str, Any]:
        """The metadata as ``{"brokers": [...], "topics": [...]}``; BrokerError when no
        broker answers within its request timeout."""
        failures: list[str] = []
        for server in self._candidates():
            try:
                # aiokafka bounds the connect, the version lookup and the answer each; the
                # outer bound holds when a loaded machine stretches them.
                async with asyncio.timeout(3 * self._request_timeout_ms / 1000):
                    answer = await ask(server, MetadataRequest(None), client_id="cronwire-probe",
                                       request_timeout_ms=self._request_timeout_ms)
            except (*KAFKA_FAILURES, ValueError) as exc:
                failures.append(f"{server}: {type(exc).__name__}: {exc}")
                continue
            self._answered = server
            metadata: dict[str, Any] = answer.to_object()
            self._known = [f"{b['host']}:{b['port']}" for b in metadata.get("brokers") or []]
            return metadata
        raise BrokerError(f"cannot reach a Kafka broker at {','.join(self._servers)}: "
                          + "; ".join(failures))

    def _candidates(self) -> list[str]:
        """The broker that answered last, the bootstrap list, then every broker the last
        answer named (a bootstrap list of one address still reaches the others)."""
        ordered = self.servers.split(",") + self._known
        return list(dict.fromkeys(server for server in ordered if server))
