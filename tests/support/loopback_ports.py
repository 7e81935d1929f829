"""Loopback ports for test servers: the choice is cronwire.loopback's (below the kernel's
range for outgoing connections; see there why)."""

from __future__ import annotations

import socket

from cronwire.loopback import ephemeral_ports, free_port

__all__ = ["answers", "ephemeral_ports", "free_port"]


def answers(port: int) -> bool:
    """Whether something accepts connections on the loopback port."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False
