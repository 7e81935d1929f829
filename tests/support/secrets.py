"""The tests' SecretBox: the real envelope box with the harness key ring, over the test's
own database (sealed secrets, ADR 0061)."""

from __future__ import annotations

import asyncpg

from cronwire.bootstrap import factories
from cronwire.config import parse_key_ring
from cronwire.harness.fleet import HARNESS_SECRET_KEYS
from cronwire.ports.secrets import SecretBox

# Settings(secret_keys=...) of a replica or container a test builds by hand.
TEST_SECRET_KEYS = parse_key_ring("SCHEDULER_SECRET_KEYS", HARNESS_SECRET_KEYS)


def secret_box(pool: asyncpg.Pool) -> SecretBox:
    return factories.secret_box(pool, HARNESS_SECRET_KEYS)
