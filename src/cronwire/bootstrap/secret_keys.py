"""Where a replica's key ring comes from (ADR 0061), and what start-up does with
it before anything is delivered: prove it opens the stored data keys, then seal whatever
was stored in clear before sealing began."""

from __future__ import annotations

import base64
import dataclasses
import logging
import os
import secrets
import time
from pathlib import Path

from cronwire.bootstrap.container import Container, resolved
from cronwire.config import PREFIX, Settings, parse_key_ring
from cronwire.domain.errors import ConfigError
from cronwire.service.secret_keys import prove_key_ring

log = logging.getLogger("cronwire")

SECRET_KEYS_FILE_NAME = "secret-keys"
MISSING = (f"{PREFIX}SECRET_KEYS: required with {PREFIX}DATABASE_URL (tenant secrets are "
           "sealed at rest): set KEY_ID:BASE64 of 32 random bytes, e.g. "
           "k1:$(openssl rand -base64 32), or name a file in SCHEDULER_SECRET_KEYS_FILE")


def with_key_ring(settings: Settings) -> Settings:
    """The settings with a key ring: the configured one; on the embedded database with
    none, the one in ``$SCHEDULER_HOME/secret-keys``, generated there (0600) the first time
    and said once. A configured database without one is a ConfigError naming the variable."""
    if settings.secret_keys:
        return settings
    if not settings.embedded_database:
        raise ConfigError(MISSING)
    path = settings.home / SECRET_KEYS_FILE_NAME
    if not path.exists():
        _generate(path)
        log.info("generated a secret key ring into %s (mode 0600; no SCHEDULER_SECRET_KEYS): "
                 "back it up with the embedded database, which cannot deliver without it", path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{PREFIX}SECRET_KEYS: cannot read {path}: {exc}") from None
    return dataclasses.replace(settings, secret_keys=parse_key_ring(str(path), text))


def _generate(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    entry = f"dev{time.strftime('%Y%m%d')}:{base64.b64encode(secrets.token_bytes(32)).decode()}\n"
    try:  # O_EXCL: two processes starting at once never overwrite each other's key
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    except OSError as exc:
        raise ConfigError(f"{PREFIX}HOME: cannot write the key ring {path}: {exc}") from None
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(entry)


async def open_sealed_secrets(container: Container, settings: Settings) -> None:
    """Before any loop starts: refuse a key ring that cannot open the stored data keys
    (ConfigError, exit 2), then seal what is stored in clear (idempotent, batched)."""
    if not settings.secret_keys:
        raise ConfigError(MISSING)
    data_keys = await resolved(container.data_key_store)
    await prove_key_ring(container.key_ring(), data_keys)
    sealed = await (await resolved(container.sealing_pass)).run()
    if sealed:
        log.info("sealed the secrets of %d stored rows written before sealing (ADR 0061)",
                 sealed)
