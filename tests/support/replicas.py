"""The tests' fleet: the harness fleet (cronwire.harness.fleet) with the defaults the
tests share. Typical use::

    async with ReplicaSet(database_url, log_dir=tmp_path) as fleet:
        a = await fleet.spawn("a", roles="executor", delivery_timeout=1)
        ...
        a.kill()                      # SIGKILL; also pause()/resume() (SIGSTOP/SIGCONT)
        assert await a.stop() == 0    # SIGTERM, then the exit status

Replicas run the installed console script, as a user starts them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from cronwire.harness.fleet import Fleet, Replica, replica_env
from cronwire.loopback import free_port
from tests.support.processes import cronwire_executable

__all__ = ["Replica", "ReplicaSet", "free_port"]


class ReplicaSet(Fleet):
    """Spawns replicas against one database and reaps all of them on exit."""

    def __init__(self, database_url: str, *, log_dir: Path) -> None:
        super().__init__(log_dir, command=(cronwire_executable(), "serve"))
        self.database_url = database_url

    async def spawn(
        self,
        instance_id: str,
        *,
        roles: str = "executor",
        delivery_timeout: float = 2.0,
        grace_seconds: float = 10.0,
        wait_healthy: bool = True,
        preexec_fn: Callable[[], None] | None = None,
        extra_env: dict[str, str] | None = None,
        **settings: Any,
    ) -> Replica:
        """Start ``cronwire serve``; ``settings`` are more SCHEDULER_* values by field name
        (``executor_workers=64`` sets SCHEDULER_EXECUTOR_WORKERS); ``extra_env`` other
        variables verbatim (``OTEL_*``: the test's own are never passed on). ``preexec_fn``
        runs in the child before ``exec`` (e.g. ``resource.setrlimit`` to lower its fd
        limit)."""
        env = replica_env(self.database_url, roles=roles,
                          delivery_timeout_seconds=delivery_timeout,
                          shutdown_grace_seconds=grace_seconds, **settings)
        env = {k: v for k, v in env.items() if not k.startswith("OTEL_")} | (extra_env or {})
        return await self.launch(instance_id, env, wait_healthy=wait_healthy,
                                 preexec_fn=preexec_fn)
