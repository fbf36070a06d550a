"""``at_least_once.acknowledged_when_finished``: batch k made durable while batch k+1 is prepared,
each batch acknowledged only once its own ``finish`` returned True, against a stream that acknowledges
a batch the way faust's ``take_events`` does (when the next one is asked for, or the stream closes)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from sleuth.stream.services.at_least_once import acknowledged_when_finished

# A hang guard only (the agents below finish in milliseconds): a broken overlap deadlocks instead.
HANG_S = 30.0


class Message:
    def __init__(self, offset: int) -> None:
        self.offset = offset
        self.acked = False


class Event:
    """faust's ``Event.ack``: a no-op on a message already acknowledged (or held back as such)."""

    def __init__(self, offset: int, committed: list[int]) -> None:
        self.message = Message(offset)
        self.committed = committed

    def ack(self) -> bool:
        if self.message.acked:
            return False
        self.message.acked = True
        self.committed.append(self.message.offset)
        return True


class Stream:
    """``take_events`` over fixed batches, then waiting for more that never come (a live topic)."""

    def __init__(self, batches: list[list[int]], *, ends: bool = True) -> None:
        self.committed: list[int] = []
        self.batches = [[Event(offset, self.committed) for offset in batch] for batch in batches]
        self.ends = ends

    async def take_events(self, max_events: int, within: float):
        for batch in self.batches:
            try:
                yield batch
            finally:
                for event in batch:
                    event.ack()
        if not self.ends:
            await asyncio.Event().wait()


def offsets(events: Sequence[Event]) -> list[int]:
    return [event.message.offset for event in events]


def test_a_batch_is_made_durable_while_the_next_is_prepared_and_acknowledged_in_order() -> None:
    stream = Stream([[0, 1], [2, 3], [4]])
    trace: list[str] = []
    second_prepared = asyncio.Event()

    async def prepare(events: Sequence[Event]) -> list[int]:
        trace.append(f"prepare {offsets(events)}")
        if offsets(events) == [2, 3]:
            second_prepared.set()
        return offsets(events)

    async def finish(events: Sequence[Event], prepared: list[int]) -> bool:
        assert prepared == offsets(events)
        trace.append(f"finish {prepared}")
        if prepared == [0, 1]:
            # The first batch's insert is still in flight when the second is prepared:
            # without the overlap the second is never prepared and this waits forever.
            await second_prepared.wait()
            assert stream.committed == []
        trace.append(f"done {prepared}")
        return True

    agent = acknowledged_when_finished(prepare, finish, max_events=2, within_s=0.2)
    asyncio.run(asyncio.wait_for(agent(stream), HANG_S))
    assert trace.index("prepare [2, 3]") < trace.index("done [0, 1]")
    # One batch made durable at a time, in the order taken.
    assert [step for step in trace if not step.startswith("prepare")] == [
        "finish [0, 1]", "done [0, 1]", "finish [2, 3]", "done [2, 3]", "finish [4]", "done [4]"]
    assert stream.committed == [0, 1, 2, 3, 4]


def test_the_last_batch_is_acknowledged_when_finished_though_no_next_batch_comes() -> None:
    stream = Stream([[0, 1]], ends=False)

    async def prepare(events: Sequence[Event]) -> None:
        return None

    async def finish(events: Sequence[Event], prepared: None) -> bool:
        return True

    async def run() -> None:
        agent = asyncio.ensure_future(acknowledged_when_finished(prepare, finish, max_events=2, within_s=0.2)(stream))
        while stream.committed != [0, 1] and not agent.done():
            await asyncio.sleep(0)
        agent.cancel()

    asyncio.run(asyncio.wait_for(run(), HANG_S))
    assert stream.committed == [0, 1]


def test_a_batch_whose_finish_gave_up_is_never_acknowledged_nor_is_the_one_prepared_behind_it() -> None:
    stream = Stream([[0, 1], [2], [3]])
    finished: list[list[int]] = []

    async def prepare(events: Sequence[Event]) -> list[int]:
        return offsets(events)

    async def finish(events: Sequence[Event], prepared: list[int]) -> bool:
        finished.append(prepared)
        return False  # stopping while the store is away

    agent = acknowledged_when_finished(prepare, finish, max_events=2, within_s=0.2)
    asyncio.run(asyncio.wait_for(agent(stream), HANG_S))
    assert finished == [[0, 1]]
    assert stream.committed == []  # the stream's own acknowledgements of both taken batches were held back


def test_stopping_while_a_batch_is_in_flight_leaves_it_unacknowledged() -> None:
    stream = Stream([[0], [1]], ends=False)
    in_flight = asyncio.Event()

    async def prepare(events: Sequence[Event]) -> None:
        return None

    async def finish(events: Sequence[Event], prepared: None) -> bool:
        in_flight.set()
        await asyncio.Event().wait()  # an insert that never returns
        return True

    async def run() -> None:
        agent = asyncio.ensure_future(acknowledged_when_finished(prepare, finish, max_events=1, within_s=0.2)(stream))
        await in_flight.wait()
        agent.cancel()  # the app stopping its agents
        try:
            await agent
        except asyncio.CancelledError:
            pass

    asyncio.run(asyncio.wait_for(run(), HANG_S))
    assert stream.committed == []
