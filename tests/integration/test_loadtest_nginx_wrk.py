"""The real nginx as the load test's sink, and the real wrk posting to it: the bound's HTTP
half and the receiver whose access log counts deliveries, duplicates and losses."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import pytest

from cronwire.harness.nginx_sink import NginxSink, nginx_binary, read_log
from cronwire.harness.sink import Reply, Sink, always
from cronwire.harness.stats import cpu_seconds
from cronwire.loadtest.http_bound import (
    delivery_sized_request,
    lua_script,
    measure_http_bound,
    run_wrk,
    wrk_binary,
)
from cronwire.loadtest.plan import LoadTestError
from cronwire.loadtest.report import build_report
from cronwire.loopback import free_port
from tests.support.polling import wait_until

needs_nginx = pytest.mark.skipif(nginx_binary() is None, reason="nginx is not installed")
needs_wrk = pytest.mark.skipif(wrk_binary() is None, reason="wrk is not installed")
INSTANT = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
async def nginx(tmp_path: Path) -> AsyncIterator[NginxSink]:
    sink = await NginxSink(tmp_path / "nginx").start()
    try:
        yield sink
    finally:
        sink.stop()


async def _post(http: aiohttp.ClientSession, url: str, webhook_id: str) -> int:
    headers = {"webhook-id": webhook_id, "x-cronwire-scheduled-for": "2026-01-01T00:00:00Z"}
    async with http.post(url, headers=headers, data=b'{"x":1}') as response:
        assert await response.read() == b""
        return response.status


@needs_nginx
async def test_a_relative_directory_works_as_the_load_tests_default_out_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # `cronwire loadtest` without --out passes "loadtest-out/deliveries": nginx read its
    # -c path relative to its -p prefix and found nothing.
    monkeypatch.chdir(tmp_path)
    sink = await NginxSink(Path("out") / "deliveries").start()
    try:
        async with aiohttp.ClientSession() as http:
            assert await _post(http, sink.url, "a") == 200
    finally:
        sink.stop()
    assert sink.directory == tmp_path / "out" / "deliveries"


@needs_nginx
async def test_the_nginx_sinks_log_counts_deliveries_duplicates_and_losses(
    nginx: NginxSink,
) -> None:
    async with aiohttp.ClientSession() as http:
        statuses = [await _post(http, nginx.url, webhook_id) for webhook_id in ("a", "b", "a")]
    assert statuses == [200, 200, 200]
    # the progress line's counts, from the log while nginx still runs (flushed every 250 ms)
    await wait_until(lambda: nginx.stats()["received"] == 3, within=30)
    stats = nginx.stats()
    assert (stats["unique"], stats["duplicates"], stats["failed"]) == (2, 1, 0)
    pids = nginx.pids()
    assert len(pids) >= 2 and cpu_seconds(pids) is not None  # master and its workers
    nginx.stop()
    acks = list(nginx.acknowledgements())
    assert [webhook_id for webhook_id, _ in acks] == ["a", "b", "a"]
    summary = build_report("postgres", "burst", 3, 1, dict.fromkeys("abc", INSTANT), acks,
                           0.0).summary
    assert (summary["delivered"], summary["duplicates"], summary["lost"]) == (2, 1, 1)


@needs_nginx
async def test_stopping_nginx_writes_out_every_buffered_line(nginx: NginxSink) -> None:
    """The log is written in 64 KiB buffers: what is still buffered at the stop must reach
    the file, or the report would count those deliveries as lost."""
    async with aiohttp.ClientSession() as http:
        for n in range(300):
            assert await _post(http, nginx.url, f"msg_{n}") == 200
    nginx.stop()
    assert {e.webhook_id for e in read_log(nginx.access_log) if e.acknowledged} == {
        f"msg_{n}" for n in range(300)}


@needs_nginx
@needs_wrk
@pytest.mark.xdist_group("processes")  # two seconds of both cores: not beside a load test
def test_wrk_posts_delivery_sized_webhooks_to_nginx_at_a_positive_rate(tmp_path: Path) -> None:
    result = measure_http_bound(tmp_path, seconds=2)
    assert result.requests > 0 and result.per_second > 0
    assert 1.5 < result.seconds < 10
    assert not any(result.errors.values())
    # what nginx received is cronwire's request: its webhook-id, its instant, answered 200
    _method, headers, _body = delivery_sized_request()
    first = next(read_log(tmp_path / "nginx" / "access.log"))
    assert (first.webhook_id, first.status) == (headers["webhook-id"], 200)
    assert first.scheduled_for == headers["x-cronwire-scheduled-for"]


@needs_wrk
def test_wrk_that_cannot_connect_is_an_error_not_a_bound(tmp_path: Path) -> None:
    script = tmp_path / "delivery.lua"
    script.write_text(lua_script(*delivery_sized_request()))
    with pytest.raises(LoadTestError, match=r"^wrk exited with 1: unable to connect"):
        run_wrk(f"http://127.0.0.1:{free_port()}/hook", script, 1, connections=2, threads=1)


@needs_wrk
async def test_a_wrk_run_answered_with_errors_is_not_a_bound(tmp_path: Path) -> None:
    script = tmp_path / "delivery.lua"
    script.write_text(lua_script(*delivery_sized_request()))
    async with Sink(behaviour=always(Reply(status=503)), keep_requests=False) as refusing:
        with pytest.raises(LoadTestError, match=r"not clean: .*'status': [1-9]"):
            await asyncio.to_thread(run_wrk, refusing.url, script, 1, connections=2,
                                    threads=1)
    assert refusing.failed > 0
