"""Work run beside the caller's on one long-lived thread.

The compiled sweep, the group spreads, the level ordering and numpy's sorts release the GIL, so two
independent steps of one attribution (two replays, the two halves of a preparation) use both of a
machine's cores. The thread lives as long as the process, so the sweep's scratch buffers it keeps
(``timeline._scratch``) are paid for once.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

__all__ = ["beside"]

T = TypeVar("T")

_lock = threading.Lock()
_executor: ThreadPoolExecutor | None = None
_owner_pid = 0
_THREAD_NAME = "sleuth-whatif-beside"


def beside(work: Callable[..., T], /, *args: object) -> Future[T]:
    """``work(*args)`` started on the side thread; from that thread itself, run at once (a step
    it runs never waits on its own queue)."""
    global _executor, _owner_pid
    if threading.current_thread().name.startswith(_THREAD_NAME):
        done: Future[T] = Future()
        try:
            done.set_result(work(*args))
        except BaseException as error:
            done.set_exception(error)
        return done
    with _lock:
        # A forked child inherits the executor but not its thread: it starts its own.
        if _executor is None or _owner_pid != os.getpid():
            _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=_THREAD_NAME)
            _owner_pid = os.getpid()
        return _executor.submit(work, *args)
