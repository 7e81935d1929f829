"""The HTTP half of ``--compare``'s physical bound: a C client (wrk) posting
delivery-sized webhooks to a C server (nginx, configured as the load test's sink) over
loopback, 64 connections. What no Python client can beat on these cores.

The request is one cronwire would send: the method, body and every header built by the
domain's own ``delivery_headers`` and ``default_body`` for a schedule of the load test's
kind (no tenant headers, one signing secret), so the bytes on the wire are the same size.
wrk sends that one request over and over (a wrk Lua script sets method, body and
headers); a ``done`` hook prints wrk's own totals as one JSON line, which is what is read
back.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from cronwire.domain.delivery import DeliveryRequest, default_body, delivery_headers
from cronwire.domain.model import idempotency_key_for, run_id_for
from cronwire.harness.nginx_sink import NginxSink, nginx_binary
from cronwire.loadtest.plan import LoadTestError

CONNECTIONS = 64
THREADS = 2  # one per core
SECONDS = 10.0
MARKER = "cronwire-wrk "  # starts the done hook's line
SAMPLE_SECRET = "whsec_" + "A" * 32  # 24 bytes, as new_signing_secret makes them

DONE_HOOK = f"""
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{MARKER}{{"requests":%d,"duration_us":%d,"connect":%d,"read":%d,"write":%d,'
    .. '"status":%d,"timeout":%d}}\\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout))
end
"""


def wrk_binary() -> str | None:
    """The wrk executable, or None when it is not installed."""
    return shutil.which("wrk")


def delivery_sized_request(url: str = "http://127.0.0.1/hook") -> tuple[str, dict[str, str], bytes]:
    """(method, headers, body) of a first attempt of a load-test schedule's run, built the
    way the deliverers build theirs (Host and Content-Length are the client's)."""
    schedule_id = uuid.UUID(int=0x1234)
    scheduled_for = datetime(2026, 1, 1, tzinfo=UTC)
    run_id = run_id_for(schedule_id, scheduled_for)
    body = default_body(schedule_id, run_id, scheduled_for, 1)
    request = DeliveryRequest(
        run_id=run_id, schedule_id=schedule_id, tenant_id=uuid.UUID(int=1),
        idempotency_key=idempotency_key_for(run_id), scheduled_for=scheduled_for, attempt=1,
        method="POST", url=url, headers={}, body=body, signing_secrets=(SAMPLE_SECRET,),
        timeout_seconds=10.0,
    )
    return request.method, delivery_headers(request, int(scheduled_for.timestamp())), body


def lua_string(text: str) -> str:
    """``text`` as a Lua string literal (decimal escapes for anything but plain ASCII)."""
    out = []
    for byte in text.encode("utf-8"):
        char = chr(byte)
        if char in '"\\' or not 0x20 <= byte < 0x7F:
            out.append(f"\\{byte:03d}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def lua_script(method: str, headers: dict[str, str], body: bytes) -> str:
    """A wrk script sending this one request, and printing wrk's totals when done."""
    lines = [f"wrk.method = {lua_string(method)}",
             f"wrk.body = {lua_string(body.decode('utf-8'))}"]
    lines += [f"wrk.headers[{lua_string(name)}] = {lua_string(value)}"
              for name, value in headers.items()]
    return "\n".join(lines) + "\n" + DONE_HOOK


@dataclass(frozen=True, slots=True)
class WrkResult:
    requests: int  # responses completed in the run
    seconds: float
    errors: dict[str, int]  # connect, read, write, status (non-2xx/3xx), timeout

    @property
    def per_second(self) -> float:
        return self.requests / self.seconds if self.seconds > 0 else 0.0


def parse_wrk_output(stdout: str) -> WrkResult:
    """wrk's totals from its output (the done hook's line); LoadTestError without one."""
    for line in stdout.splitlines():
        if line.startswith(MARKER):
            try:
                totals = json.loads(line.removeprefix(MARKER))
                return WrkResult(
                    requests=int(totals["requests"]), seconds=int(totals["duration_us"]) / 1e6,
                    errors={k: int(totals[k]) for k in
                            ("connect", "read", "write", "status", "timeout")})
            except (ValueError, KeyError, TypeError) as exc:
                raise LoadTestError(f"wrk printed unreadable totals: {line!r} ({exc})") from None
    tail = stdout.strip().splitlines()[-1:] or ["nothing"]
    raise LoadTestError(f"wrk printed no totals (last line: {tail[0]!r})")


def run_wrk(url: str, script: Path, seconds: float, *, connections: int = CONNECTIONS,
            threads: int = THREADS, binary: str | None = None) -> WrkResult:
    """wrk against ``url`` for ``seconds``; LoadTestError if it fails or any request got an
    error (a bound with errors in it would not be the bound)."""
    wrk = binary or wrk_binary()
    if wrk is None:
        raise LoadTestError("wrk is not installed")
    done = subprocess.run(
        [wrk, f"-t{threads}", f"-c{connections}", f"-d{max(1, round(seconds))}s",
         "-s", str(script), url],
        capture_output=True, text=True, timeout=seconds + 60, stdin=subprocess.DEVNULL,
        check=False,
    )
    if done.returncode != 0:
        raise LoadTestError(f"wrk exited with {done.returncode}: {done.stderr.strip()[-300:]}")
    result = parse_wrk_output(done.stdout)
    failed = {kind: n for kind, n in result.errors.items() if n}
    if failed or result.requests == 0:
        raise LoadTestError(f"wrk's run was not clean: {result.requests} requests, "
                            f"errors {failed}")
    return result


def http_bound_available() -> bool:
    return wrk_binary() is not None and nginx_binary() is not None


def measure_http_bound(directory: Path, seconds: float = SECONDS) -> WrkResult:
    """wrk's delivery-sized POSTs to an nginx set up as the load test's sink (access log
    and all) in ``directory``; LoadTestError if either is missing or the run fails."""
    if not http_bound_available():
        raise LoadTestError("wrk or nginx is not installed")
    directory.mkdir(parents=True, exist_ok=True)
    server = asyncio.run(NginxSink(directory / "nginx").start())
    try:
        method, headers, body = delivery_sized_request(server.url)
        script = directory / "delivery.lua"
        script.write_text(lua_script(method, headers, body), encoding="utf-8")
        return run_wrk(server.url, script, seconds)
    finally:
        server.stop()
