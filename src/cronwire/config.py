"""Settings: every variable of CONTRACT.md, from the environment and optionally a TOML file.

Precedence: environment > TOML file (``SCHEDULER_CONFIG_FILE``, or ``config/cronwire.toml``
when it exists) > defaults. Keys in the TOML file are the variable names without the
``SCHEDULER_`` prefix, in lower case (``planner_batch = 500``) or verbatim.

A bad value raises :class:`ConfigError` whose message names the variable; the CLI prints
that one line and exits 2. Nothing here performs I/O at import time.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import ipaddress
import os
import re
import socket
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, TypeVar

from cronwire.domain.errors import ConfigError
from cronwire.dsn import WRITABLE_ATTRS, DsnError, parse_dsn

PREFIX = "SCHEDULER_"
ROLES = frozenset({"api", "planner", "executor"})
CLAIM_SOURCES = frozenset({"postgres", "kafka"})
DELIVERERS = frozenset({"httpx", "lean"})  # ADR 0026: the default and one mainstream client
LOG_LEVELS = frozenset({"debug", "info", "warning", "error"})
LOG_FORMATS = frozenset({"auto", "json", "text"})
DEFAULT_CONFIG_FILE = Path("config/cronwire.toml")
DEFAULT_HTTP_HOST = "127.0.0.1"

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Settings:
    database_url: str | None = None
    database_read_url: str | None = None  # a hot standby for the history API's reads
    read_max_lag_seconds: float = 5.0
    home: Path = Path("./.cronwire")
    http_host: str = DEFAULT_HTTP_HOST
    http_port: int = 8080
    roles: frozenset[str] = frozenset({"api", "planner", "executor"})
    instance_id: str = ""
    claim_source: str = "postgres"
    kafka_bootstrap_servers: str | None = None
    kafka_topic: str = "cronwire.runs"
    kafka_partitions: int = 12
    kafka_replication_factor: int | None = None  # None: 3, or the number of brokers if fewer
    kafka_consumer_group: str = "cronwire-executors"
    kafka_sweep_grace_seconds: float = 5.0
    planner_tick_seconds: float = 1.0
    planner_lookahead_seconds: float = 5.0
    planner_batch: int = 500
    executor_workers: int = 256
    executor_batch: int = 500
    delivery_timeout_seconds: float = 10.0
    deliverer: str = "lean"  # ADRs 0012, 0026: fastest; same contract and guard as httpx
    allow_private_targets: bool = False
    auto_migrate: bool = True
    shutdown_grace_seconds: float = 20.0
    retention_months: int = 3
    # Alert events, audit log rows and schedule revisions are deleted this many days after
    # they were made.
    audit_retention_days: int = 400
    tenant_max_schedules: int = 100_000
    tenant_min_interval_seconds: int = 1
    tenant_max_body_bytes: int = 65_536
    tenant_max_headers: int = 32
    tenant_max_concurrency: int | None = None  # None: unlimited (ADR 0040)
    tenant_max_pending_runs: int = 100_000  # runs not yet ended (domain/volume.py)
    api_rate_per_second: float = 50.0  # per tenant, per replica; burst 2x (domain/rate_limit.py)
    api_max_request_bytes: int = 262_144
    # POST /v1/schedules/apply carries up to 10,000 schedules (ADR 0057).
    api_max_apply_bytes: int = 33_554_432
    db_pool_size: int = 10
    # The API's own pool (and its read pool on a standby): API load never waits for, nor
    # delays, the connections of claims, lease renewals and result writes.
    api_db_pool_size: int = 5
    log_level: str = "info"
    log_format: str = "auto"
    # Alerts: how often each replica checks for late schedules and sends due
    # alert events, and the first retry backoff of an alert delivery.
    alert_check_seconds: float = 5.0
    alert_retry_initial_seconds: float = 10.0
    # Sealed secrets (ADR 0061): (key id, 32 bytes) entries, the sealing key first. From
    # SCHEDULER_SECRET_KEYS or the file SCHEDULER_SECRET_KEYS_FILE names; never shown.
    secret_keys: tuple[tuple[str, bytes], ...] = dataclasses.field(default=(), repr=False)
    secret_keys_file: Path | None = None
    # Not a variable: set by load_settings when the embedded database serves an API on
    # loopback only and SCHEDULER_ALLOW_PRIVATE_TARGETS is unset; private targets are then
    # allowed (ADR 0037). A Settings built by hand is never in dev mode.
    dev_mode: bool = False

    @property
    def lease_seconds(self) -> float:
        """A lease outlives one attempt by a factor of two (seed ADR)."""
        return 2 * self.delivery_timeout_seconds

    @property
    def embedded_database(self) -> bool:
        return self.database_url is None

    @property
    def embedded_broker(self) -> bool:
        """Kafka mode with no SCHEDULER_KAFKA_BOOTSTRAP_SERVERS: serve starts tansu."""
        return self.claim_source == "kafka" and self.kafka_bootstrap_servers is None


def _positive_int(name: str, raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name}: expected a whole number, got {raw!r}") from None
    if value <= 0:
        raise ConfigError(f"{name}: must be greater than 0, got {value}")
    return value


def _port(name: str, raw: str) -> int:
    value = _positive_int(name, raw)
    if value > 65535:
        raise ConfigError(f"{name}: must be a TCP port 1..65535, got {value}")
    return value


def _positive_float(name: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name}: expected a number of seconds, got {raw!r}") from None
    if not value > 0 or value != value or value == float("inf"):
        raise ConfigError(f"{name}: must be a finite number greater than 0, got {raw!r}")
    return value


# Beyond this a rate limit limits nothing; the harnesses use it to switch the limit off.
MAX_API_RATE_PER_SECOND = 1_000_000_000.0


def _rate_per_second(name: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name}: expected a number of requests per second, got {raw!r}") from None
    if not 0 < value <= MAX_API_RATE_PER_SECOND:  # NaN fails both comparisons
        raise ConfigError(f"{name}: must be greater than 0 and at most "
                          f"{MAX_API_RATE_PER_SECOND:.0f}, got {raw!r}")
    return value


def _non_negative_float(name: str, raw: str) -> float:
    if raw.strip() in {"0", "0.0"}:
        return 0.0
    return _positive_float(name, raw)


# The planner writes catch-up runs up to 7 days back (domain.planning.RECORD_HORIZON), so
# last month's partition must outlive retention: one month would drop it on the 1st.
MIN_RETENTION_MONTHS = 2
# The keeper keeps two months of partitions ahead; a lookahead of a day never outruns them.
MAX_LOOKAHEAD_SECONDS = 86_400.0


def _max_pending_runs(name: str, raw: str) -> int:
    value = _positive_int(name, raw)
    if value > 2**31 - 1:  # tenant.max_pending_runs is an integer column, and a LIMIT
        raise ConfigError(f"{name}: must be at most {2**31 - 1}, got {value}")
    return value


def _retention_months(name: str, raw: str) -> int:
    value = _positive_int(name, raw)
    if value < MIN_RETENTION_MONTHS:
        raise ConfigError(
            f"{name}: must be at least {MIN_RETENTION_MONTHS} (this month and last month, "
            f"which catch-up runs up to 7 days back are written to), got {value}")
    return value


# A century: far enough for any policy, near enough that now() minus it is a timestamp.
MAX_AUDIT_RETENTION_DAYS = 36_500


def _audit_retention_days(name: str, raw: str) -> int:
    value = _positive_int(name, raw)
    if value > MAX_AUDIT_RETENTION_DAYS:
        raise ConfigError(f"{name}: must be at most {MAX_AUDIT_RETENTION_DAYS} days, got {value}")
    return value


def _lookahead_seconds(name: str, raw: str) -> float:
    value = _non_negative_float(name, raw)
    if value > MAX_LOOKAHEAD_SECONDS:
        raise ConfigError(f"{name}: must be at most {MAX_LOOKAHEAD_SECONDS:g} seconds, got {raw!r}")
    return value


def _bool(name: str, raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ConfigError(f"{name}: expected true or false, got {raw!r}")


def _choice(allowed: frozenset[str]) -> Callable[[str, str], str]:
    def parse(name: str, raw: str) -> str:
        value = raw.strip().lower()
        if value not in allowed:
            options = ", ".join(sorted(allowed))
            raise ConfigError(f"{name}: must be one of {options}, got {raw!r}")
        return value

    return parse


def _roles(name: str, raw: str) -> frozenset[str]:
    roles = frozenset(part.strip().lower() for part in raw.split(",") if part.strip())
    unknown = roles - ROLES
    if not roles or unknown:
        # repr: a value with a line break must still make a one-line error
        bad = ", ".join(repr(role) for role in sorted(unknown)) or "(empty)"
        raise ConfigError(f"{name}: unknown role {bad}; choose from api, planner, executor")
    return roles


def _dsn(name: str, raw: str) -> str:
    """A connection URL, libpq style, with one host or several (pure parsing, dsn.py)."""
    value = raw.strip()
    try:
        parse_dsn(value)
    except DsnError as exc:
        raise ConfigError(f"{name}: {exc}") from None
    return value


def _primary_dsn(name: str, raw: str) -> str:
    """The URL every write uses: its target_session_attrs must be able to reach a primary
    (the pool connects with read-write unless it says primary, see connect.py)."""
    value = _dsn(name, raw)
    attrs = parse_dsn(value).target_session_attrs
    if attrs is not None and attrs not in WRITABLE_ATTRS | {"any"}:
        raise ConfigError(f"{name}: target_session_attrs={attrs} never reaches the primary; "
                          "use read-write, primary or any")
    return value


def _text(name: str, raw: str) -> str:
    value = raw.strip()
    if not value:
        raise ConfigError(f"{name}: must not be empty")
    return value


def _bootstrap(name: str, raw: str) -> str:
    value = _text(name, raw)
    for server in value.split(","):
        host, sep, port = server.strip().rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ConfigError(f"{name}: expected host:port[,host:port...], got {raw!r}")
    return value


def _replication_factor(name: str, raw: str) -> int:
    value = _positive_int(name, raw)
    if value > 32767:  # an INT16 in the protocol
        raise ConfigError(f"{name}: at most 32767, got {value}")
    return value


KEY_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
SECRET_KEY_BYTES = 32


def parse_key_ring(name: str, raw: str) -> tuple[tuple[str, bytes], ...]:
    """``KEY_ID:BASE64`` entries, comma- or line-separated; each a 32-byte key under a
    distinct id. A message names the variable and the entry's position, never its bytes."""
    entries: list[tuple[str, bytes]] = []
    for position, entry in enumerate(
            (e.strip() for e in re.split(r"[,\n]", raw) if e.strip()), start=1):
        key_id, sep, encoded = entry.partition(":")
        if not sep or not KEY_ID.fullmatch(key_id):
            raise ConfigError(f"{name}: entry {position} is not KEY_ID:BASE64 (KEY_ID of "
                              "letters, digits, '.', '_', '-', at most 64)")
        try:
            key = base64.b64decode(encoded.strip() + "=" * (-len(encoded.strip()) % 4),
                                   altchars=b"-_" if "-" in encoded or "_" in encoded else None,
                                   validate=True)
        except (binascii.Error, ValueError):
            raise ConfigError(f"{name}: key {key_id!r} is not base64") from None
        if len(key) != SECRET_KEY_BYTES:
            raise ConfigError(f"{name}: key {key_id!r} is {len(key)} bytes; a key is "
                              f"{SECRET_KEY_BYTES} random bytes (`openssl rand -base64 32`)")
        if any(key_id == seen for seen, _ in entries):
            raise ConfigError(f"{name}: key id {key_id!r} appears twice")
        entries.append((key_id, key))
    if not entries:
        raise ConfigError(f"{name}: no key in it")
    return tuple(entries)


