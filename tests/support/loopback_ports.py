"""Loopback ports for test servers that bind late: a JVM takes seconds to bind the port it
was given and a node restarts on the same port, so the port must not be one the kernel can
hand to an outgoing connection meanwhile (tests/support/apache_kafka.py)."""

from __future__ import annotations

import random
import socket
from pathlib import Path


def ephemeral_ports() -> range:
    """The kernel's range for outgoing connections' local ports (and for bind to 0)."""
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        return range(32768, 61000)  # Linux's default
    return range(low, high + 1)


def free_port_below_ephemeral(taken: set[int] | None = None) -> int:
    """A free loopback port below the ephemeral range. A JVM takes seconds to bind the
    port it was given, and a node is restarted on the same port after a kill; a port from
    the ephemeral range can meanwhile become the local port of any outgoing connection
    (the suite opens thousands), and the node then exits at start with its address in
    use (a full run lost the three-node cluster so). Ports below the range are only ever
    taken by an explicit bind."""
    taken = taken if taken is not None else set()
    ephemeral = ephemeral_ports()
    low, high = 10000, ephemeral.start - 1
    if high - low < 1000:  # an unusual range: let the kernel pick
        low = high = 0
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randint(low, high) if high else 0
        if port in taken:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            chosen = int(sock.getsockname()[1])
        taken.add(chosen)
        return chosen
    raise RuntimeError("no free loopback port below the ephemeral range after 200 tries")


def answers(port: int) -> bool:
    """Whether something accepts connections on the loopback port."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False
