"""One request to one broker on a connection of its own, closed whatever happens.

The probes (metadata, producer ids) used aiokafka's ``AIOKafkaClient.bootstrap()``. Its
bootstrap connection is a local of that method, in no pool the client's ``close()``
empties, and it is closed only on the failures bootstrap catches: a cancellation that
meets it while it waits for its metadata answer (a probe's own time bound, or a replica
stopping) leaves it to the garbage collector, which reports "Unclosed AIOKafkaConnection"
at ERROR through the loop's exception handler — on a clean stop under load, where a
reader, or an alert on the log, takes it for a fault. Here the connection is ours to
close, in a ``finally``.
"""

from __future__ import annotations

from typing import Any

from aiokafka.conn import create_conn


def split_server(server: str) -> tuple[str, int]:
    """``host:port`` (or ``[v6]:port``) as a host and a port; ValueError when it is not."""
    host, _, port = server.strip().rpartition(":")
    return host.strip("[]"), int(port)


async def ask(server: str, request: Any, *, client_id: str, request_timeout_ms: int) -> Any:
    """``request``'s answer from the broker at ``server``. aiokafka bounds the connect,
    the version lookup and the answer by ``request_timeout_ms`` each, and raises its
    errors (KafkaError, OSError, TimeoutError)."""
    host, port = split_server(server)
    connection = await create_conn(host, port, client_id=client_id,
                                   request_timeout_ms=request_timeout_ms)
    try:
        return await connection.send(request)
    finally:
        connection.close()
