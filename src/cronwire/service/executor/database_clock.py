"""The replica's clock against the database's, as the claim loop measures it at each claim.

Fire lag is a database-clock figure (``scheduled_for`` is one), so a replica whose clock
is off corrects its send time by the offset before reporting it. Off by at most a
claim's latency."""

from __future__ import annotations

from datetime import datetime, timedelta


class DatabaseClock:
    """One writer (the claim loop, through :meth:`measured`), any number of readers."""

    def __init__(self) -> None:
        self._offset = timedelta(0)  # replica clock minus the database's

    def measured(self, replica_now: datetime, database_now: datetime) -> None:
        self._offset = replica_now - database_now

    def to_database(self, replica_time: datetime) -> datetime:
        """``replica_time`` as the database's clock read it."""
        return replica_time - self._offset
