"""At-least-once consumption for the stream services' faust agents (the worker, the alerter).

An agent made by ``acknowledged_when_done`` takes its topic's events in batches
(``Stream.take_events``) and hands each batch to ``handle``, which returns True once the batch's
effects are durable (inserted, saved, published) and False when it gave up because the service is
stopping. ``take_events`` acknowledges a batch when the agent asks for the next one, and also when
its generator is closed under the agent: the app's stop closes the stream's generators while
``handle`` may still be retrying. So a batch is held back (marked acknowledged, which makes
faust's own acknowledgement a no-op) from the moment it is taken, and released only once ``handle``
returned True; a batch not handled is never counted as processed: its offset is not committed and
the partition's next owner replays it, which the consumers' de-duplication (ReplacingMergeTree
tables, the alerter's replay rule) folds into what is already there.

``acknowledged_when_finished`` is the same contract in two steps for a handler whose batches cost
CPU before they are made durable (the worker: decode and detect, then insert): batch k is made
durable while batch k+1 is prepared, so a store's own work and the wait for its acknowledgement
overlap the next batch's CPU work instead of adding to it. Batches are prepared in order and made
durable in order, one at a time, and a batch is released only once its own step returned True.

``until_done`` is the retry a handler waits in while a store is away: with backoff, until it
succeeds or the service stops.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

_log = logging.getLogger(__name__)

P = TypeVar("P")  # what ``prepare`` made of a batch

#: The first pause after a failure; each next one doubles, up to the caller's ``retry_max_s``.
FIRST_RETRY_S = 0.2


def acknowledged_when_done(handle: Callable[[Sequence[Any]], Awaitable[bool]], *, max_events: int,
                           within_s: float) -> Callable[[Any], Awaitable[None]]:
    """A faust agent over batches of up to ``max_events`` events (or what came in ``within_s``) that
    acknowledges a batch only when ``handle`` returned True, and ends when it did not."""
    async def agent(stream: Any) -> None:
        async for events in stream.take_events(max_events, within=within_s):
            _mark_acknowledged(events, True)
            if not await handle(events):  # stopping (a cancelled retry raises through, held back too)
                return
            # ``take_events`` acknowledges them now, when the next batch is asked for (or the stream closes).
            _mark_acknowledged(events, False)

    return agent


def acknowledged_when_finished(prepare: Callable[[Sequence[Any]], Awaitable[P]],
                                finish: Callable[[Sequence[Any], P], Awaitable[bool]], *, max_events: int,
                                within_s: float) -> Callable[[Any], Awaitable[None]]:
    """A faust agent over batches of up to ``max_events`` events (or what came in ``within_s``) that
    runs ``finish(events, prepare(events))`` for each, ``finish`` of one batch alongside ``prepare``
    of the next; a batch is acknowledged when its ``finish`` returned True, and the agent ends at the
    first that did not (or raised)."""
    async def agent(stream: Any) -> None:
        finishing: asyncio.Future[bool] | None = None
        try:
            async for events in stream.take_events(max_events, within=within_s):
                _mark_acknowledged(events, True)
                prepared = await prepare(events)
                # Made durable in order: a batch's offsets never pass those of one still in flight.
                if finishing is not None and not await finishing:
                    return
                finishing = asyncio.ensure_future(_finish_then_release(finish, events, prepared))
            if finishing is not None:
                await finishing
        finally:
            # Stopping: a batch still in flight stays held back, and its partition's next owner replays it.
            if finishing is not None and not finishing.done():
                finishing.cancel()

    return agent


async def _finish_then_release(finish: Callable[[Sequence[Any], P], Awaitable[bool]], events: Sequence[Any],
                               prepared: P) -> bool:
    """``finish`` one batch; acknowledge its events (now, not when the next batch is taken: none may
    come) once it returned True."""
    if not await finish(events, prepared):
        return False
    _mark_acknowledged(events, False)
    for event in events:
        event.ack()
    return True


def _mark_acknowledged(events: Sequence[Any], acked: bool) -> None:
    """True: faust takes ``events`` as acknowledged already, so its own acknowledgement is a no-op and
    their offsets are not committed; False: its next acknowledgement of them counts."""
    for event in events:
        event.message.acked = acked


async def until_done(action: Callable[[], Awaitable[None]], stop: threading.Event, *, what: str, retry_max_s: float,
                     on_failure: Callable[[], None] = lambda: None,
                     first_failure: Callable[[], None] = lambda: None) -> bool:
    """Run ``action`` until it succeeds (True), backing off between attempts; False once ``stop`` is set."""
    delay, attempt = FIRST_RETRY_S, 0
    while True:
        attempt += 1
        try:
            await action()
            return True
        except Exception as error:
            if attempt == 1:
                first_failure()
            _log.warning("%s failed, retrying in %.1fs: %s", what, delay, error)
            on_failure()
        if stop.is_set():
            return False
        await asyncio.sleep(delay)
        delay = min(retry_max_s, delay * 2)