def _key_ring_file(name: str, raw: str) -> Path:
    return Path(raw)


def _key_ring_from_file(path: Path) -> tuple[tuple[str, bytes], ...]:
    variable = f"{PREFIX}SECRET_KEYS_FILE"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, ValueError) as exc:  # ValueError: undecodable, or a NUL in the path
        # The path as a literal: one line, whatever characters the variable held.
        raise ConfigError(f"{variable}: cannot read {str(path)!r}: "
                          f"{getattr(exc, 'strerror', None) or exc}") from None
    return parse_key_ring(variable, text)


_PARSERS: dict[str, Callable[[str, str], Any]] = {
    "database_url": _primary_dsn,
    "database_read_url": _dsn,
    "read_max_lag_seconds": _positive_float,
    "home": lambda _n, raw: Path(raw),
    "http_host": _text,
    "http_port": _port,
    "roles": _roles,
    "instance_id": _text,
    "claim_source": _choice(CLAIM_SOURCES),
    "kafka_bootstrap_servers": _bootstrap,
    "kafka_topic": _text,
    "kafka_partitions": _positive_int,
    "kafka_replication_factor": _replication_factor,
    "kafka_consumer_group": _text,
    "kafka_sweep_grace_seconds": _non_negative_float,
    "planner_tick_seconds": _positive_float,
    "planner_lookahead_seconds": _lookahead_seconds,
    "planner_batch": _positive_int,
    "executor_workers": _positive_int,
    "executor_batch": _positive_int,
    "delivery_timeout_seconds": _positive_float,
    "deliverer": _choice(DELIVERERS),
    "allow_private_targets": _bool,
    "auto_migrate": _bool,
    "shutdown_grace_seconds": _non_negative_float,
    "retention_months": _retention_months,
    "audit_retention_days": _audit_retention_days,
    "tenant_max_schedules": _positive_int,
    "tenant_min_interval_seconds": _positive_int,
    "tenant_max_body_bytes": _positive_int,
    "tenant_max_headers": _positive_int,
    "tenant_max_concurrency": _positive_int,
    "tenant_max_pending_runs": _max_pending_runs,
    "api_rate_per_second": _rate_per_second,
    "api_max_request_bytes": _positive_int,
    "api_max_apply_bytes": _positive_int,
    "db_pool_size": _positive_int,
    "api_db_pool_size": _positive_int,
    "log_level": _choice(LOG_LEVELS),
    "log_format": _choice(LOG_FORMATS),
    "alert_check_seconds": _positive_float,
    "alert_retry_initial_seconds": _positive_float,
    "secret_keys": parse_key_ring,
    "secret_keys_file": _key_ring_file,
}


