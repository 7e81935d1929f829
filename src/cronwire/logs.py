"""Process logging: one JSON object per line (or plain text on a terminal), redacted.

``configure_logging`` installs one handler on the root logger, so every library that logs
through :mod:`logging` (uvicorn, asyncpg, aiohttp, ...) goes through the same formatter and
the same redaction. Call sites stay plain ``log.info(...)``; ids ride along with
``extra={"run_id": ..., "schedule_id": ..., "tenant_id": ..., "action": ...}``.

Redaction is a last line of defence applied to the finished line, whatever logged it:
API tokens (``cwt_...``), signing secrets (``whsec_...``), bearer credentials, passwords
in DSNs, values of ``headers`` mappings and of well-known credential headers, and any
literal registered with :func:`register_secret` (the configured DSN's password).
"""

from __future__ import annotations

import json
import logging
import re
import sys
from datetime import UTC, datetime
from typing import IO, Any
from urllib.parse import unquote, urlsplit

from cronwire.config import Settings

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
          "error": logging.ERROR}
MASK = "[redacted]"
# Fields copied from ``extra=`` into the JSON object when a call site gives them.
ID_FIELDS = ("run_id", "schedule_id", "tenant_id", "attempt", "instance_id", "target")

# Between a key and its value: optional (JSON-escaped) quotes around ``=`` or ``:``.
_SEP = r"((?:\\?['\"])?\s*[:=]\s*(?:\\?['\"])?)"
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # API tokens and webhook signing secrets, wherever they appear.
    (re.compile(r"cwt_[A-Za-z0-9_\-]+"), "cwt_" + MASK),
    (re.compile(r"whsec_[A-Za-z0-9+/=_\-]+"), "whsec_" + MASK),
    (re.compile(r"\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=\-]{8,}"), r"\1 " + MASK),
    # user:password@ in URLs (postgresql://, amqp://, http://...).
    (re.compile(r"([a-z][a-z0-9+.\-]*://[^/\s:@'\"]*):[^@\s/'\"]*@", re.IGNORECASE), r"\1:" + MASK + "@"),
    # key=value DSNs and config dumps: password=..., secret: ..., token='...'.
    (re.compile(r"(?i)\b(password|passwd|pwd|secret|token|api[_-]?key)" + _SEP + r"[^\s'\"\\,}&]+"),
     r"\1\2" + MASK),
    # A headers mapping, as a dict repr or JSON: its values are tenant secrets by default.
    (re.compile(r"(?i)(headers(?:\\?['\"])?\s*[:=]\s*)\{[^{}]*\}"), r"\1{" + MASK + "}"),
    # Credential-bearing header lines (Name: value) outside a mapping.
    (re.compile(r"(?i)\b(authorization|proxy-authorization|cookie|set-cookie|x-api-key|"
                r"webhook-signature)" + _SEP + r"[^\r\n'\"\\,}]+"), r"\1\2" + MASK),
)

_secrets: set[str] = set()


def register_secret(value: str | None) -> None:
    """Never print ``value`` (from 4 characters up: shorter ones would mask ordinary words)."""
    if value and len(value) >= 4:
        _secrets.add(value)


def redact(text: str) -> str:
    for literal in _secrets:
        if literal in text:
            text = text.replace(literal, MASK)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def _action(record: logging.LogRecord) -> str:
    given = getattr(record, "action", None)
    if isinstance(given, str) and given:
        return given
    return f"{record.name.rsplit('.', 1)[-1]}.{record.funcName}"


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "action", "message", "logger", ids..., "exc"}`` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "action": _action(record),
            # Redacted before JSON escaping too: patterns see the text as it was written.
            "message": redact(record.getMessage()),
            "logger": record.name,
        }
        for name in ID_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                entry[name] = str(value)
        if record.exc_info:
            entry["exc"] = redact(self.formatException(record.exc_info))
        return redact(json.dumps(entry, ensure_ascii=False, default=str))


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        ids = " ".join(f"{name}={getattr(record, name)}" for name in ID_FIELDS
                       if getattr(record, name, None) is not None)
        return redact(f"{line} [{ids}]" if ids else line)


def _dsn_password(dsn: str | None) -> str | None:
    if not dsn:
        return None
    try:
        password = urlsplit(dsn).password
    except ValueError:
        return None
    return unquote(password) if password else None


def configure_logging(settings: Settings, stream: IO[str] | None = None) -> None:
    """Replace the root handlers with one redacting handler on ``stream`` (stderr)."""
    out = stream or sys.stderr
    register_secret(_dsn_password(settings.database_url))
    register_secret(_dsn_password(settings.database_read_url))
    fmt = settings.log_format
    if fmt == "auto":
        fmt = "text" if out.isatty() else "json"
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(LEVELS[settings.log_level])


def warn_about_settings(settings: Settings) -> None:
    """Start-up warnings for settings that weaken a safeguard."""
    if settings.dev_mode:
        logging.getLogger("cronwire").warning(
            "dev mode (embedded database, API on loopback only): loopback and private "
            "targets are allowed; with SCHEDULER_DATABASE_URL set or SCHEDULER_HTTP_HOST off "
            "loopback they are refused unless SCHEDULER_ALLOW_PRIVATE_TARGETS=true",
            extra={"action": "startup.dev_mode"},
        )
    elif settings.allow_private_targets:
        logging.getLogger("cronwire").warning(
            "SCHEDULER_ALLOW_PRIVATE_TARGETS=true: the SSRF guard is off; targets on "
            "loopback, private and link-local addresses (cloud metadata included) are allowed",
            extra={"action": "startup.private_targets_allowed"},
        )
