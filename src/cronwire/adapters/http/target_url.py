"""A target URL as the HTTP adapters dial it: validated and parsed once per URL.

Many runs share a target URL, so the pure parsing and validation are cached (they were
~6% of an executor's CPU); the address policy itself is still applied to every new
connection through the TargetGuard.
"""

from __future__ import annotations

import functools

from yarl import URL

from cronwire.domain.netpolicy import DEFAULT_PORTS, parse_host_ip, validate_target_url


@functools.lru_cache(maxsize=8192)
def parse_target(raw_url: str) -> tuple[URL, int | None]:
    """The URL as dialled (parsed once: the host checked is the host dialled) and, when its
    host is an IP literal, the port to check it with. Raises InvalidTarget."""
    validate_target_url(raw_url)
    url = URL(raw_url)
    literal = parse_host_ip(url.raw_host or "") is not None
    return url, (url.port or DEFAULT_PORTS[url.scheme]) if literal else None
