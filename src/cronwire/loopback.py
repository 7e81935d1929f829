"""Free loopback ports for the servers we start ourselves (embedded Postgres and broker,
the harnesses' replicas and sinks, the tests' servers).

A port is chosen now and bound later, by another process, after it has started: seconds
for a JVM, a second for a `cronwire serve`, and again on the same port after a restart.
A port the kernel hands out for ``bind(0)`` comes from its range for outgoing
connections, so any connection opened meanwhile (a test run opens thousands) can take it
as its local end, and the server then exits with its address in use: a full test run
lost a three-node Kafka cluster so, and CI a replica. Ports below that range are only ever
taken by an explicit bind, so the choice is made there, at random, and never handed out
twice by one process."""

from __future__ import annotations

import random
import socket
from pathlib import Path

_LOWEST = 10_000  # below: well-known and registered services' ports
_handed_out: set[int] = set()
_random = random.SystemRandom()


def ephemeral_ports() -> range:
    """The kernel's range for outgoing connections' local ports (and for ``bind(0)``)."""
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        return range(32768, 61000)  # Linux's default
    return range(low, high + 1)


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing on ``host`` listens on now, below the ephemeral range, and not one
    this process handed out before. With an unusual range that leaves too few ports
    below it, the kernel picks."""
    high = ephemeral_ports().start - 1
    for _ in range(200):
        port = _random.randint(_LOWEST, high) if high - _LOWEST >= 1000 else 0
        if port and port in _handed_out:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            chosen = int(sock.getsockname()[1])
        if len(_handed_out) > 5_000:  # a long-lived harness: start afresh (the servers
            _handed_out.clear()       # given those ports have bound them long since)
        _handed_out.add(chosen)
        return chosen
    raise OSError(f"no free port on {host} below the ephemeral range after 200 tries")
