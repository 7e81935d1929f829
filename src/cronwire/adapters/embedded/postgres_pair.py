"""A failover pair from the embedded server's own binaries: a primary and a hot standby
streaming from it on loopback, synchronous or not, which a test or the chaos harness can
fail over (kill -9 the primary's postmaster, promote the standby) the way a managed
Postgres does. Built with ``initdb``, ``pg_basebackup -R`` and ``pg_ctl promote``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from cronwire.adapters.embedded.postgres import FAST_UNSAFE_SETTINGS, EmbeddedPostgres
from cronwire.domain.errors import EmbeddedServerError
from cronwire.loopback import free_port

log = logging.getLogger(__name__)
SLOT = "cronwire_standby"  # a replication slot: the primary keeps WAL the standby still needs
# Both servers get these (the standby's become a primary's when it is promoted). A commit
# waits for the standby's flush only where synchronous_standby_names names it, which the
# primary's command line does for a synchronous pair; the promoted standby has none, so it
# does not wait for a standby it no longer has.
REPLICATION_SETTINGS = {
    "wal_level": "replica",
    "max_wal_senders": "10",
    "max_replication_slots": "10",
    "hot_standby": "on",
    "synchronous_commit": "on",
}
WAIT_SECONDS = 60.0


@dataclass
class EmbeddedPostgresPair:
    root: Path
    synchronous: bool = True
    base_settings: dict[str, str] = field(default_factory=lambda: dict(FAST_UNSAFE_SETTINGS))
    primary: EmbeddedPostgres = field(init=False)
    standby: EmbeddedPostgres = field(init=False)
    killed_pids: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        settings = {**self.base_settings, **REPLICATION_SETTINGS}
        self.primary = EmbeddedPostgres(self.root / "primary", settings={
            **settings, "synchronous_standby_names": "*" if self.synchronous else ""})
        self.standby = EmbeddedPostgres(self.root / "standby", settings=dict(settings))

    def dsn(self, database: str = "postgres", attrs: str = "read-write") -> str:
        """Both servers, primary first, as a client of a failover pair lists them."""
        hosts = f"{self.primary.host}:{self.primary.port},{self.standby.host}:{self.standby.port}"
        return f"postgresql://postgres@{hosts}/{database}?target_session_attrs={attrs}"

    def start(self) -> str:
        """Start the primary, clone the standby from it, wait until it streams (and, for a
        synchronous pair, until the primary counts it as its synchronous standby)."""
        self.primary.start()
        self.standby.prepare_directory()
        self.standby.port = free_port(self.standby.host)
        self.primary.run_tool(
            ["pg_basebackup", "-D", str(self.standby.data_dir), "-h", self.primary.host,
             "-p", str(self.primary.port), "-U", "postgres", "-R", "-X", "stream", "-C",
             "-S", SLOT, "--checkpoint=fast", "--no-sync"],
            timeout=180,
        )
        self.standby.start()
        self.wait_streaming()
        return self.dsn()

    def sql(self, server: EmbeddedPostgres, statement: str, database: str = "postgres") -> str:
        """One statement through ``psql`` on ``server``; its output, unaligned."""
        done = server.run_tool(["psql", "-h", server.host, "-p", str(server.port), "-U",
                                "postgres", "-d", database, "-XAtc", statement])
        return done.stdout.strip()

    def wait_streaming(self) -> None:
        wanted = "sync" if self.synchronous else "async"
        deadline = time.monotonic() + WAIT_SECONDS
        while time.monotonic() < deadline:
            state = self.sql(self.primary, "SELECT sync_state FROM pg_stat_replication "
                                           "WHERE state = 'streaming'")
            if state == wanted:
                return
            time.sleep(0.1)
        raise EmbeddedServerError(f"the standby did not stream ({wanted}) within {WAIT_SECONDS}s")

    def wait_replayed(self, database: str) -> None:
        """Wait until the standby shows ``database`` with every migration the primary has.
        A synchronous commit waits for the standby's flush, not its replay: a database
        just created on the primary may not exist on the standby yet."""
        count = "SELECT count(*) FROM schema_migration"
        wanted = self.sql(self.primary, count, database)
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            with contextlib.suppress(EmbeddedServerError):
                if self.sql(self.standby, count, database) == wanted:
                    return
            if time.monotonic() > deadline:
                raise EmbeddedServerError(
                    f"the standby did not replay database {database} within {WAIT_SECONDS}s")
            time.sleep(0.05)

    def replicate_through(self, host: str, port: int) -> None:
        """Point the standby's WAL stream at ``host:port`` (a proxy in front of the primary,
        to make the standby fall behind on purpose) and wait until it streams again."""
        conninfo = f"host={host} port={port} user=postgres application_name=standby"
        self.sql(self.standby, f"ALTER SYSTEM SET primary_conninfo = '{conninfo}'")
        self.sql(self.standby, "SELECT pg_reload_conf()")
        deadline = time.monotonic() + WAIT_SECONDS
        while self.sql(self.primary, "SELECT count(*) FROM pg_stat_replication WHERE "
                                     "state = 'streaming' AND application_name = 'standby'") != "1":
            if time.monotonic() > deadline:
                raise EmbeddedServerError(f"the standby did not stream through {host}:{port}")
            time.sleep(0.1)

    def kill_primary(self) -> int:
        """SIGKILL the primary's postmaster (its backends notice and exit); returns its pid."""
        running = self.primary.postmaster()
        if running is None:
            raise EmbeddedServerError("the primary is not running")
        os.kill(running[0], signal.SIGKILL)
        self.primary.started_here = False
        self.killed_pids.append(running[0])
        return running[0]

    def promote(self) -> None:
        """Make the standby the primary and wait until it takes writes."""
        self.standby.run_tool(["pg_ctl", "promote", "-D", str(self.standby.data_dir), "-w",
                               "-t", str(int(WAIT_SECONDS))], timeout=WAIT_SECONDS + 30)

    def stop(self) -> None:
        """Stop whatever still runs. A killed primary's backends exit by themselves once
        they see their postmaster gone; its small System V segment (Postgres removes it
        at the next start, which a killed primary here never gets) is removed here."""
        for server in (self.standby, self.primary):
            with contextlib.suppress(EmbeddedServerError):
                server.stop()
        if self.killed_pids:
            _remove_shared_memory(self.primary.data_dir)


def _remove_shared_memory(data_dir: Path) -> None:
    """``ipcrm`` the segment a killed postmaster leaves (postmaster.pid's 7th line: the
    key and id), once no process uses it."""
    try:
        key_and_id = (data_dir / "postmaster.pid").read_text().splitlines()[6].split()
        segment = int(key_and_id[1])
    except (OSError, IndexError, ValueError):
        return
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(["ipcrm", "-m", str(segment)], capture_output=True, timeout=10,
                       check=False)
