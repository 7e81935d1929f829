"""Free loopback ports for the servers we start ourselves (embedded Postgres and broker,
the harnesses' replicas and sinks, the tests' servers).

A port is chosen now and bound later, by another process, after it has started: seconds
for a JVM, a second for a `cronwire serve`, and again on the same port after a restart.
A port the kernel hands out for ``bind(0)`` comes from its range for outgoing
connections, so any connection opened meanwhile (a test run opens thousands) can take it
as its local end, and the server then exits with its address in use: a full test run
lost a three-node Kafka cluster so, and CI a replica. Ports below that range are only ever
taken by an explicit bind, so the choice is made there, at random.

Several processes choose at once (the test run's workers, a harness they start), and a
free port stays free until its server binds it, so two of them could choose the same one
in that window: CI lost a replica so too. Each choice is therefore reserved machine-wide,
by creating a file named after the port (``O_EXCL``: one creator wins) in a directory
every chooser shares; a reservation lapses after ``RESERVED_SECONDS``, long after any
server has bound its port."""

from __future__ import annotations

import contextlib
import os
import random
import socket
import tempfile
import time
from pathlib import Path

_LOWEST = 10_000  # below: well-known and registered services' ports
RESERVED_SECONDS = 30 * 60  # longer than a test run: a restart finds its port still held
_handed_out: set[int] = set()  # this process's choices, when the directory is unusable
_random = random.SystemRandom()


def ephemeral_ports() -> range:
    """The kernel's range for outgoing connections' local ports (and for ``bind(0)``)."""
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        return range(32768, 61000)  # Linux's default
    return range(low, high + 1)


def reservations() -> Path:
    """The directory every process of this user reserves its ports in."""
    return Path(tempfile.gettempdir()) / f"cronwire-ports-{os.getuid()}"


def reserve_port(port: int) -> bool:
    """True if this call reserved ``port``: no other process (or earlier call) holds a
    reservation younger than ``RESERVED_SECONDS``."""
    if port in _handed_out:
        return False
    try:
        reserved = _create_reservation(reservations() / str(port))
    except OSError:
        reserved = True  # no shared directory: this process's memory alone keeps choices apart
    if not reserved:
        return False
    if len(_handed_out) > 5_000:  # a long-lived harness: start afresh (the servers
        _handed_out.clear()       # given those ports have bound them long since)
    _handed_out.add(port)
    return True


def _create_reservation(path: Path) -> bool:
    """Create ``path`` (``O_EXCL``: one creator wins), taking over a lapsed one."""
    path.parent.mkdir(mode=0o700, exist_ok=True)
    for _ in range(2):
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            return True
        except FileExistsError:
            with contextlib.suppress(FileNotFoundError):  # gone meanwhile: try to create it again
                if time.time() - path.stat().st_mtime < RESERVED_SECONDS:
                    return False
                path.unlink()  # lapsed: take it over
    return False


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing on ``host`` listens on now, below the ephemeral range, and reserved
    for the caller against every other chooser on the machine. With an unusual range that
    leaves too few ports below it, the kernel picks."""
    high = ephemeral_ports().start - 1
    for _ in range(200):
        port = _random.randint(_LOWEST, high) if high - _LOWEST >= 1000 else 0
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            chosen = int(sock.getsockname()[1])
        if port == 0 or reserve_port(chosen):
            return chosen
    raise OSError(f"no free port on {host} below the ephemeral range after 200 tries")
