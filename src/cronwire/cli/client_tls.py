"""Tenant flags for a target's client certificate (mTLS, ADR 0061): `schedules
create|update --client-certificate FILE --client-key FILE`, and `--no-client-certificate`
on update. The files are read here and sent as `target.tls`; the API checks the PEM, that
the key is the certificate's and that it has not expired (its 422 names the field)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cronwire.domain.errors import ConfigError

# Flags (argparse dests) that change target.tls.
TLS_FLAGS = frozenset({"client_certificate", "client_key", "no_client_certificate"})


def add_tls_flags(parser: argparse.ArgumentParser, *, creating: bool) -> None:
    keep = " (default: none)" if creating else " (default: unchanged)"
    parser.add_argument("--client-certificate", metavar="FILE",
                        help="PEM certificate (chain) presented to a receiver that requires "
                        "mTLS; with --client-key" + keep)
    parser.add_argument("--client-key", metavar="FILE",
                        help="PEM private key of --client-certificate, unencrypted; sealed "
                        "at rest, never shown again")
    if not creating:
        parser.add_argument("--no-client-certificate", action="store_true",
                            help="remove the target's client certificate")


def tls_fields(args: argparse.Namespace) -> dict[str, Any]:
    """``{"tls": {...}}`` from the files, ``{"tls": None}`` to remove it, or nothing."""
    certificate, key = args.client_certificate, args.client_key
    removing = getattr(args, "no_client_certificate", False)
    if removing and (certificate or key):
        raise ConfigError("--no-client-certificate: not with --client-certificate or "
                          "--client-key")
    if removing:
        return {"tls": None}
    if certificate is None and key is None:
        return {}
    if certificate is None or key is None:
        raise ConfigError("--client-certificate and --client-key go together")
    return {"tls": {"client_certificate": _read("--client-certificate", certificate),
                    "client_key": _read("--client-key", key)}}


def _read(flag: str, path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{flag}: cannot read {path}: {exc}") from None
