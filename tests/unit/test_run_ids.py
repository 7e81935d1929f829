"""Run ids are fixed forever: the planner's fast forms must equal uuid5 of the documented name."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given
from hypothesis import strategies as st

from cronwire.domain.model import (
    RUN_NAMESPACE,
    idempotency_key_for,
    run_id_for,
    run_id_hexes,
)

instants = st.datetimes(
    min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1),
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30)),
                               timezone(timedelta(hours=-8))]),
)


def documented(schedule_id: uuid.UUID, at: datetime) -> uuid.UUID:
    delta = at.astimezone(UTC) - datetime(1970, 1, 1, tzinfo=UTC)
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return uuid.uuid5(RUN_NAMESPACE, f"{schedule_id}/{micros}")


@given(st.uuids(), instants)
def test_run_id_is_uuid5_of_schedule_and_epoch_micros(schedule_id: uuid.UUID,
                                                      at: datetime) -> None:
    assert run_id_for(schedule_id, at) == documented(schedule_id, at)


@given(st.lists(st.tuples(st.uuids(), instants), max_size=20))
def test_batch_hexes_match_one_by_one_ids_and_keys(
    occurrences: list[tuple[uuid.UUID, datetime]],
) -> None:
    hexes = run_id_hexes(occurrences)
    assert hexes == [documented(sid, at).hex for sid, at in occurrences]
    assert ["msg_" + h for h in hexes] == [
        idempotency_key_for(run_id_for(sid, at)) for sid, at in occurrences]


def test_a_known_id_never_changes() -> None:
    sid = uuid.UUID("00000000-0000-4000-8000-000000000001")
    at = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    assert run_id_for(sid, at) == uuid.uuid5(RUN_NAMESPACE, f"{sid}/1796126400000000")
