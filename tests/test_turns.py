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


def test_an_alone_turn_inside_a_shared_one_waits_for_the_other_worker_and_no_shared_turn_starts_ahead(tmp_path):
    mine, other = MachineTurns(tmp_path), MachineTurns(tmp_path)
    order: list[str] = []
    with other.shared():
        def body() -> None:
            with mine.shared():
                with mine.alone():
                    order.append("job starts")
                    time.sleep(0.05)
                    order.append("job ends")
                _wait_until(lambda: len(order) == 4)  # the next test runs beside the rest of this one
                order.append("test ends")
        test = threading.Thread(target=body)
        test.start()
        _wait_until(lambda: _held(tmp_path / "turnstile"))  # the job asked, and waits for the other test
        time.sleep(0.1)
        order.append("other test ends")
    with other.shared():  # after the job, beside the rest of its test
        order.append("next test starts")
    test.join(10)
    mine.close()
    other.close()
    assert order == ["other test ends", "job starts", "job ends", "next test starts", "test ends"]


def test_two_workers_asking_to_be_alone_inside_their_shared_turns_take_turns(tmp_path):
    workers = [MachineTurns(tmp_path), MachineTurns(tmp_path)]
    both_sharing = threading.Barrier(2)
    running: list[int] = []
    overlapped: list[bool] = []

    def body(turns: MachineTurns) -> None:
        with turns.shared():
            both_sharing.wait(10)
            with turns.alone():
                running.append(1)
                overlapped.append(len(running) > 1)
                time.sleep(0.05)
                running.pop()
    threads = [threading.Thread(target=body, args=(turns,)) for turns in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert not any(thread.is_alive() for thread in threads), "deadlocked"
    for turns in workers:
        turns.close()
    assert overlapped == [False, False]
