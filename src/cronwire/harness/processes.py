"""The harnesses' child processes: spawning, waiting until a process
answers over HTTP, and stopping it. Every wait is bounded in time."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import aiohttp

from cronwire.domain.errors import CronwireError


class HarnessError(CronwireError):
    """A harness could not set up what it needs (a process would not start or answer);
    not a broken guarantee."""


def spawn(args: Sequence[str], env: dict[str, str] | None = None,
          log: Path | None = None,
          preexec_fn: Callable[[], None] | None = None) -> subprocess.Popen[bytes]:
    """Start a child process (quick: it is not waited for here); its output goes to
    ``log`` if given, else to ours. ``preexec_fn`` runs in the child before ``exec``
    (e.g. ``resource.setrlimit`` to lower its fd limit)."""
    if log is None:
        return subprocess.Popen(list(args), env=env, stdin=subprocess.DEVNULL,
                                preexec_fn=preexec_fn)
    with log.open("wb") as out:
        return subprocess.Popen(list(args), env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, preexec_fn=preexec_fn)


def last_line(log: Path | None) -> str:
    """The last non-blank line of a log, to say why a process died."""
    if log is None or not log.exists():
        return ""
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


async def wait_http(url: str, within: float, proc: subprocess.Popen[bytes] | None = None, *,
                    what: str = "the process", log: Path | None = None) -> None:
    """Poll ``url`` until it answers 200 (a process has no event to await). HarnessError
    if ``proc`` exits first or nothing answers within ``within`` seconds."""
    deadline = time.monotonic() + within
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as http:
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                why = last_line(log)
                raise HarnessError(f"{what} exited with {proc.returncode} before answering"
                                   + (f": {why}" if why else ""))
            with contextlib.suppress(aiohttp.ClientError, OSError, TimeoutError):
                async with http.get(url) as response:
                    if response.status == 200:
                        return
            await asyncio.sleep(0.05)
    raise HarnessError(f"{what} did not answer {url} within {within:g}s")


def stop_process(proc: subprocess.Popen[bytes], within: float = 15.0) -> int:
    """SIGTERM (and SIGCONT, in case it is stopped), then SIGKILL after ``within``
    seconds; the exit status."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGCONT)
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(within)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    return int(proc.returncode)
