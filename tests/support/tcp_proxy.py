"""The loopback TCP proxy the tests cut, for database outages without stopping the shared
test server: the package's chaos proxy (one implementation, see cronwire.chaos.proxy).

``TcpProxy.for_dsn(dsn)`` and ``await proxy.start()``, then ``proxy.dsn(dsn)`` for the DSN
through it; ``cut()`` closes every connection and refuses new ones, ``restore()`` listens
on the same port again.
"""

from __future__ import annotations

from cronwire.chaos.proxy import ChaosProxy as TcpProxy

__all__ = ["TcpProxy"]
