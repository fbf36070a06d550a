"""The chaos run's private stack puts its variables in ``os.environ`` for one thread at a time."""

from __future__ import annotations

import os
import threading
import time

from sleuth.sim.chaos.stack import PrivateStack

from tests.conftest import REPO_ROOT


def test_two_threads_overlapping_in_the_stacks_environment_leave_os_environ_as_it_was(tmp_path) -> None:
    # The fault thread asks for a process's pid while the run's thread restarts a service: had the
    # second saved the stack's variables as "before", the later to finish would leave them for the
    # whole process (the session's own services then looked for under the stack's ports and folder).
    stack = PrivateStack.create(REPO_ROOT, tmp_path / "state")
    before = {name: os.environ.get(name) for name in stack.env()}
    inside, release, first_done = threading.Event(), threading.Event(), threading.Event()

    def first() -> None:
        with stack.environment():
            inside.set()
            release.wait(10)
        first_done.set()

    def second() -> None:
        inside.wait(10)
        with stack.environment():
            first_done.wait(10)

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    assert inside.wait(10)
    time.sleep(0.2)  # the second thread is at the door, or inside
    release.set()
    for thread in threads:
        thread.join(20)
    assert not any(thread.is_alive() for thread in threads)
    assert {name: os.environ.get(name) for name in stack.env()} == before
