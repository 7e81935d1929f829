"""The ports we give the servers we start (embedded Postgres and broker, replicas, sinks,
the Kafka test cluster) lie below the kernel's range for outgoing connections: such a
server binds its port a second or more after it was chosen (and again after a restart),
and a port from that range can meanwhile be the local end of any connection the suite
opens. A full run once lost its three-node cluster at start so, and CI a replica
(`cronwire serve` exiting with "SCHEDULER_HTTP_PORT … is already in use")."""

from __future__ import annotations

import socket

import cronwire.adapters.embedded.kafka
import cronwire.adapters.embedded.postgres
import cronwire.adapters.embedded.postgres_pair
import cronwire.harness.fleet
import cronwire.harness.nginx_sink
import cronwire.harness.sink_process
import tests.support.replicas
from cronwire.loopback import ephemeral_ports, free_port


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