def _read_toml(path: Path) -> dict[str, str]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:  # not UTF-8: a bad file too
        raise ConfigError(f"{PREFIX}CONFIG_FILE: cannot read {path}: {exc}") from None
    values: dict[str, str] = {}
    for key, value in data.items():
        field = key.lower().removeprefix(PREFIX.lower())
        if field not in _PARSERS:
            raise ConfigError(f"{PREFIX}CONFIG_FILE: unknown key {key!r} in {path}")
        if isinstance(value, list):
            value = ",".join(str(v) for v in value)
        values[field] = str(value).lower() if isinstance(value, bool) else str(value)
    return values


def default_instance_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def load_settings(
    environ: Mapping[str, str] | None = None, config_file: Path | None = None
) -> Settings:
    """Build :class:`Settings`; raises :class:`ConfigError` naming the bad variable."""
    env = os.environ if environ is None else environ
    raw: dict[str, str] = {}
    file_name = env.get(f"{PREFIX}CONFIG_FILE")
    path = config_file or (Path(file_name) if file_name else None)
    if path is None and DEFAULT_CONFIG_FILE.is_file():
        path = DEFAULT_CONFIG_FILE
    if path is not None:
        raw.update(_read_toml(path))
    for field in _PARSERS:
        value = env.get(PREFIX + field.upper())
        if value is not None and value != "":
            raw[field] = value
    values: dict[str, Any] = {}
    for field, text in raw.items():
        values[field] = _PARSERS[field](PREFIX + field.upper(), text)
    values.setdefault("instance_id", default_instance_id())
    if "secret_keys_file" in values:
        if "secret_keys" in values:
            raise ConfigError(f"{PREFIX}SECRET_KEYS_FILE: set it or {PREFIX}SECRET_KEYS, "
                              "not both")
        values["secret_keys"] = _key_ring_from_file(values["secret_keys_file"])
    if "allow_private_targets" not in values and _dev_mode(values):
        values.update(allow_private_targets=True, dev_mode=True)
    settings = Settings(**values)
    _check_consistency(settings)
    return settings


