"""Flush on SIGTERM: launchers stop a job's workers with it, and its last records matter most.

torchelastic and Slurm end a worker with SIGTERM (then SIGKILL after a grace period). Python's
default action kills the process at once, atexit handlers unrun, so the records of the final
seconds (often the slow or stuck ones that made someone stop the job) would be lost. The logger
flushes first, then lets the signal do what it would have done: the job's own handler runs, or
the default action kills the process with the same signal, so the exit status is unchanged.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["flush_on_sigterm"]

log = logging.getLogger("sleuth.logger")

#: Seconds the flush may take: within the launchers' grace periods (torchelastic's 30 s).
GRACE_S = 10.0


def flush_on_sigterm(finish: Callable[[float], None]) -> Callable[[], None] | None:
    """Run ``finish(GRACE_S)`` on SIGTERM before the handler that was there; returns what puts
    that handler back, or None where no handler can be set (not the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        log.info("sleuth logger: not on the main thread: records are not flushed on SIGTERM")
        return None
    previous = signal.getsignal(signal.SIGTERM)

    def on_sigterm(signum: int, frame: Any) -> None:
        try:
            finish(GRACE_S)
        except Exception as error:  # the signal must still take its course
            log.warning("sleuth logger: the flush on SIGTERM failed: %r", error)
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_sigterm)

    def restore() -> None:
        if signal.getsignal(signal.SIGTERM) is on_sigterm:
            signal.signal(signal.SIGTERM, previous)

    return restore
