"""The topic rules that need no broker: the default replication factor, and which
refusals to create a topic end the start-up (an ACL: retrying cannot help) and which are
retried (no controller yet). Against real brokers: tests/integration/test_kafka_topic_settings.py."""

from __future__ import annotations

import pytest

from cronwire.adapters.kafka.topic import TopicRefused, creation_refused, replication_factor_for
from cronwire.domain.errors import BrokerError


@pytest.mark.parametrize(("configured", "brokers", "factor"),
                         [(None, 1, 1), (None, 2, 2), (None, 3, 3), (None, 9, 3),
                          (2, 9, 2), (5, 3, 5)])
def test_the_replication_factor_is_three_or_the_brokers_there_are(
    configured: int | None, brokers: int, factor: int
) -> None:
    assert replication_factor_for(configured, brokers) == factor


def test_an_acl_refusal_is_final_and_names_the_reason() -> None:
    refused = creation_refused("cronwire.runs", 29, "Authorization failed.", 12, 3)
    assert isinstance(refused, TopicRefused)
    message = str(refused)
    assert "'cronwire.runs' does not exist and the broker refused to create it" in message
    assert "TopicAuthorizationFailedError (error 29): Authorization failed." in message
    assert "12 partitions, replication factor 3" in message and "\n" not in message


@pytest.mark.parametrize("code", [7, 41])  # REQUEST_TIMED_OUT, NOT_CONTROLLER
def test_a_retriable_refusal_is_retried(code: int) -> None:
    refused = creation_refused("cronwire.runs", code, None, 12, 3)
    assert isinstance(refused, BrokerError) and not isinstance(refused, TopicRefused)
