"""Which network addresses a delivery may reach, and which target URLs are well formed.

Pure: no DNS, no sockets. The HTTP adapters resolve names and ask
:func:`forbidden_reason` about every address they are about to connect to.

Host spellings are parsed the way the C library parses them (``inet_aton``
accepts ``2130706433``, ``0177.0.0.1``, ``0x7f.1`` and ``127.1`` for
127.0.0.1), because that is what a resolver or a socket call would do with
them; a policy that only understood dotted quads could be walked around.
"""

from __future__ import annotations

import functools
import re
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address
from urllib.parse import urlsplit

from cronwire.domain.errors import InvalidTarget

# The port a URL without one means, per scheme (the only schemes a target may use).
DEFAULT_PORTS = {"http": 80, "https": 443}

IPAddress = IPv4Address | IPv6Address

MAX_URL_LENGTH = 2048

# HTTP clients normalise non-ASCII hosts (IDNA/NFKC: "127。0。0。1" and
# fullwidth digits become 127.0.0.1) and some decode percent-escapes; the
# policy would judge a different host than the client dials. Only plain DNS
# characters are accepted, so every component sees the same host.
_NAME_HOST = re.compile(r"[a-z0-9_.-]+")
_ASCII_DIGITS = re.compile(r"[0-9]+")
_ASCII_HEX = re.compile(r"[0-9a-f]*")
_ASCII_OCTAL = re.compile(r"[0-7]+")

_V4_FORBIDDEN: tuple[tuple[IPv4Network, str], ...] = tuple(
    (IPv4Network(net), name)
    for net, name in (
        ("255.255.255.255/32", "broadcast"),
        ("0.0.0.0/8", "unspecified/this-network"),
        ("127.0.0.0/8", "loopback"),
        ("10.0.0.0/8", "private"),
        ("172.16.0.0/12", "private"),
        ("192.168.0.0/16", "private"),
        ("100.64.0.0/10", "carrier-grade NAT (shared)"),
        ("169.254.0.0/16", "link-local (includes cloud metadata 169.254.169.254)"),
        ("192.0.0.0/24", "IETF protocol assignments (reserved)"),
        ("192.0.2.0/24", "documentation (TEST-NET-1)"),
        ("198.51.100.0/24", "documentation (TEST-NET-2)"),
        ("203.0.113.0/24", "documentation (TEST-NET-3)"),
        ("192.88.99.0/24", "6to4 relay anycast (reserved)"),
        ("198.18.0.0/15", "benchmarking (reserved)"),
        ("224.0.0.0/4", "multicast"),
        ("240.0.0.0/4", "reserved"),
    )
)

_V6_FORBIDDEN: tuple[tuple[IPv6Network, str], ...] = tuple(
    (IPv6Network(net), name)
    for net, name in (
        ("::/128", "unspecified"),
        ("::1/128", "loopback"),
        ("64:ff9b:1::/48", "local-use NAT64 (private)"),
        ("100::/64", "discard-only (reserved)"),
        ("2001:db8::/32", "documentation"),
        ("3fff::/20", "documentation"),
        ("2001:2::/48", "benchmarking (reserved)"),
        ("2001:10::/28", "ORCHID (reserved)"),
        ("2001:20::/28", "ORCHIDv2 (reserved)"),
        ("5f00::/16", "SRv6 SIDs (reserved)"),
        ("fc00::/7", "unique-local"),
        ("fe80::/10", "link-local"),
        ("fec0::/10", "site-local (deprecated, private)"),
        ("ff00::/8", "multicast"),
    )
)

# IPv6 forms that carry an IPv4 address inside them: the embedded address is
# what a translator or tunnel finally reaches, so it is judged by the v4 table.
_V4_MAPPED = IPv6Network("::ffff:0:0/96")
_V4_COMPATIBLE = IPv6Network("::/96")
_NAT64 = IPv6Network("64:ff9b::/96")
_SIX_TO_FOUR = IPv6Network("2002::/16")
_GLOBAL_UNICAST = IPv6Network("2000::/3")


def _parse_v4_part(part: str) -> int | None:
    """One inet_aton component: decimal, octal (leading 0) or hex (0x)."""
    if not part:
        return None
    lowered = part.lower()
    if lowered.startswith("0x"):
        digits = lowered[2:]
        return int(digits or "0", 16) if _ASCII_HEX.fullmatch(digits) else None
    if len(lowered) > 1 and lowered.startswith("0"):
        return int(lowered[1:], 8) if _ASCII_OCTAL.fullmatch(lowered[1:]) else None
    return int(lowered, 10) if _ASCII_DIGITS.fullmatch(lowered) else None


