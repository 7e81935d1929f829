"""The chaos suites' shared fixtures: a receiver in the test process, and a set of real
``cronwire serve`` replicas logging into the test's directory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cronwire.harness.sink import Sink
from tests.support.replicas import ReplicaSet


@pytest.fixture
async def sink() -> AsyncIterator[Sink]:
    async with Sink() as running:
        yield running


@pytest.fixture
async def fleet(database_url: str, tmp_path: Path) -> AsyncIterator[ReplicaSet]:
    async with ReplicaSet(database_url, log_dir=tmp_path) as replicas:
        yield replicas
