"""`cronwire schedules` (and `alerts`) from the shell against a live `cronwire serve` (one
per module, all roles, see conftest.py): every schedule command round trips through the
API, a terminal gets tables, and `schedules explain|stats` and `alerts set|get|events`
show what the API answers. Real processes, real Postgres.
"""

from __future__ import annotations

import asyncio
import json
import os
import pty
import subprocess
import uuid
from pathlib import Path

import asyncpg

from tests.support.certificates import Authority
from tests.support.cli_shell import InProcess, Live
from tests.support.cli_shell import hook as _hook
from tests.support.processes import cronwire_executable


def test_every_schedule_command_round_trips_through_the_api(live: Live, cli: InProcess) -> None:
    token = cli.ok("tenant", "create", "acme")["token"]
    created = cli.ok("schedules", "create", "--name", "nightly", "--cron", "0 3 * * *",
                     "--timezone", "Europe/Berlin", *_hook(live), "--header", "x-a:1",
                     "--body", '{"k": 1}', "--max-attempts", "5",
                     "--initial-backoff-seconds", "7", "--misfire-policy", "skip", "--paused",
                     token=token)
    sid = created["id"]
    assert created["paused"] is True and created["misfire_policy"] == "skip"
    assert cli.ok("schedules", "get", sid, token=token)["timezone"] == "Europe/Berlin"
    listed = cli.ok("schedules", "list", "--all", "--limit", "1", token=token)
    assert [s["id"] for s in listed["items"]] == [sid] and listed["next_cursor"] is None

    # target and retry are replaced whole by the API: the CLI keeps what no flag names.
    updated = cli.ok("schedules", "update", sid, "--cron", "30 4 * * *", "--max-attempts", "2",
                     token=token)
    assert updated["cron"] == "30 4 * * *" and updated["retry"]["max_attempts"] == 2
    assert updated["retry"]["initial_backoff_seconds"] == 7
    assert updated["target"]["headers"] == {"x-a": "***"} and updated["target"]["body"]
    updated = cli.ok("schedules", "update", sid, "--header", "x-b:2", "--no-body", token=token)
    assert updated["target"]["headers"] == {"x-b": "***"} and updated["target"]["body"] is None
    assert updated["target"]["method"] == "GET"

    assert cli.ok("schedules", "resume", sid, token=token)["status"] == "active"
    assert cli.ok("schedules", "pause", sid, token=token)["status"] == "paused"
    run = cli.ok("schedules", "trigger", sid, token=token)
    assert run["trigger"] == "manual" and run["schedule_id"] == sid
    fires = cli.ok("schedules", "preview", sid, "--count", "3", token=token)["items"]
    assert len(fires) == 3 and all(f["utc"].endswith("Z") for f in fires)
    rotated = cli.ok("schedules", "rotate-secret", sid, token=token)
    assert rotated["signing_secret"] != created["signing_secret"]
    assert cli.ok("schedules", "delete", sid, token=token) == {"id": sid, "deleted": True}
    assert "not found" in cli.refused("schedules", "get", sid, token=token, code=1)


def test_a_terminal_gets_tables(live: Live, cli: InProcess) -> None:
    token = cli.ok("tenant", "create", "tables")["token"]
    env = live.env(token)
    created = cli.ok("schedules", "create", "--name", "tabled", "--cron", "0 3 * * *",
                     *_hook(live), "--paused", token=token)
    listing = _in_terminal(["schedules", "list"], env)
    header, row = listing.splitlines()[:2]
    assert header.split() == ["ID", "NAME", "CRON", "TIMEZONE", "STATUS", "NEXT", "FIRE",
                              "(UTC)", "URL"]
    assert row.startswith(created["id"]) and "paused" in row
    shown = _in_terminal(["schedules", "get", created["id"]], env)
    assert "target.url" in shown and "{" not in shown
    assert json.loads(_in_terminal(["schedules", "get", created["id"], "--json"], env))


