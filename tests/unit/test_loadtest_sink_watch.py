"""The load test's watcher outlasts a sink too busy to answer /_stats for a while (three
replicas' burst once ended a run with "timed out" at the first instant)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from cronwire.loadtest.plan import LoadTestError
from cronwire.loadtest.sinks import SinkWatch


class _Sink(BaseHTTPRequestHandler):
    answering = threading.Event()

    def do_GET(self) -> None:
        if not self.answering.wait(2):
            return  # busy: no answer within the watcher's timeout
        body = json.dumps({"received": 7, "unique": 7, "failed": 0, "lag_p99_ms": 1.0}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        return None


@pytest.fixture
def sink() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    _Sink.answering.set()
    server.shutdown()
    server.server_close()


def test_a_stats_request_left_unanswered_keeps_the_last_answer(sink: int) -> None:
    watch = SinkWatch(sink, timeout=0.2, patience=30)
    _Sink.answering.set()
    assert watch.read()["unique"] == 7
    _Sink.answering.clear()
    assert watch.read()["unique"] == 7  # timed out: the last answer stands in
    _Sink.answering.set()
    assert watch.read()["received"] == 7


def test_a_sink_silent_for_longer_than_the_patience_ends_the_run(sink: int) -> None:
    _Sink.answering.clear()
    watch = SinkWatch(sink, timeout=0.2, patience=0.3)
    assert watch.read() == {}  # nothing read yet, not yet silent for long
    with pytest.raises(LoadTestError, match="did not answer /_stats"):
        for _ in range(10):
            watch.read()


def test_a_refused_connection_counts_as_silence_too() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    watch = SinkWatch(port, timeout=0.2, patience=0)
    with pytest.raises(LoadTestError):
        watch.read()
