"""`cronwire calendars ...` and the calendar flags of `schedules create|update` from the
shell against a live `cronwire serve` (ADR 0064): dates and holidays calendars, a schedule
excluding one by name, the preview saying what moved, the 409 of a calendar in use, and
the usage errors (exit 2, one line)."""

from __future__ import annotations

from tests.support.cli_shell import InProcess, Live
from tests.support.cli_shell import hook as _hook


def test_calendars_round_trip_through_the_api(live: Live, cli: InProcess) -> None:
    token = cli.ok("tenant", "create", "calendars")["token"]
    made = cli.ok("calendars", "create", "--name", "office", "--date", "2027-12-24",
                  "--date", "2027-12-31", token=token)
    assert made["dates"] == ["2027-12-24", "2027-12-31"] and made["holidays"] is None
    holidays = cli.ok("calendars", "create", "--name", "de", "--country", "DE", "--year",
                      "2027", token=token)
    assert holidays["holidays"]["country"] == "DE" and "2027-12-25" in holidays["dates"]
    assert [c["name"] for c in cli.ok("calendars", "list", token=token)["items"]] == [
        "de", "office"]
    assert cli.ok("calendars", "get", made["id"], token=token) == made

    created = cli.ok("schedules", "create", "--name", "fridays", "--cron", "0 9 * * FRI",
                     "--timezone", "Europe/Berlin", "--starts-at", "2027-12-20T00:00:00Z",
                     *_hook(live), "--exclude-calendar", "office", "--calendar-policy",
                     "next_business_day", token=token)
    assert created["exclude_calendars"] == [made["id"]]
    assert created["calendar_policy"] == "next_business_day"
    preview = cli.ok("schedules", "preview", created["id"], "--count", "2", token=token)
    assert [(i["local"], i["shifted_from"]) for i in preview["items"]] == [
        ("2027-12-27T09:00:00+01:00", "2027-12-24"), ("2028-01-03T09:00:00+01:00", "2027-12-31")]

    updated = cli.ok("calendars", "update", made["id"], "--date", "2027-12-24", token=token)
    assert updated["dates"] == ["2027-12-24"] and updated["replanned_schedules"] == 1
    assert "fridays" in cli.refused("calendars", "delete", made["id"], token=token, code=1)
    cleared = cli.ok("schedules", "update", created["id"], "--no-calendars", token=token)
    assert cleared["exclude_calendars"] == []
    assert cli.ok("calendars", "delete", made["id"], token=token)["deleted"] is True

    assert "no calendar named" in cli.refused(
        "schedules", "update", created["id"], "--exclude-calendar", "nope", token=token, code=2)
    assert "--country and --year" in cli.refused(
        "calendars", "create", "--name", "x", "--country", "DE", token=token, code=2)
    assert "holidays.country" in cli.refused(
        "calendars", "create", "--name", "x", "--country", "XX", "--year", "2027",
        token=token, code=1)
