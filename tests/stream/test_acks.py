"""``acks.acknowledged``: the gateway's wait for Kafka, on the event loop, with kafka-python's own
``Future`` settled from another thread as the producer's sender thread settles it."""

from __future__ import annotations

import asyncio
import threading

import pytest
from kafka.future import Future

from sleuth.errors import ServiceError
from sleuth.stream.ingest.acks import acknowledged


class Send(Future):
    """kafka-python's future with the ``get`` of its ``FutureRecordMetadata``."""

    def get(self, timeout: float | None = None):
        if not self.is_done:
            raise TimeoutError("not done")
        if self.failed():
            raise self.exception
        return self.value


def settle_later(future: Send, error: Exception | None, after: threading.Event) -> threading.Thread:
    def settle() -> None:
        after.wait()
        future.failure(error) if error else future.success("offset 7")

    thread = threading.Thread(target=settle)
    thread.start()
    return thread


async def wait_while_settled(futures: list[Send], outcomes: list[Exception | None], timeout_s: float = 30) -> None:
    go = threading.Event()
    threads = [settle_later(f, e, go) for f, e in zip(futures, outcomes) if not f.is_done]
    waiting = asyncio.create_task(acknowledged(futures, timeout_s=timeout_s))
    await asyncio.sleep(0.05)  # the wait is parked on the loop before the sender thread settles
    assert not waiting.done()
    go.set()
    try:
        await waiting
    finally:
        for thread in threads:
            thread.join()


def test_returns_once_every_send_is_acknowledged_from_the_senders_thread() -> None:
    done = Send().success("offset 1")
    asyncio.run(wait_while_settled([done, Send(), Send()], [None, None, None]))


def test_a_send_that_fails_after_the_wait_began_fails_it_retryably() -> None:
    with pytest.raises(ServiceError, match="broker went away"):
        asyncio.run(wait_while_settled([Send(), Send()], [None, ConnectionError("broker went away")]))


def test_a_send_never_answered_fails_the_wait_at_its_timeout() -> None:
    with pytest.raises(ServiceError, match="within"):
        asyncio.run(acknowledged([Send()], timeout_s=0.2))
