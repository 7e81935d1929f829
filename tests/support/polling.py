"""The one way tests wait for something with no event to await: poll a condition with a
deadline (never a bare sleep)."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable

import asyncpg

Condition = Callable[[], object] | Callable[[], Awaitable[object]]


async def wait_until(condition: Condition, within: float = 10.0, every: float = 0.05,
                     saw: Condition | None = None) -> None:
    """Return once ``condition()`` (sync or async) is truthy; after ``within`` seconds a
    TimeoutError naming the condition and what it last returned, and ``saw()`` (sync or
    async: the counts that say how far it got) when given."""
    last: object = None
    try:
        async with asyncio.timeout(within):
            while True:
                last = condition()
                if inspect.isawaitable(last):
                    last = await last
                if last:
                    return
                await asyncio.sleep(every)
    except TimeoutError:
        seen = await _value(saw) if saw is not None else None
        raise TimeoutError(_timed_out(condition, within, last, seen)) from None


async def dead_clients_statements_ended(pool: asyncpg.Pool, within: float = 15) -> None:
    """Postgres finishes a statement whose client was killed (and commits or rolls it back)
    after the kill: until then a read sees its rows as they were. A killed replica's result
    write in flight could land after the test had counted its leases as orphans (a full
    run on 2026-12-06: 73 orphans counted, 9 of them then ended by the victim's own
    write). So wait until no other client session of this database is busy."""
    async def quiet() -> bool:
        busy: int = await pool.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND backend_type = 'client backend' AND pid <> pg_backend_pid() "
            "AND state IS DISTINCT FROM 'idle'")
        return busy == 0

    await wait_until(quiet, within, saw=lambda: pool.fetch(
        "SELECT pid, state, application_name, left(query, 60) AS query FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid()"))


async def _value(probe: Condition) -> object:
    try:
        value = probe()
        return await value if inspect.isawaitable(value) else value
    except Exception as exc:  # the report must not hide the timeout
        return f"(could not tell: {exc!r})"


def _timed_out(condition: Callable[..., object], within: float, last: object,
               seen: object) -> str:
    name = getattr(condition, "__qualname__", repr(condition))
    message = f"{name} not met within {within:g}s (last returned {last!r})"
    return message if seen is None else f"{message}; saw {seen}"


def wait_until_sync(condition: Callable[[], object], within: float = 10.0,
                    every: float = 0.05, saw: Callable[[], object] | None = None) -> None:
    """The same for code outside an event loop (processes, files)."""
    deadline = time.monotonic() + within
    while not (last := condition()):
        if time.monotonic() > deadline:
            raise TimeoutError(_timed_out(condition, within, last,
                                          saw() if saw is not None else None))
        time.sleep(every)
