"""A target URL as the deliverers dial it, shared by them (adapters/http)."""

from __future__ import annotations

from yarl import URL

from cronwire.domain.netpolicy import DEFAULT_PORTS, parse_host_ip, validate_target_url


def parse_target(raw_url: str) -> tuple[URL, int | None]:
    """The URL as dialled (parsed once: the host checked is the host dialled) and, when its
    host is an IP literal, the port to check it with. Raises InvalidTarget."""
    validate_target_url(raw_url)
    url = URL(raw_url)
    literal = parse_host_ip(url.raw_host or "") is not None
    return url, (url.port or DEFAULT_PORTS[url.scheme]) if literal else None
