"""A request that may have reached the receiver is never sent again
under the same attempt. A kept-alive connection the receiver closes after reading the
request fails the attempt (connection error, retryable: the retry policy decides, and the
history shows it); the receiver has seen the request once."""

from __future__ import annotations

from cronwire.domain.delivery import Outcome
from tests.support.deliverer_sink import Deliverer, make_request
from tests.support.hostile import Conn, Receiver, answer


async def answer_once_then_hang_up_after_reading(conn: Conn) -> None:
    """The first connection answers one request, then reads the next and closes without a
    word; later connections answer everything."""
    while await conn.request() is not None:
        if conn.number == 0 and conn.served == 2:
            return  # read, not answered: the receiver goes away
        await conn.send(answer())


async def test_a_reused_connection_closed_after_the_request_is_not_resent(
    deliverer: Deliverer,
) -> None:
    async with Receiver(answer_once_then_hang_up_after_reading) as receiver:
        first = await deliverer.deliver(make_request(receiver.url(), idempotency_key="msg_1"))
        second = await deliverer.deliver(make_request(receiver.url(), idempotency_key="msg_2"))
    assert first.outcome is Outcome.SUCCESS, first
    ids = [request.headers["webhook-id"] for request in receiver.requests]
    assert ids.count("msg_2") == 1, ids  # never sent twice
    if second.outcome is not Outcome.SUCCESS:  # it went out on the reused connection
        assert second.outcome is Outcome.CONNECTION_ERROR and second.retryable, second
        assert second.error is not None and "not resent" in second.error, second
