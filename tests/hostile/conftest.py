"""Both deliverers against hostile receivers (ADR 0026): every test here that takes the
``deliverer`` fixture runs once with ``lean`` (the default) and once with ``httpx``."""

from tests.support.deliverer_sink import deliverer_fixture  # noqa: F401
