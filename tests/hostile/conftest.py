"""Both deliverers against hostile receivers (ADR 0026): every test here that takes the
``deliverer`` fixture runs once with ``lean`` (the default) and once with ``httpx``."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from cronwire.adapters.http.guard import TargetGuard
from tests.support.deliverer_sink import ADAPTERS, Deliverer


@pytest.fixture(params=sorted(ADAPTERS))
async def deliverer(request: pytest.FixtureRequest) -> AsyncIterator[Deliverer]:
    adapter = ADAPTERS[request.param](TargetGuard(allow_private=True))
    await adapter.start()
    yield adapter
    await adapter.close()
