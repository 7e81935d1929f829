"""The address guard both HTTP deliverers connect through.

A name is resolved once, every address it resolves to is checked, and the
caller connects only to the addresses returned here. Checking a name and then
letting the HTTP client resolve it again would let DNS answer differently the
second time (rebinding), so the checked list is the only list anyone uses.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from cronwire.domain.errors import InvalidTarget, TargetRefused
from cronwire.domain.netpolicy import (
    DEFAULT_PORTS,
    IPAddress,
    forbidden_reason,
    ip_address_of,
    parse_host_ip,
    validate_target_url,
)

Resolve = Callable[[str, int], Awaitable[list[str]]]
# Said with every refusal: what allows such a target, and why it is off by default.
PRIVATE_TARGETS_HINT = (
    "this server refuses such targets so that a tenant cannot reach the network it runs in "
    "(internal services, cloud metadata); its operator can allow them with "
    "SCHEDULER_ALLOW_PRIVATE_TARGETS=true (for development and tests)"
)
IsForbidden = Callable[[IPAddress], str | None]


async def system_resolve(host: str, port: int) -> list[str]:
    """The system resolver's addresses for ``host`` (order kept, duplicates dropped).

    Raises OSError (socket.gaierror) when the name does not resolve.
    """
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses: list[str] = []
    for _family, _type, _proto, _canon, sockaddr in infos:
        address = str(sockaddr[0])
        if address not in addresses:
            addresses.append(address)
    return addresses


class TargetGuard:
    """Resolves a target host once and refuses it if any address is forbidden.

    ``allow_private`` (``SCHEDULER_ALLOW_PRIVATE_TARGETS``) turns the refusal
    off for development and tests; resolution still happens once.
    """

    def __init__(
        self,
        allow_private: bool,
        resolve: Resolve | None = None,
        is_forbidden: IsForbidden = forbidden_reason,
        *,
        create_time_resolve_timeout: float = 5.0,
    ) -> None:
        self.allow_private = allow_private
        self._resolve = resolve or system_resolve
        self._is_forbidden = is_forbidden
        self._create_time_resolve_timeout = create_time_resolve_timeout

    def _check(self, host: str, ip: IPAddress) -> None:
        if self.allow_private:
            return
        reason = self._is_forbidden(ip)
        if reason is not None:
            raise TargetRefused(f"target.url: host {host!r} resolves to {ip}, {reason}; "
                                f"{PRIVATE_TARGETS_HINT}")

    async def resolve_checked(self, host: str, port: int) -> list[str]:
        """Addresses to connect to for ``host``, every one of them checked.

        An IP literal (any inet_aton spelling) is checked without DNS and
        returned in canonical form. Raises TargetRefused if any address is
        forbidden, and OSError if the name does not resolve (which at
        delivery time may be transient).
        """
        literal = parse_host_ip(host)
        if literal is not None:
            self._check(host, literal)
            return [str(literal)]
        answers = await self._resolve(host, port)
        if not answers:
            raise socket.gaierror(socket.EAI_NONAME, f"{host!r} resolved to no address")
        addresses = [ip_address_of(answer) for answer in answers]
        for ip in addresses:
            self._check(host, ip)
        return list(dict.fromkeys(answers))

    async def check_url(self, url: str) -> None:
        """Create-time validation: well-formed URL whose host may be delivered to.

        Raises InvalidTarget for a malformed URL and TargetRefused for a
        forbidden address or a name that does not resolve.
        """
        validate_target_url(url)
        parts = urlsplit(url)
        host = parts.hostname
        if host is None:  # validate_target_url already refused this
            raise InvalidTarget("target.url: missing host")
        port = parts.port or DEFAULT_PORTS[parts.scheme.lower()]
        if self.allow_private:
            return  # development mode: nothing is refused, not even names that resolve later
        try:
            async with asyncio.timeout(self._create_time_resolve_timeout):
                await self.resolve_checked(host, port)
        except (OSError, TimeoutError):
            raise TargetRefused(f"target.url: host {host!r} does not resolve") from None
