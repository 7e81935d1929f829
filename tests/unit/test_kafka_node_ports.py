"""The ports the Apache Kafka test cluster gives its nodes lie below the kernel's range
for outgoing connections: a node binds its port seconds after it was chosen (and again
after a restart), and a port from that range can meanwhile be the local end of any
connection the suite opens; a full run once lost its three-node cluster at start so."""

from __future__ import annotations

import socket

from tests.support.loopback_ports import ephemeral_ports, free_port_below_ephemeral


def test_node_ports_are_distinct_free_and_outside_the_ephemeral_range() -> None:
    ephemeral = ephemeral_ports()
    taken: set[int] = set()
    ports = [free_port_below_ephemeral(taken) for _ in range(12)]  # a three-node cluster takes six
    assert len(set(ports)) == len(ports)
    assert taken == set(ports)
    for port in ports:
        assert port not in ephemeral, (port, ephemeral)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", port))  # still free: nothing kept it
