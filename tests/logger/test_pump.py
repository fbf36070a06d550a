"""The drainer thread's cadence: flushes every flush_s, CUDA-event polls in between."""

import time

from sleuth.logger.identity import Identity
from sleuth.logger.pump import Pump
from sleuth.logger.session import Session


class CountingPolls:
    """The session's recorder, counting the polls that reach it."""

    def __init__(self, recorder) -> None:
        self.recorder, self.polls = recorder, 0

    def poll(self) -> int:
        self.polls += 1
        return self.recorder.poll()

    def __getattr__(self, name: str):
        return getattr(self.recorder, name)


def polls_in(seconds: float, device_poll_s: float | None, impl) -> int:
    session = Session(
        ring=1024, impl=impl,
        resolve_identity=lambda: Identity("job-x", 0, 1, "h0", None),
        group_ranks=lambda group: ((0,), "0", "world", "world"),
    )
    session.recorder = counting = CountingPolls(session.recorder)
    pump = Pump(session, lambda identity: None, flush_s=60.0)
    pump.device_poll_s = device_poll_s
    pump.start()
    time.sleep(seconds)
    polls = counting.polls
    pump.finish()
    return polls


def test_cuda_slots_are_freed_between_flushes_when_operators_are_timed_on_the_device(impl):
    # One flush a minute: any poll seen within half a second is one of the device polls.
    assert polls_in(0.5, 0.01, impl) >= 5


def test_host_timed_operators_are_polled_only_at_a_flush(impl):
    assert polls_in(0.5, None, impl) == 0
