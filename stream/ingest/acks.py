"""Awaiting Kafka's acknowledgements from asyncio without blocking the event loop.

kafka-python's send futures are settled on the producer's own thread; ``acknowledged`` hands each
one that is not done yet back to the loop through ``call_soon_threadsafe``, then reads every
future's outcome once, so a failed send always surfaces as ``ServiceError`` (the client resends).
"""

from __future__ import annotations

import asyncio
from typing import Any

from sleuth.errors import ServiceError


def _settle(signal: asyncio.Future) -> None:
    if not signal.done():
        signal.set_result(None)


def _wake(loop: asyncio.AbstractEventLoop, signal: asyncio.Future) -> None:
    try:
        loop.call_soon_threadsafe(_settle, signal)
    except RuntimeError:  # the loop closed (the gateway stopped): no one waits any more
        pass


async def acknowledged(futures: list[Any], *, timeout_s: float) -> None:
    """Return once Kafka acknowledged every future, or raise ``ServiceError`` (a failure, or ``timeout_s``)."""
    loop = asyncio.get_running_loop()
    waiting = []
    for future in futures:
        if not future.is_done:
            signal = loop.create_future()
            # kafka-python calls this at once when the send finished in between: no wake-up is lost.
            future.add_both(lambda _outcome, signal=signal: _wake(loop, signal))
            waiting.append(signal)
    if waiting:
        try:
            await asyncio.wait_for(asyncio.gather(*waiting), timeout_s)
        except asyncio.TimeoutError:
            raise ServiceError(f"Kafka did not acknowledge a batch within {timeout_s:.0f}s") from None
    for future in futures:
        try:
            future.get(timeout=0)
        except Exception as error:
            raise ServiceError(f"Kafka did not acknowledge a batch: {error}") from None
