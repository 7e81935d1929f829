"""nginx as a webhook sink: a receiver that costs the load test next to nothing.

The harness's Python sink (sink_process.py) spends about as much CPU per request as a
replica spends per run, on the same two cores, so at full load it is part of what is
measured. nginx answers every request ``200`` with an empty body and writes one access-log
line per request: ``<webhook-id> <status> <msec> <x-cronwire-scheduled-for>``. Read back,
those lines are the same acknowledgements the Python sink's records hold (a 2xx for a
``webhook-id``, and when), so duplicates and losses are counted the same way.

nginx runs as a process of ours: its own prefix directory (configuration, logs, pid and
temporary files), ``daemon off`` so it stays our child, a free loopback port. It cannot
answer slowly or with errors; the scenarios that need that keep the Python sink.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from cronwire.harness.processes import HarnessError, spawn, stop_process, wait_http
from cronwire.harness.stats import child_pids, instant_seconds, percentile
from cronwire.loopback import free_port

START_SECONDS = 20.0
SBIN = "/usr/sbin:/usr/local/sbin"  # where Debian puts it: not on every user's PATH
LOG_FORMAT = "$http_webhook_id $status $msec $http_x_cronwire_scheduled_for"
READY_PATH = "/_ready"  # answered without a log line


def nginx_binary() -> str | None:
    """The nginx executable, or None when it is not installed."""
    return shutil.which("nginx") or shutil.which("nginx", path=SBIN)


def render_config(prefix: Path, port: int, access_log: Path | None,
                  workers: str = "auto") -> str:
    """nginx.conf for a sink on 127.0.0.1:``port`` keeping everything under ``prefix``.

    The access log is buffered (written every 64 KiB or 250 ms) so logging costs a write
    per few hundred requests; nginx flushes the buffer when it stops. Connections stay
    open for as many requests as a client sends (nginx's default closes them after 1,000,
    which a load test would pay for in reconnects)."""
    tmp = prefix / "tmp"
    log = (f"access_log {access_log} cronwire_sink buffer=64k flush=250ms;"
           if access_log is not None else "access_log off;")
    # As root, nginx would run its workers as "nobody"; ours run as whoever runs us.
    user = f"user {pwd.getpwuid(os.geteuid()).pw_name};\n" if os.geteuid() == 0 else ""
    return f"""daemon off;
master_process on;
worker_processes {workers};
pid {prefix / "nginx.pid"};
error_log {prefix / "error.log"} warn;
{user}events {{
    worker_connections 8192;
}}
http {{
    client_body_temp_path {tmp / "body"};
    proxy_temp_path {tmp / "proxy"};
    fastcgi_temp_path {tmp / "fastcgi"};
    uwsgi_temp_path {tmp / "uwsgi"};
    scgi_temp_path {tmp / "scgi"};
    log_format cronwire_sink '{LOG_FORMAT}';
    {log}
    keepalive_requests 100000000;
    keepalive_timeout 75s;
    client_max_body_size 1m;
    server_tokens off;
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        location = {READY_PATH} {{
            access_log off;
            return 200;
        }}
        location / {{
            return 200;
        }}
    }}
}}
"""


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One access-log line: what nginx answered to which ``webhook-id``, and when."""

    webhook_id: str  # "" when the request had none
    status: int
    at: float  # time.time() of the answer, to the millisecond
    scheduled_for: str  # x-cronwire-scheduled-for, "" when absent

    @property
    def acknowledged(self) -> bool:
        return 200 <= self.status <= 299


def parse_log_line(line: str) -> LogEntry | None:
    """A line of :data:`LOG_FORMAT`, or None for anything else (a torn last line)."""
    parts = line.split(" ")
    if len(parts) != 4:
        return None
    webhook_id, status, msec, scheduled_for = parts
    try:
        return LogEntry("" if webhook_id == "-" else webhook_id, int(status), float(msec),
                        "" if scheduled_for == "-" else scheduled_for)
    except ValueError:
        return None


def read_log(path: Path) -> Iterator[LogEntry]:
    """Every well-formed line of an access log, in file order."""
    if not path.exists():
        return
    with path.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            entry = parse_log_line(line.rstrip("\n"))
            if entry is not None:
                yield entry