def _parse_inet_aton(host: str) -> IPv4Address | None:
    parts = host.split(".")
    if len(parts) > 1 and parts[-1] == "":
        parts = parts[:-1]  # a fully-qualified trailing dot, as browsers accept
    if not 1 <= len(parts) <= 4 or any(len(p) > 64 for p in parts):
        return None
    values = [_parse_v4_part(p) for p in parts]
    if any(v is None for v in values):
        return None
    numbers = [v for v in values if v is not None]
    *leading, last = numbers
    if any(v > 255 for v in leading) or last >= 256 ** (5 - len(numbers)):
        return None
    value = 0
    for v in leading:
        value = (value << 8) | v
    value = (value << (8 * (5 - len(numbers)))) | last
    return IPv4Address(value)


@functools.lru_cache(maxsize=8192)  # pure, and on every delivery's path
def parse_host_ip(host: str) -> IPAddress | None:
    """The IP address a URL host denotes, or None when it is a name.

    Accepts bracketed or bare IPv6 (a zone id is dropped) and every IPv4
    spelling ``inet_aton`` accepts, including a trailing dot.
    """
    text = host.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    if ":" in text:
        try:
            return IPv6Address(text.split("%", 1)[0])
        except ValueError:
            return None
    return _parse_inet_aton(text)


def _embedded_v4(ip: IPv6Address) -> tuple[IPv4Address, str] | None:
    if ip in _V4_MAPPED:
        return IPv4Address(int(ip) & 0xFFFFFFFF), "IPv4-mapped"
    if ip in _V4_COMPATIBLE and int(ip) > 1:
        return IPv4Address(int(ip) & 0xFFFFFFFF), "IPv4-compatible"
    if ip in _NAT64:
        return IPv4Address(int(ip) & 0xFFFFFFFF), "NAT64"
    if ip.sixtofour is not None:
        return ip.sixtofour, "6to4"
    return None


def _v4_reason(ip: IPv4Address) -> str | None:
    for net, name in _V4_FORBIDDEN:
        if ip in net:
            return f"{name} ({net})"
    if not ip.is_global:  # a range added to the registry after this table was written
        return "not globally routable"
    return None


def forbidden_reason(ip: IPAddress) -> str | None:
    """Why a delivery must not connect to ``ip`` (naming the range), or None if allowed."""
    if isinstance(ip, IPv4Address):
        return _v4_reason(ip)
    ip = IPv6Address(int(ip))  # drop any zone id
    embedded = _embedded_v4(ip)
    if embedded is not None:
        inner, form = embedded
        reason = _v4_reason(inner)
        return None if reason is None else f"{form} address embedding {inner}: {reason}"
    teredo = ip.teredo
    if teredo is not None:
        for inner in teredo:
            reason = _v4_reason(inner)
            if reason is not None:
                return f"Teredo address embedding {inner}: {reason}"
    for net, name in _V6_FORBIDDEN:
        if ip in net:
            return f"{name} ({net})"
    if ip not in _GLOBAL_UNICAST:
        return f"reserved (outside global unicast {_GLOBAL_UNICAST})"
    return None


def validate_target_url(url: str) -> str:
    """Check that ``url`` is an absolute http(s) URL we are willing to call; return it.

    Raises InvalidTarget naming the problem. Address policy (private ranges)
    needs DNS and lives in the HTTP adapters' guard.
    """
    if len(url) > MAX_URL_LENGTH:
        raise InvalidTarget(f"target.url: longer than {MAX_URL_LENGTH} characters")
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in url):
        raise InvalidTarget("target.url: contains whitespace or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InvalidTarget(f"target.url: malformed URL: {exc}") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise InvalidTarget("target.url: scheme must be http or https")
    if "@" in parts.netloc:
        raise InvalidTarget("target.url: credentials (userinfo) are not allowed in the URL")
    if not parts.hostname:
        raise InvalidTarget("target.url: missing host")
    if port == 0:
        raise InvalidTarget("target.url: port 0 is not allowed")
    if "#" in url:
        raise InvalidTarget("target.url: fragments are not allowed")
    if ":" in parts.hostname:
        if "%" in parts.hostname or parse_host_ip(parts.hostname) is None:
            raise InvalidTarget("target.url: malformed IPv6 host")
    elif not _NAME_HOST.fullmatch(parts.hostname):
        raise InvalidTarget(
            "target.url: host may contain only ASCII letters, digits, '.', '-' and '_'"
            " (write internationalised names in punycode)"
        )
    return url


def ip_address_of(text: str) -> IPAddress:
    """Parse a resolver's answer (a canonical address, maybe with a zone id)."""
    return ip_address(text.split("%", 1)[0])