def is_loopback_host(host: str) -> bool:
    """True for a listen address only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _dev_mode(values: Mapping[str, Any]) -> bool:
    """Dev mode (ADR 0037): the embedded database (no SCHEDULER_DATABASE_URL) and an API
    that only this machine can reach. Whoever can call that API can already reach every
    address this machine can, so allowing private targets gives a tenant nothing new; a
    database of its own or a non-loopback listen address is a deployment, where they stay
    refused unless SCHEDULER_ALLOW_PRIVATE_TARGETS=true."""
    host = values.get("http_host", DEFAULT_HTTP_HOST)
    return values.get("database_url") is None and is_loopback_host(str(host))


def _check_consistency(settings: Settings) -> None:
    if settings.executor_batch < 1 or settings.executor_workers < 1:
        raise ConfigError(f"{PREFIX}EXECUTOR_WORKERS: must be at least 1")
    if settings.database_read_url is not None and settings.database_url is None:
        raise ConfigError(f"{PREFIX}DATABASE_READ_URL: needs {PREFIX}DATABASE_URL (the "
                          "embedded database has no standby to read from)")


# Defaults that are not a plain value, worded as CONTRACT.md words them.
_DEFAULT_TEXT = {
    "database_url": "unset: embedded Postgres in SCHEDULER_HOME",
    "database_read_url": "unset: the primary serves every read",
    "kafka_bootstrap_servers": "unset: embedded broker (kafka mode)",
    "kafka_replication_factor": "3, or the number of brokers if fewer",
    "tenant_max_concurrency": "unlimited",
    "home": "./.cronwire",
    "instance_id": "<hostname>-<pid>",
    "secret_keys": "unset: required with SCHEDULER_DATABASE_URL; the embedded database "
                   "generates one into SCHEDULER_HOME/secret-keys",
    "secret_keys_file": "unset: SCHEDULER_SECRET_KEYS",
    "allow_private_targets": "unset: true in dev mode (embedded database, API on loopback), "
                             "else false",
}


def _readable(value: object) -> str:
    """A default as a user would type it: no Python reprs (frozenset, None, True)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, frozenset):
        order = ["api", "planner", "executor"]
        return ",".join(sorted(value, key=lambda v: (order.index(v) if v in order else 99, v)))
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return "unset" if value is None else str(value)


def describe() -> list[tuple[str, str]]:
    """(variable, default) pairs, for ``--help`` texts and the README."""
    defaults = Settings()
    return [
        (PREFIX + f.name.upper(),
         _DEFAULT_TEXT.get(f.name) or _readable(getattr(defaults, f.name)))
        for f in fields(Settings)
        if f.name in _PARSERS
    ]


def shown_dsn(dsn: str) -> str:
    """A DSN fit for a message or a log line, every host of it: the password masked, the
    query (which may name key files or hold a password too) dropped."""
    try:
        shown = parse_dsn(dsn).redacted()
    except DsnError:  # not a URL we read: say nothing of it that could be a secret
        return "(an unreadable URL)"
    return shown.partition("?")[0]
