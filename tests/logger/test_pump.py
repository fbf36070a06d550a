"""The drainer thread's cadence: flushes every flush_s, CUDA-event polls in between, the CUDA clock
reference moved along at each flush."""

import time

from sleuth.logger.identity import Identity
from sleuth.logger.pump import Pump
from sleuth.logger.session import Session


class Counting:
    """The session's recorder, counting the polls and CUDA clock recalibrations that reach it."""

    def __init__(self, recorder) -> None:
        self.recorder, self.polls, self.recalibrations = recorder, 0, 0

    def poll(self) -> int:
        self.polls += 1
        return self.recorder.poll()

    def recalibrate(self) -> bool:
        self.recalibrations += 1
        return self.recorder.recalibrate()

    def __getattr__(self, name: str):
        return getattr(self.recorder, name)


def counting_pump(device_poll_s: float | None, impl) -> tuple[Pump, Counting]:
    """A pump (not started) flushing once a minute, and its session's counting recorder."""
    session = Session(
        ring=1024, impl=impl,
        resolve_identity=lambda: Identity("job-x", 0, 1, "h0", None),
        group_ranks=lambda group: ((0,), "0", "world", "world"),
    )
    session.recorder = counting = Counting(session.recorder)
    pump = Pump(session, lambda identity: None, flush_s=60.0)
    pump.device_poll_s = device_poll_s
    return pump, counting


def polls_in(seconds: float, device_poll_s: float | None, impl) -> int:
    pump, counting = counting_pump(device_poll_s, impl)
    pump.start()
    time.sleep(seconds)
    polls = counting.polls
    pump.finish()
    return polls


def recalibrations_in_flushes(flushes: int, device_poll_s: float | None, impl) -> int:
    pump, counting = counting_pump(device_poll_s, impl)  # never started: only these flushes run
    for _ in range(flushes):
        pump.flush()
    return counting.recalibrations


def test_cuda_slots_are_freed_between_flushes_when_operators_are_timed_on_the_device(impl):
    # One flush a minute: any poll seen within half a second is one of the device polls.
    assert polls_in(0.5, 0.01, impl) >= 5


def test_host_timed_operators_are_polled_only_at_a_flush(impl):
    assert polls_in(0.5, None, impl) == 0


def test_every_flush_moves_the_cuda_clock_reference_along_when_operators_are_timed_on_the_device(impl):
    # cudaEventElapsedTime's float milliseconds coarsen with the distance from the reference
    # (4 ms after 10 h): calibrated once, a long job's device times would lose their resolution.
    assert recalibrations_in_flushes(3, 0.01, impl) == 3


def test_host_timed_operators_never_touch_the_cuda_clock(impl):
    assert recalibrations_in_flushes(3, None, impl) == 0
