"""Work beside the caller's (sleuth.whatif.beside): results and errors come back, nesting never deadlocks,
and a forked child gets a thread of its own."""

from __future__ import annotations

import os
import threading

import pytest

from sleuth.whatif.beside import beside


def test_the_work_runs_on_the_side_thread_and_its_result_comes_back():
    future = beside(lambda a, b: (a + b, threading.current_thread() is threading.main_thread()), 2, 3)
    assert future.result(timeout=10) == (5, False)


def test_an_error_of_the_work_is_raised_where_its_result_is_asked_for():
    def fails() -> None:
        raise ValueError("the work's own error")
    with pytest.raises(ValueError, match="the work's own error"):
        beside(fails).result(timeout=10)


def test_work_the_side_thread_starts_beside_itself_runs_at_once_instead_of_waiting_on_its_own_queue():
    def outer() -> int:
        return beside(lambda: 7).result(timeout=10) + 1
    assert beside(outer).result(timeout=10) == 8


def test_a_forked_child_runs_its_work_on_a_thread_of_its_own():
    assert beside(lambda: 1).result(timeout=10) == 1  # the parent's thread exists before the fork
    child = os.fork()
    if child == 0:  # the child: exit 0 only if the work came back
        try:
            code = 0 if beside(lambda: 41 + 1).result(timeout=10) == 42 else 1
        except BaseException:
            code = 2
        os._exit(code)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
