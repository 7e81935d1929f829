"""The ports we give the servers we start (embedded Postgres and broker, replicas, sinks,
the Kafka test cluster) lie below the kernel's range for outgoing connections: such a
server binds its port a second or more after it was chosen (and again after a restart),
and a port from that range can meanwhile be the local end of any connection the suite
opens. A full run once lost its three-node cluster at start so, and CI a replica
(`cronwire serve` exiting with "SCHEDULER_HTTP_PORT … is already in use")."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import cronwire.adapters.embedded.kafka
import cronwire.adapters.embedded.postgres
import cronwire.adapters.embedded.postgres_pair
import cronwire.harness.fleet
import cronwire.harness.nginx_sink
import cronwire.harness.sink_process
import tests.support.replicas
from cronwire import loopback
from cronwire.loopback import (
    RESERVED_SECONDS,
    ephemeral_ports,
    free_port,
    reservations,
    reserve_port,
)


def test_ports_are_distinct_free_and_outside_the_ephemeral_range() -> None:
    ephemeral = ephemeral_ports()
    ports = [free_port() for _ in range(50)]  # the process remembers what it handed out
    assert len(set(ports)) == len(ports)
    for port in ports:
        assert port not in ephemeral, (port, ephemeral)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", port))  # still free: nothing kept it


def test_every_server_we_start_gets_its_port_from_there() -> None:
    for module in (cronwire.adapters.embedded.kafka, cronwire.adapters.embedded.postgres,
                   cronwire.adapters.embedded.postgres_pair, cronwire.harness.fleet,
                   cronwire.harness.nginx_sink, cronwire.harness.sink_process,
                   tests.support.replicas):
        assert module.free_port is free_port, module.__name__


_CHOOSE_IN_A_NARROW_RANGE = """
import sys
from cronwire import loopback
loopback._LOWEST = 21_000
loopback.ephemeral_ports = lambda: range(22_001, 60_000)  # 1,001 ports to choose from
print(" ".join(str(loopback.free_port()) for _ in range(150)))
"""


def test_processes_choosing_at_once_never_get_the_same_port(tmp_path: Path) -> None:
    """The suite's workers and the harnesses they start choose ports at the same time, and
    a chosen port stays free until its server binds it. Two choosers of 150 ports each
    among 1,001 would share some 22 by chance alone; reserved machine-wide, none."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    choosers = [subprocess.Popen([sys.executable, "-c", _CHOOSE_IN_A_NARROW_RANGE], env=env,
                                 stdout=subprocess.PIPE, text=True) for _ in range(2)]
    chosen = [set(map(int, proc.communicate(timeout=60)[0].split())) for proc in choosers]
    assert [len(ports) for ports in chosen] == [150, 150]
    assert chosen[0].isdisjoint(chosen[1]), sorted(chosen[0] & chosen[1])
    assert len(list((tmp_path / f"cronwire-ports-{os.getuid()}").iterdir())) == 300


def test_a_reservation_lapses_after_its_time(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    port = free_port()
    held = reservations() / str(port)
    assert held.exists()
    loopback._handed_out.discard(port)  # as another process would see it
    assert not reserve_port(port)
    lapsed = time.time() - RESERVED_SECONDS - 1
    os.utime(held, (lapsed, lapsed))
    assert reserve_port(port)
    assert held.stat().st_mtime > lapsed
