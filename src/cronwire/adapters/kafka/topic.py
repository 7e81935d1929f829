"""The run-key topic on a real cluster: find it, or create it through the admin API.

* The topic is looked up first (a metadata request for every topic, never for ours by
  name: tansu creates a topic a metadata request names). One that exists is used as it
  is — whoever made it (an operator, under ACLs that grant us no CREATE) decided its
  partitions and replication.
* A missing topic is created with ``SCHEDULER_KAFKA_PARTITIONS`` partitions and
  ``SCHEDULER_KAFKA_REPLICATION_FACTOR`` replicas (unset: 3, or the number of brokers if
  fewer; a single-node broker gets 1).
* A broker that refuses for good (an ACL, a replication factor above its broker count, a
  creation policy) raises :class:`TopicRefused`, which names the reason; a retriable
  error (no controller yet, a timeout) raises a plain :class:`BrokerError` to retry.
* An existing topic with fewer partitions than configured is used and logged: cronwire
  never adds partitions (that would move tenants' keys between partitions while
  consumers hold offsets); only that many executors receive keys.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import for_code

from cronwire.domain.errors import BrokerError

log = logging.getLogger(__name__)
TOPIC_ALREADY_EXISTS = 36
DEFAULT_REPLICATION_FACTOR = 3


class TopicRefused(BrokerError):
    """The topic is missing and the broker will not create it (retrying cannot help)."""


@dataclass(frozen=True, slots=True)
class TopicLayout:
    partitions: int
    replication_factor: int | None  # None: the topic existed; we did not choose it
    created: bool


def replication_factor_for(configured: int | None, brokers: int) -> int:
    """The configured factor, else 3 capped by the cluster's size."""
    if configured is not None:
        return configured
    return max(1, min(DEFAULT_REPLICATION_FACTOR, brokers))


def partitions_in(metadata: dict[str, Any], topic: str) -> int | None:
    """Partitions of ``topic`` in a metadata answer for every topic, None if it is missing."""
    for described in metadata.get("topics") or []:
        if described.get("topic") == topic and described.get("error_code", 0) == 0:
            return len(described.get("partitions") or [])
    return None


def existing_layout(topic: str, found: int, configured: int) -> TopicLayout:
    """An existing topic is used as it is; fewer partitions than configured is logged."""
    if found < configured:
        log.warning(
            "kafka topic %s has %d partitions, fewer than SCHEDULER_KAFKA_PARTITIONS=%d: "
            "cronwire does not add partitions to an existing topic; at most %d executors "
            "receive keys, the rest claim only what the sweeper finds overdue",
            topic, found, configured, found)
    return TopicLayout(found, None, created=False)


async def create_topic(admin: AIOKafkaAdminClient, topic: str, partitions: int,
                       factor: int) -> TopicLayout | None:
    """Create the topic (``admin`` is started); None if another client was quicker."""
    response = await admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=factor)])
    for name, code, message in _topic_errors(response):
        if code == TOPIC_ALREADY_EXISTS:
            return None
        if code != 0:
            raise creation_refused(name, code, message, partitions, factor)
    log.info("created kafka topic %s: %d partitions, replication factor %d",
             topic, partitions, factor)
    return TopicLayout(partitions, factor, created=True)


def creation_refused(topic: str, code: int, message: str | None, partitions: int,
             factor: int) -> BrokerError:
    error = for_code(code)
    reason = f"{error.__name__} (error {code}){': ' + message if message else ''}"
    if getattr(error, "retriable", False):
        return BrokerError(f"creating topic {topic} failed: {reason}")
    return TopicRefused(
        f"kafka topic {topic!r} does not exist and the broker refused to create it "
        f"({partitions} partitions, replication factor {factor}): {reason}; create it "
        f"yourself, or grant this client CREATE, or set SCHEDULER_KAFKA_REPLICATION_FACTOR"
        f"/SCHEDULER_KAFKA_PARTITIONS to what the cluster allows")


def _topic_errors(response: object) -> list[tuple[str, int, str | None]]:
    errors = getattr(response, "topic_errors", None) or []
    out = []
    for entry in errors:
        topic, code = entry[0], entry[1]
        message = entry[2] if len(entry) > 2 else None
        out.append((str(topic), int(code), message))
    return out

