"""`cronwire tenant token --scope --expires-in --name`, `cronwire tokens create|list|revoke`
and `cronwire audit list` against a live `cronwire serve` (conftest.py) and its database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests.support.cli_shell import InProcess, Live
from tests.support.cli_shell import hook as _hook
from tests.support.cli_shell import status as _status


def test_operator_issues_scoped_expiring_tokens(live: Live, cli: InProcess) -> None:
    tenant = cli.ok("tenant", "create", "scoped")
    assert set(tenant) == {"tenant_id", "name", "token"}  # CONTRACT's shape, exactly
    listed = cli.ok("tokens", "list", token=tenant["token"])  # an admin route: it is admin
    assert [t["scope"] for t in listed["items"]] == ["admin"]
    reader = cli.ok("tenant", "token", tenant["tenant_id"], "--scope", "read",
                    "--expires-in", "30d", "--name", "dashboard")
    assert reader["scope"] == "read" and reader["token_name"] == "dashboard"
    expires = datetime.fromisoformat(reader["expires_at"])
    assert abs(expires - (datetime.now(UTC) + timedelta(days=30))) < timedelta(minutes=5)
    assert _status(live.url, reader["token"]) == 200  # a GET
    refusal = cli.refused("schedules", "create", "--name", "x", "--cron", "0 3 * * *",
                          *_hook(live), token=reader["token"], code=1)
    assert "scope write" in refusal
    assert "--scope" in cli.refused("tenant", "token", tenant["tenant_id"], "--scope", "root",
                                    code=2)
    assert "--expires-in" in cli.refused("tenant", "token", tenant["tenant_id"],
                                         "--expires-in", "soon", code=2)


def test_tenants_manage_their_own_tokens_over_the_api(live: Live, cli: InProcess) -> None:
    admin = cli.ok("tenant", "create", "self-service")["token"]
    made = cli.ok("tokens", "create", "--name", "ci", "--scope", "write", "--expires-in", "12h",
                  "--json", token=admin)
    assert made["scope"] == "write" and made["name"] == "ci" and made["token"].startswith("cwt_")
    listed = cli.ok("tokens", "list", "--json", token=admin)
    assert made["id"] in {t["id"] for t in listed["items"]}
    assert "scope admin" in cli.refused("tokens", "list", token=made["token"], code=1)
    cli.ok("tokens", "revoke", made["id"], "--json", token=admin)
    assert _status(live.url, made["token"]) == 401
    audit = cli.ok("audit", "list", "--action", "token.revoke", "--json", token=admin)
    assert [e["object_id"] for e in audit["items"]] == [made["id"]]
    assert audit["items"][0]["actor"]["token_name"] is None  # the first token has no name


def test_revisions_restore_and_if_match_from_the_cli(live: Live, cli: InProcess) -> None:
    token = cli.ok("tenant", "create", "revisions")["token"]
    created = cli.ok("schedules", "create", "--name", "first", "--cron", "0 3 * * *",
                     *_hook(live), token=token)
    schedule_id = created["id"]
    cli.ok("schedules", "update", schedule_id, "--name", "second", token=token)
    refusal = cli.refused("schedules", "update", schedule_id, "--name", "third",
                          "--if-match", "1", token=token, code=1)
    assert "version 2" in refusal
    revisions = cli.ok("schedules", "revisions", schedule_id, "--json", token=token)
    assert [r["version"] for r in revisions["items"]] == [2, 1]
    restored = cli.ok("schedules", "restore", schedule_id, "1", "--if-match", "2", token=token)
    assert restored["name"] == "first" and restored["version"] == 3
    audit = cli.ok("audit", "list", "--object-id", schedule_id, "--json", token=token)
    assert [e["action"] for e in audit["items"]] == [
        "schedule.restore", "schedule.update", "schedule.create"]
