"""The test workers' turns on the machine (tests/turns.py): an alone test runs with no other."""

from __future__ import annotations

import fcntl
import threading
import time
from pathlib import Path

from tests.turns import MachineTurns


def _held(path: Path) -> bool:
    with open(path, "ab") as probe:
        try:
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(probe, fcntl.LOCK_UN)
        return False


def _wait_until(condition, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_an_alone_turn_waits_for_the_shared_one_and_no_shared_turn_starts_ahead_of_it(tmp_path):
    first, alone, second = MachineTurns(tmp_path), MachineTurns(tmp_path), MachineTurns(tmp_path)
    order: list[str] = []

    def run(turn, name: str) -> threading.Thread:
        def body() -> None:
            with turn:
                order.append(f"{name} starts")
                time.sleep(0.05)
                order.append(f"{name} ends")
        thread = threading.Thread(target=body)
        thread.start()
        return thread

    with first.shared():
        waiting_alone = run(alone.alone(), "alone")
        _wait_until(lambda: _held(tmp_path / "turnstile"))  # asked, and waiting for the shared turn
        waiting_shared = run(second.shared(), "second")
        time.sleep(0.2)
        order.append("first ends")
    waiting_alone.join(10)
    waiting_shared.join(10)
    for turns in (first, alone, second):
        turns.close()
    assert order == ["first ends", "alone starts", "alone ends", "second starts", "second ends"]


def test_shared_turns_run_together(tmp_path):
    first, second = MachineTurns(tmp_path), MachineTurns(tmp_path)
    with first.shared():
        entered = threading.Event()

        def body() -> None:
            with second.shared():
                entered.set()
        thread = threading.Thread(target=body)
        thread.start()
        assert entered.wait(10)
    thread.join(10)
    first.close()
    second.close()
