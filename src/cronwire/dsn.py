"""Postgres connection URLs, libpq style, with several hosts:
``postgresql://user@h1:5432,h2:5432/db?target_session_attrs=read-write``.

Pure string work (no driver): config.py validates a URL with it, and the connector
(connect.py) splits one into single-host URLs, so that each host gets a connect timeout of
its own. ``urlsplit`` cannot do either: it refuses a host list ("malformed port"), and
asyncpg, which accepts one, spends a single timeout on all hosts together (asyncpg issue
1155: a first host that drops packets eats the whole budget, the second is never tried).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, quote, unquote, urlencode

SCHEMES = frozenset({"postgresql", "postgres"})
# libpq's values, which asyncpg implements; "any" is libpq's default.
SESSION_ATTRS = ("any", "primary", "standby", "prefer-standby", "read-write", "read-only")
# Attributes that can land on a server that accepts writes.
WRITABLE_ATTRS = frozenset({"read-write", "primary"})
# Parameters the connector applies itself, host by host; asyncpg would send any parameter
# it does not know (connect_timeout is one) to the server as a setting, and fail.
CONNECTOR_PARAMS = frozenset({"target_session_attrs", "connect_timeout"})
_IPV6_HOST = re.compile(r"\[([^\]]*)\](?::(.*))?")
_BAD_HOST_CHARS = re.compile(r"[\s\x00-\x1f\x7f\[\]@]")


class DsnError(ValueError):
    """A URL that is not a Postgres connection URL; the message is one line."""


@dataclass(frozen=True, slots=True)
class Host:
    name: str  # as written (an IPv6 address keeps its brackets)
    port: int | None

    def __str__(self) -> str:
        return self.name if self.port is None else f"{self.name}:{self.port}"


@dataclass(frozen=True, slots=True)
class PostgresDsn:
    scheme: str
    userinfo: str  # "user" or "user:password", percent-encoded as written
    hosts: tuple[Host, ...]  # empty when the hosts are in a host= parameter
    path: str  # "/dbname" or ""
    params: tuple[tuple[str, str], ...]

    def param(self, name: str) -> str | None:
        found = [value for key, value in self.params if key == name]
        return found[-1] if found else None

    @property
    def target_session_attrs(self) -> str | None:
        return self.param("target_session_attrs")

    @property
    def connect_timeout(self) -> float | None:
        raw = self.param("connect_timeout")
        return None if raw is None else float(raw)

    @property
    def password(self) -> str | None:
        _user, colon, password = self.userinfo.partition(":")
        return unquote(password) if colon and password else None

    def _url(self, hosts: tuple[Host, ...], userinfo: str, path: str,
             params: tuple[tuple[str, str], ...]) -> str:
        netloc = ",".join(str(host) for host in hosts)
        at = f"{userinfo}@" if userinfo else ""
        query = f"?{urlencode(params)}" if params else ""
        return f"{self.scheme}://{at}{netloc}{path}{query}"

    def __str__(self) -> str:
        return self._url(self.hosts, self.userinfo, self.path, self.params)

    @property
    def host_count(self) -> int:
        return max(1, len(self.hosts))

    def for_host(self, index: int) -> str:
        """The URL of host ``index`` alone, without the parameters the connector applies
        itself. A URL whose hosts are in a host= parameter is one "host" for this."""
        params = tuple((k, v) for k, v in self.params if k not in CONNECTOR_PARAMS)
        hosts = self.hosts[index:index + 1] if self.hosts else ()
        return self._url(hosts, self.userinfo, self.path, params)

    def host_label(self, index: int) -> str:
        return str(self.hosts[index]) if self.hosts else "host= parameter"

    def with_database(self, name: str) -> str:
        return self._url(self.hosts, self.userinfo, "/" + quote(name, safe=""), self.params)

    def redacted(self) -> str:
        """The URL with its password shown as ``***`` (for messages)."""
        user, colon, _ = self.userinfo.partition(":")
        return self._url(self.hosts, f"{user}:***" if colon else user, self.path, self.params)


def _host(spec: str) -> Host:
    ipv6 = _IPV6_HOST.fullmatch(spec) if spec.startswith("[") else None
    if spec.startswith("["):
        if ipv6 is None:
            raise DsnError("malformed DSN: an IPv6 host needs [address]:port")
        try:
            ipaddress.IPv6Address(ipv6[1].split("%", 1)[0])
        except ValueError:
            raise DsnError(f"malformed DSN: {ipv6[1]!r} is not an IPv6 address") from None
        name, port_text = f"[{ipv6[1]}]", ipv6[2]
    else:
        name, colon, port_text = spec.partition(":")
        port_text = port_text if colon else None
        if not name or _BAD_HOST_CHARS.search(name):
            raise DsnError("malformed host in DSN")
    if port_text is None:
        return Host(name, None)
    if not port_text.isascii() or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise DsnError("malformed port in DSN")
    return Host(name, int(port_text))


def _check_params(params: tuple[tuple[str, str], ...]) -> None:
    for key, value in params:
        if key == "target_session_attrs" and value not in SESSION_ATTRS:
            raise DsnError(f"target_session_attrs must be one of {', '.join(SESSION_ATTRS)}, "
                           f"got {value!r}")
        if key == "connect_timeout":
            try:
                seconds = float(value)
            except ValueError:
                seconds = float("nan")
            if not 0 < seconds < float("inf"):
                raise DsnError(f"connect_timeout must be a number of seconds greater than 0, "
                               f"got {value!r}")


def parse_dsn(raw: str) -> PostgresDsn:
    """Parse a connection URL with one or several hosts; DsnError says what is wrong."""
    text = raw.strip()
    scheme, sep, rest = text.partition("://")
    if not sep or scheme.lower() not in SCHEMES:
        raise DsnError(f"must be a postgresql:// URL, got scheme {scheme if sep else ''!r}")
    rest = rest.partition("#")[0]
    cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    netloc, tail = rest[:cut], rest[cut:]
    path, _, query = tail.partition("?")
    userinfo, _, hostlist = netloc.rpartition("@")
    hosts = tuple(_host(spec) for spec in hostlist.split(",")) if hostlist else ()
    params = tuple(parse_qsl(query, keep_blank_values=True))
    _check_params(params)
    if not hosts and not any(key == "host" and value for key, value in params):
        raise DsnError("DSN names no host")
    return PostgresDsn(scheme.lower(), userinfo, hosts, path, params)
