"""Apply twice = apply once (ADR 0057), as a property: for any set of definitions (keys,
crons, zones spelt in any case, header order, pause states, retry numbers), a second
apply of the same set reports no change and writes no row."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.api import Api, api_fixture  # noqa: F401 - fixture

ZONES = ["UTC", "utc", "Europe/Berlin", "europe/berlin", "America/New_York", "Asia/Kolkata"]
CRONS = ["0 3 * * *", "*/5 * * * *", "15 */2 * * *", "0 9,17 * * 1-5", "30 2 * * *"]


@st.composite
def definitions(draw: st.DrawFn) -> list[dict[str, Any]]:
    keys = draw(st.lists(st.from_regex(r"[a-z0-9][a-z0-9._-]{0,12}", fullmatch=True),
                         min_size=1, max_size=6, unique=True))
    out = []
    for key in keys:
        headers = draw(st.dictionaries(st.sampled_from(["x-a", "X-B", "authorization"]),
                                       st.text("abc123 ", min_size=1, max_size=8), max_size=3))
        item: dict[str, Any] = {
            "key": key, "name": draw(st.text("abcdef ", min_size=1, max_size=10)) + "x",
            "cron": draw(st.sampled_from(CRONS)), "timezone": draw(st.sampled_from(ZONES)),
            "target": {"url": "http://127.0.0.1:9/" + key, "headers": headers},
            "retry": {"max_attempts": draw(st.integers(1, 8)),
                      "initial_backoff_seconds": draw(st.sampled_from([1, 1.5, 10])),
                      "max_backoff_seconds": 3600},
        }
        paused = draw(st.sampled_from([None, True, False]))
        if paused is not None:
            item["paused"] = paused
        out.append(item)
    return out


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(schedules=definitions(), prune=st.booleans())
async def test_applying_twice_is_applying_once(api: Api, schedules: list[dict[str, Any]],
                                               prune: bool) -> None:
    tenant = await api.tenant()
    body = {"schedules": schedules, "managed_by": "git:prop", "prune": prune}
    first = await api.client.post("/v1/schedules/apply", json=body, headers=tenant.headers)
    assert first.status_code == 200, first.text
    rows = await api.pool.fetch("SELECT id, xmin::text, updated_at FROM schedule "
                                "WHERE tenant_id = $1 ORDER BY id", tenant.id)
    second = (await api.client.post("/v1/schedules/apply", json=body,
                                    headers=tenant.headers)).json()
    assert second["created"] == second["updated"] == second["deleted"] == [], second
    assert second["unchanged"] == len(schedules)
    assert await api.pool.fetch("SELECT id, xmin::text, updated_at FROM schedule "
                                "WHERE tenant_id = $1 ORDER BY id", tenant.id) == rows
