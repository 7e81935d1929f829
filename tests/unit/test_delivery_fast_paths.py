"""The hand-formatted and memoised request parts equal what the general code gives."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from datetime import UTC, datetime, timedelta
from uuid import uuid4

from hypothesis import given
from hypothesis import strategies as st

from cronwire.domain.delivery import default_body, new_signing_secret, rfc3339_utc, sign


@given(
    st.datetimes(timezones=st.just(UTC), min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1)),
    st.integers(min_value=0, max_value=8),
)
def test_default_body_is_exactly_the_compact_json_document(at: datetime, attempt: int) -> None:
    schedule_id, run_id = uuid4(), uuid4()
    document = {"schedule_id": str(schedule_id), "run_id": str(run_id),
                "scheduled_for": rfc3339_utc(at), "attempt": attempt}
    expected = json.dumps(document, separators=(",", ":")).encode()
    assert default_body(schedule_id, run_id, at, attempt) == expected


def test_signature_equals_the_plain_hmac_for_each_secret() -> None:
    secrets = [new_signing_secret(), new_signing_secret()]
    signed = b"msg_1.1700000000." + b"{}"
    expected = " ".join(
        "v1," + base64.b64encode(hmac.new(base64.b64decode(s.removeprefix("whsec_")), signed,
                                          hashlib.sha256).digest()).decode()
        for s in secrets
    )
    assert sign(secrets, "msg_1", 1700000000, b"{}") == expected
    assert sign(secrets, "msg_1", 1700000000, b"{}") == expected  # memoised key: same answer


def test_memoised_rfc3339_keeps_the_offset_conversion() -> None:
    plus_two = datetime(2027, 3, 28, 3, 0, tzinfo=UTC) + timedelta(microseconds=5)
    assert rfc3339_utc(plus_two) == "2027-03-28T03:00:00.000005Z"
    assert rfc3339_utc(plus_two.astimezone(__import__("zoneinfo").ZoneInfo("Europe/Berlin"))) \
        == "2027-03-28T03:00:00.000005Z"
