"""The nginx sink's configuration and access-log reading (the real server's tests are in
tests/integration/test_loadtest_nginx_wrk.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cronwire.domain.errors import ConfigError
from cronwire.harness.nginx_sink import (
    LOG_FORMAT,
    LogEntry,
    LogTally,
    parse_log_line,
    read_log,
    render_config,
)
from cronwire.loadtest import sinks
from cronwire.loadtest.sinks import choose_sink


def test_the_config_keeps_everything_under_its_prefix_and_logs_id_status_and_time(
    tmp_path: Path,
) -> None:
    config = render_config(tmp_path, 41234, tmp_path / "access.log")
    assert "daemon off;" in config and "listen 127.0.0.1:41234" in config
    assert f"log_format cronwire_sink '{LOG_FORMAT}';" in config
    assert LOG_FORMAT.split()[:3] == ["$http_webhook_id", "$status", "$msec"]
    assert f"access_log {tmp_path / 'access.log'} cronwire_sink" in config
    for directive in ("pid", "error_log", "client_body_temp_path", "proxy_temp_path",
                      "fastcgi_temp_path", "uwsgi_temp_path", "scgi_temp_path"):
        line = next(x for x in config.splitlines() if x.strip().startswith(directive + " "))
        assert str(tmp_path) in line, line  # nothing outside the prefix: no root needed
    assert "access_log off;" in render_config(tmp_path, 41234, None).split("http {")[1]


def test_a_log_line_is_id_status_time_and_instant() -> None:
    assert parse_log_line("msg_ab 200 1796202555.629 2026-01-01T00:00:00Z") == LogEntry(
        "msg_ab", 200, 1796202555.629, "2026-01-01T00:00:00Z")
    # nginx writes "-" for a header that was not sent
    assert parse_log_line("- 404 1.5 -") == LogEntry("", 404, 1.5, "")
    assert not LogEntry("", 404, 1.5, "").acknowledged
    for torn in ("msg_ab 200 17962", "msg_ab 2x0 1.0 -", "msg_ab 200 x -", "", "a b c d e"):
        assert parse_log_line(torn) is None, torn


def test_the_tally_reads_only_complete_new_lines_and_counts_as_the_python_sink(
    tmp_path: Path,
) -> None:
    log = tmp_path / "access.log"
    tally = LogTally(log)
    assert tally.read()["unique"] == 0  # no log yet
    log.write_text("a 200 100.5 1970-01-01T00:01:40Z\nb 503 100.6 -\nb 2")
    stats = tally.read()
    assert (stats["requests"], stats["received"], stats["unique"], stats["failed"]) == (2, 1, 1, 1)
    assert stats["lag_p99_ms"] == 500.0  # answered 0.5 s after its instant (100 s)
    with log.open("a") as more:
        more.write("04 100.7 -\na 200 101.0 1970-01-01T00:01:40Z\n")  # completes "b 204"
    stats = tally.read()
    assert (stats["requests"], stats["received"], stats["unique"]) == (4, 3, 2)
    assert (stats["duplicates"], stats["failed"]) == (1, 1)
    assert stats["lag_p99_ms"] == 1000.0  # only the lines since the last read
    assert tally.read()["lag_p99_ms"] is None
    assert [e.webhook_id for e in read_log(log) if e.acknowledged] == ["a", "b", "a"]


@pytest.mark.parametrize(("installed", "requested", "latency", "failures", "chosen"), [
    (True, None, 0.0, 0.0, "nginx"),
    (False, None, 0.0, 0.0, "python"),
    (True, None, 5.0, 0.0, "python"),  # a slow receiver is the Python sink's
    (True, None, 0.0, 0.1, "python"),  # so is a failing one
    (True, "python", 0.0, 0.0, "python"),
    (True, "nginx", 0.0, 0.0, "nginx"),
])
def test_the_sink_by_default_is_nginx_when_installed_and_the_receiver_is_plain(
    monkeypatch: pytest.MonkeyPatch, installed: bool, requested: str | None, latency: float,
    failures: float, chosen: str,
) -> None:
    monkeypatch.setattr(sinks, "nginx_binary", lambda: "/usr/sbin/nginx" if installed else None)
    assert choose_sink(requested, latency, failures) == chosen


@pytest.mark.parametrize(("installed", "latency", "failures", "says"), [
    (True, 5.0, 0.0, "--sink-latency-ms and --sink-failure-rate need --sink python"),
    (True, 0.0, 0.5, "--sink-latency-ms and --sink-failure-rate need --sink python"),
    (False, 0.0, 0.0, "nginx is not installed"),
])
def test_asking_for_nginx_where_it_cannot_serve_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch, installed: bool, latency: float, failures: float,
    says: str,
) -> None:
    monkeypatch.setattr(sinks, "nginx_binary", lambda: "/usr/sbin/nginx" if installed else None)
    with pytest.raises(ConfigError, match=r"^--sink nginx: ") as raised:
        choose_sink("nginx", latency, failures)
    assert says in str(raised.value)