def _in_terminal(args: list[str], env: dict[str, str]) -> str:
    """stdout of the CLI when it is a terminal (a pseudo-terminal of our own)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([cronwire_executable(), *args], env=env, stdout=follower,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the process closed its end
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert proc.wait(timeout=30) == 0, proc.stderr.read() if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    return b"".join(chunks).decode().replace("\r\n", "\n")


def test_explain_stats_and_alerts_commands_round_trip_through_the_api(
    live: Live, cli: InProcess
) -> None:
    token = cli.ok("tenant", "create", "watcher")["token"]
    sid = cli.ok("schedules", "create", "--name", "wall", "--cron", "30 2 * * *",
                 "--timezone", "Europe/Berlin", *_hook(live), "--paused", token=token)["id"]
    explained = cli.ok("schedules", "explain", sid, "--at", "2027-03-28T00:00:00Z", token=token)
    assert explained["occurrence"] == "2027-03-28T01:00:00Z"
    assert explained["verdict"] == "paused" and explained["reason"].startswith("DST moved it")
    stats = cli.ok("schedules", "stats", sid, "--window", "7d", token=token)
    assert stats["window"] == "7d" and stats["occurrences"] == 0
    assert cli.ok("schedules", "stats", sid, token=token)["window"] == "24h"
    assert "invalid choice" in cli.refused("schedules", "stats", sid, "--window", "2h",
                                           token=token, code=2)
    assert "--at" in cli.refused("schedules", "explain", sid, token=token, code=2)

    alerts = cli.ok("alerts", "set", "--url", f"{live.url}/healthz", "--event",
                    "schedule.failing", "--event", "schedule.late", token=token)
    assert alerts["events"] == ["schedule.failing", "schedule.late"]
    assert alerts["signing_secret"].startswith("whsec_")
    shown = cli.ok("alerts", "get", token=token)
    assert shown["url"] == f"{live.url}/healthz" and "signing_secret" not in shown
    assert cli.ok("alerts", "events", token=token) == {"items": [], "next_cursor": None}
    ruled = cli.ok("schedules", "update", sid, "--alert-after-failures", "3",
                   "--alert-max-duration-ms", "900", token=token)
    assert ruled["alerts"] == {"after_failures": 3, "late_after_seconds": None,
                               "max_duration_ms": 900}
    ruled = cli.ok("schedules", "update", sid, "--alert-after-failures", "none", token=token)
    assert ruled["alerts"]["after_failures"] is None and ruled["alerts"]["max_duration_ms"] == 900
    assert "url" in cli.refused("alerts", "set", "--url", "ftp://x", token=token, code=1)


def test_a_terminal_reads_stats_in_readable_units_and_alert_events(
    live: Live, cli: InProcess
) -> None:
    """`schedules stats` once showed "p50 4570000 ms"; fire lag and durations read in
    the console's units, and `alerts get` without --json shows its events."""
    token = cli.ok("tenant", "create", "reader")["token"]
    sid = cli.ok("schedules", "create", "--name", "lagged", "--cron", "* * * * *",
                 *_hook(live), "--paused", token=token)["id"]
    # One run the schedule fired 4.57 s late that took 76.2 min; a backfilled one whose
    # hour-long lag is not the schedule's fire lag.
    asyncio.run(_seed_runs(live.dsn, sid, [("schedule", 4_570, 4_572_000),
                                           ("backfill", 3_600_000, 10)]))
    env = live.env(token)
    shown = _in_terminal(["schedules", "stats", sid, "--window", "1h"], env)
    lines = {line.split()[0]: line for line in shown.splitlines() if line.strip()}
    assert lines["fire_lag"].split(None, 1)[1] == "p50 4.57 s · p95 4.57 s · p99 4.57 s"
    assert "p50 10 ms" in lines["duration"] and "p99 76.2 min" in lines["duration"]
    assert "4570" not in shown

    cli.ok("alerts", "set", "--url", f"{live.url}/healthz", "--event", "schedule.failing",
           "--event", "schedule.late", token=token)
    alerts = _in_terminal(["alerts", "get"], env)
    assert "schedule.failing, schedule.late" in alerts, alerts


async def _seed_runs(dsn: str, schedule_id: str,
                     runs: list[tuple[str, int, int]]) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.executemany(
            """INSERT INTO job_run (id, tenant_id, schedule_id, scheduled_for, idempotency_key,
                                    status, fire_after, first_attempt_at, finished_at,
                                    last_duration_ms, trigger, created_at)
               SELECT gen_random_uuid(), s.tenant_id, s.id, t, 'k' || $2, 'succeeded', t,
                      t + make_interval(secs => $3::float8 / 1000), now(), $4, $2,
                      t - interval '1 second'
                 FROM schedule s,
                      LATERAL (SELECT date_trunc('minute', now()) - make_interval(mins => $5)
                               AS t) AS w
                WHERE s.id = $1""",
            [(uuid.UUID(schedule_id), trigger, lag, duration, 10 + i)
             for i, (trigger, lag, duration) in enumerate(runs)])
    finally:
        await conn.close()


def test_client_certificate_flags_set_keep_and_remove_target_tls(
        live: Live, cli: InProcess, tmp_path: Path) -> None:
    authority = Authority()
    token = cli.ok("tenant", "create", "mtls")["token"]
    files = {}
    for name in ("first", "second"):
        pem = authority.client_tls(f"client-{name}")
        files[name] = (tmp_path / f"{name}.crt", tmp_path / f"{name}.key")
        files[name][0].write_text(pem["client_certificate"])
        files[name][1].write_text(pem["client_key"])
    created = cli.ok("schedules", "create", "--name", "m", "--cron", "0 3 * * *",
                     "--url", "https://127.0.0.1:9/h", "--client-certificate",
                     str(files["first"][0]), "--client-key", str(files["first"][1]),
                     token=token)
    assert created["target"]["tls"]["client_certificate_subject"] == "CN=client-first"
    sid = created["id"]
    kept = cli.ok("schedules", "update", sid, "--url", "https://127.0.0.1:9/other", token=token)
    assert kept["target"]["tls"] == created["target"]["tls"]  # read's shape not sent back
    replaced = cli.ok("schedules", "update", sid, "--client-certificate",
                      str(files["second"][0]), "--client-key", str(files["second"][1]),
                      token=token)
    assert replaced["target"]["tls"]["client_certificate_subject"] == "CN=client-second"
    mismatched = cli.refused("schedules", "update", sid, "--client-certificate",
                             str(files["first"][0]), "--client-key", str(files["second"][1]),
                             token=token, code=1)
    assert "target.tls.client_key" in mismatched
    alone = cli.refused("schedules", "update", sid, "--client-key", str(files["first"][1]),
                        token=token, code=2)
    assert "go together" in alone
    removed = cli.ok("schedules", "update", sid, "--no-client-certificate", token=token)
    assert removed["target"]["tls"] is None
