"""The trace of one simulated seed: every fault, database call and exchange with a
receiver, in order, with its virtual time. Its hash is the run's fingerprint: the same
seed gives the same hash, run after run (the replay guarantee)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable


class Trace:
    def __init__(self, time: Callable[[], float]) -> None:
        self._time = time
        self._hash = hashlib.blake2b(digest_size=16)
        self.events: list[str] = []

    def add(self, kind: str, detail: str) -> None:
        line = f"{self._time():.6f} {kind} {detail}"
        self.events.append(line)
        self._hash.update(line.encode())
        self._hash.update(b"\n")

    @property
    def digest(self) -> str:
        return self._hash.hexdigest()


def short(value: object) -> str:
    """A run id (or any UUID) as its first eight hex digits: enough in one seed's trace."""
    return str(value)[:8]
