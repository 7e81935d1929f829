"""The bound's HTTP half: the request wrk sends is the size of cronwire's, and wrk's totals
are read back exactly (the real wrk and nginx: tests/integration/test_loadtest_nginx_wrk.py)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cronwire.domain.delivery import DeliveryRequest, default_body, delivery_headers
from cronwire.domain.model import idempotency_key_for, run_id_for
from cronwire.loadtest import compare, http_bound
from cronwire.loadtest.http_bound import (
    MARKER,
    delivery_sized_request,
    lua_script,
    lua_string,
    parse_wrk_output,
)
from cronwire.loadtest.plan import LoadTestError, LoadTestPlan

WRK_OUTPUT = f"""Running 2s test @ http://127.0.0.1:46319/hook
  2 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   833.03us    1.28ms  12.72ms   88.55%
    Req/Sec    58.30k     5.95k   76.04k    72.50%
  232413 requests in 2.01s, 32.58MB read
Requests/sec: 115745.26
Transfer/sec:     16.23MB
{MARKER}{{"requests":232413,"duration_us":2007970,"connect":0,"read":0,"write":0,"status":3,"timeout":1}}
"""


def test_wrks_totals_are_read_from_its_done_hook() -> None:
    result = parse_wrk_output(WRK_OUTPUT)
    assert (result.requests, result.seconds) == (232413, 2.00797)
    assert result.per_second == pytest.approx(115745.26, abs=0.5)  # what wrk itself printed
    assert result.errors == {"connect": 0, "read": 0, "write": 0, "status": 3, "timeout": 1}


@pytest.mark.parametrize("output", [
    "Running 2s test @ http://127.0.0.1:1/\nRequests/sec: 1.0\n",  # no done hook ran
    f"{MARKER}{{\"requests\": 5}}\n",  # torn totals
    f"{MARKER}not json\n",
    "",
])
def test_output_without_readable_totals_is_a_load_test_error(output: str) -> None:
    with pytest.raises(LoadTestError, match="wrk printed"):
        parse_wrk_output(output)


def test_the_request_is_one_cronwire_would_send() -> None:
    method, headers, body = delivery_sized_request()
    schedule_id, instant = uuid.uuid4(), datetime(2026, 6, 1, 12, tzinfo=UTC)
    run_id = run_id_for(schedule_id, instant)
    real_body = default_body(schedule_id, run_id, instant, 1)
    real = delivery_headers(DeliveryRequest(
        run_id=run_id, schedule_id=schedule_id, tenant_id=uuid.uuid4(),
        idempotency_key=idempotency_key_for(run_id), scheduled_for=instant, attempt=1,
        method="POST", url="http://127.0.0.1/hook", headers={}, body=real_body,
        signing_secrets=("whsec_" + "B" * 32,), timeout_seconds=10.0), 1_780_000_000)
    assert method == "POST"
    assert len(body) == len(real_body)
    assert [name.lower() for name in headers] == [name.lower() for name in real]
    assert sum(map(len, headers.values())) == sum(map(len, real.values()))


def test_lua_strings_escape_quotes_backslashes_and_anything_but_printable_ascii() -> None:
    assert lua_string('{"a":"b\\\\c"}') == '"{\\034a\\034:\\034b\\092\\092c\\034}"'
    assert lua_string("é\n") == '"\\195\\169\\010"'
    assert lua_string("plain text") == '"plain text"'


def test_the_script_sets_method_body_and_every_header_and_prints_totals() -> None:
    script = lua_script("POST", {"webhook-id": "msg_1", "content-type": "application/json"},
                        b'{"x":1}')
    assert 'wrk.method = "POST"' in script
    assert 'wrk.body = "{\\034x\\034:1}"' in script
    assert 'wrk.headers["webhook-id"] = "msg_1"' in script
    assert 'wrk.headers["content-type"] = "application/json"' in script
    assert "done = function(summary, latency, requests)" in script and MARKER in script


def _plan(tmp_path: Path) -> LoadTestPlan:
    return LoadTestPlan(mode="postgres", schedules=1, replicas=1, duration=1.0, out=tmp_path)


def test_without_wrk_or_nginx_the_bound_falls_back_to_aiohttp_and_says_why(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    monkeypatch.setattr(http_bound, "wrk_binary", lambda: None)
    with pytest.raises(LoadTestError, match="wrk or nginx is not installed"):
        http_bound.measure_http_bound(tmp_path)
    assert compare._wrk_nginx(_plan(tmp_path)) == (
        None, "wrk or nginx is not installed; the HTTP half is the aiohttp client's")


def test_a_failed_wrk_run_falls_back_to_aiohttp_and_says_why(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    def fails(_directory: Path) -> http_bound.WrkResult:
        raise LoadTestError("wrk's run was not clean: 0 requests, errors {'connect': 64}")

    monkeypatch.setattr(compare, "http_bound_available", lambda: True)
    monkeypatch.setattr(compare, "measure_http_bound", fails)
    http, why = compare._wrk_nginx(_plan(tmp_path))
    assert http is None and why is not None
    assert why.startswith("wrk to nginx failed (wrk's run was not clean")