@dataclass
class LogTally:
    """The counts of :meth:`cronwire.harness.sink.Sink.stats`, kept from an access log
    that is still being written: each :meth:`read` takes only the lines added since the
    last one (a line not yet complete waits for the next read)."""

    path: Path
    requests: int = 0
    received: int = 0
    duplicates: int = 0
    failed: int = 0
    acknowledged: set[str] = field(default_factory=set)
    _offset: int = 0

    def read(self) -> dict[str, float | None]:
        lags: list[float] = []
        for entry in self._new_entries():
            self.requests += 1
            if not entry.acknowledged:
                self.failed += 1
                continue
            self.received += 1
            if entry.webhook_id in self.acknowledged:
                self.duplicates += 1
            self.acknowledged.add(entry.webhook_id)
            instant = instant_seconds(entry.scheduled_for)
            if instant is not None:
                lags.append(entry.at - instant)
        return {"requests": self.requests, "received": self.received,
                "unique": len(self.acknowledged), "duplicates": self.duplicates,
                "failed": self.failed,
                "lag_p99_ms": round(percentile(lags, 0.99) * 1000, 1) if lags else None}

    def _new_entries(self) -> list[LogEntry]:
        try:
            with self.path.open("rb") as log:
                log.seek(self._offset)
                data = log.read()
        except FileNotFoundError:
            return []
        complete = data.rfind(b"\n") + 1
        self._offset += complete
        lines = data[:complete].decode("utf-8", errors="replace").splitlines()
        return [entry for line in lines if (entry := parse_log_line(line)) is not None]


def _kill_if_nginx_worker(pid: int) -> None:
    """SIGKILL ``pid`` if it is still an nginx worker (not a process that reused its id)."""
    with contextlib.suppress(OSError):
        if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"nginx: worker"):
            os.kill(pid, signal.SIGKILL)


@dataclass
class NginxSink:
    """nginx serving as a sink from ``directory`` (created; its prefix). With
    ``log_requests`` off it only answers (the HTTP bound's server needs no records)."""

    directory: Path
    log_requests: bool = True
    workers: str = "auto"
    binary: str | None = None
    kind: str = "nginx"
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    tally: LogTally | None = None

    def __post_init__(self) -> None:
        # nginx reads -c relative to -p: a relative directory (the load test's default
        # --out) would be joined to itself.
        self.directory = Path(self.directory).absolute()

    @property
    def access_log(self) -> Path:
        return self.directory / "access.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    async def start(self) -> NginxSink:
        binary = self.binary or nginx_binary()
        if binary is None:
            raise FileNotFoundError("nginx is not installed")
        (self.directory / "tmp").mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        config = self.directory / "nginx.conf"
        config.write_text(render_config(self.directory, self.port,
                                        self.access_log if self.log_requests else None,
                                        self.workers))
        self.tally = LogTally(self.access_log)
        log = self.directory / "nginx.out"
        self.proc = spawn([binary, "-p", str(self.directory), "-c", str(config),
                           "-e", str(self.directory / "error.log")], log=log)
        await wait_http(f"http://127.0.0.1:{self.port}{READY_PATH}", START_SECONDS, self.proc,
                        what="nginx", log=log)
        return self

    def stats(self) -> dict[str, float | None]:
        """Counts so far, from the access log (up to 250 ms behind); HarnessError once
        nginx has exited."""
        assert self.tally is not None, "start() first"
        if self.proc is not None and self.proc.poll() is not None:
            raise HarnessError(f"nginx exited with {self.proc.returncode}; "
                               f"see {self.directory / 'error.log'}")
        return self.tally.read()

    def pids(self) -> list[int]:
        """nginx's master and its workers, for their CPU time."""
        if self.proc is None or self.proc.poll() is not None:
            return []
        return [self.proc.pid, *child_pids(self.proc.pid)]

    def stop(self, within: float = 15.0) -> None:
        """SIGTERM: nginx's fast shutdown, which writes out the buffered access log. A
        master that had to be SIGKILLed leaves its workers running: they go too."""
        if self.proc is None or self.proc.poll() is not None:
            return
        workers = child_pids(self.proc.pid)
        if stop_process(self.proc, within) == -signal.SIGKILL:
            for pid in workers:
                _kill_if_nginx_worker(pid)

    def acknowledgements(self) -> Iterator[tuple[str, float]]:
        """(webhook-id, time) of every 2xx answer, in log order; complete once stopped."""
        return ((e.webhook_id, e.at) for e in read_log(self.access_log) if e.acknowledged)
