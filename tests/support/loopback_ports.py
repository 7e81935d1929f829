"""Whether a test server answers on a loopback port. The ports themselves are chosen by
cronwire.loopback.free_port (below the kernel's range for outgoing connections; see there
why)."""

from __future__ import annotations

import socket


def answers(port: int) -> bool:
    """Whether something accepts connections on the loopback port."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False
