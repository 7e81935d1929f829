"""What the broker can do, asked of the broker itself (never guessed from its name).

The idempotent producer needs a producer id (InitProducerId). Apache Kafka grants one —
after a moment on a fresh cluster, answering COORDINATOR_NOT_AVAILABLE until its producer
id manager is ready — while tansu answers UNKNOWN_SERVER_ERROR for good. aiokafka's
idempotent producer waits for that id in ``start()`` for ever, so it is turned on only
where the broker has just granted one. A probe allocates one unused producer id on the
broker (one per link generation: as cheap as a producer start).
"""

from __future__ import annotations

import asyncio
import logging

from aiokafka.errors import for_code
from aiokafka.protocol.transaction import InitProducerIdRequest

from cronwire.adapters.kafka.calls import KAFKA_FAILURES
from cronwire.adapters.kafka.one_request import ask

log = logging.getLogger(__name__)


class _GiveUp(Exception):
    """No broker could be asked, or one answered an error asking again will not change."""


async def grants_producer_ids(bootstrap: str, *, within: float = 5.0,
                              request_timeout_ms: int = 3000) -> bool:
    """True when the broker grants a producer id within ``within`` seconds; False when it
    refuses (a non-retriable error), cannot be asked, or is still not ready by then."""
    servers = [server.strip() for server in bootstrap.split(",") if server.strip()]
    last = "no answer"
    try:
        async with asyncio.timeout(within):
            while True:
                answered = False
                for server in servers:  # any broker grants a non-transactional id
                    try:
                        answer = await ask(server, InitProducerIdRequest(None, 60_000),
                                           client_id="cronwire-probe",
                                           request_timeout_ms=request_timeout_ms)
                    except (*KAFKA_FAILURES, ValueError) as exc:
                        last = f"{type(exc).__name__}: {exc}"
                        continue
                    answered = True
                    if answer.error_code == 0 and answer.producer_id >= 0:
                        return True
                    error = for_code(answer.error_code)
                    last = f"{error.__name__} (error {answer.error_code})"
                    if not getattr(error, "retriable", False):
                        raise _GiveUp
                if not answered:
                    raise _GiveUp
                await asyncio.sleep(0.2)  # not ready yet (a fresh cluster): ask again
    except (_GiveUp, TimeoutError):
        pass
    log.info("kafka broker %s grants no producer id (%s): the publisher runs without "
             "idempotence (a duplicated key only costs a claim that finds nothing)",
             bootstrap, last)
    return False
