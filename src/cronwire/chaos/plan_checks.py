"""Which faults a chaos run may inject, checked in one place for the CLI and the harness."""

from __future__ import annotations

from collections.abc import Sequence

from cronwire.chaos.faults import FAULTS


def fault_refusal(mode: str, faults: Sequence[str], dsn: str | None) -> str | None:
    """Why these faults cannot run in ``mode`` (one line naming the flag), or None.

    ``dsn`` is the admin DSN of an existing server, or None when the harness starts its
    own Postgres: a fault that stops Postgres needs the harness's own."""
    for name in faults:
        spec = FAULTS.get(name)
        if spec is None:
            return f"--faults: unknown fault {name!r}; choose from {', '.join(FAULTS)}"
        if mode not in spec.modes:
            return f"--faults: {name} needs --mode {' or '.join(spec.modes)}"
        if spec.needs_own_postgres and dsn is not None:
            return (f"--faults: {name} stops Postgres, so it needs the embedded server "
                    "(unset SCHEDULER_DATABASE_URL)")
        if (spec.proxy or spec.victim_proxy) and dsn is not None and _several_hosts(dsn):
            return (f"--faults: {name} puts a proxy in front of one server, and "
                    "SCHEDULER_DATABASE_URL names several")
    return None


def _several_hosts(dsn: str) -> bool:
    hosts = dsn.partition("://")[2].split("/", 1)[0].split("?", 1)[0].rpartition("@")[2]
    return "," in hosts
