"""Process-group capture with native hooks: the records of :mod:`~.capture`, no Python per operator.

The same hooks as :class:`~.capture.ProcessGroupHooks` (every group, whoever issues its
operators; later groups hooked when torch registers them), but compiled (:mod:`~.native`): the
records, their kinds, sizes, peers, sequence numbers and iterations are the Python hooks', and a
group's first operator calls into Python once to resolve the group. Works without a future (gloo's
P2P) end when Python's ``Work.wait`` returns or when the drainer sees them completed, as there.

What stays on the Python process-group hooks, group by group:

* every group while CUDA-event timing is on (a CUDA tensor's operator is timed on its stream by
  events, which the Python hooks record; gloo on CUDA tensors included);
* groups with an NCCL backend while sleuth's NCCL profiler plugin records NCCL's operators (the
  Python hooks leave those operators' CUDA tensors to the plugin).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch.distributed as dist

from sleuth.errors import BuildError
from sleuth.logger import core, native
from sleuth.logger.capture import HOOK_ID, OUTPUT_SIDE_OPS, ProcessGroupHooks, backend_names, op_kinds_by_hook_number
from sleuth.logger.hooks import _fail_once
from sleuth.records import OpKind

__all__ = ["NativeProcessGroupHooks", "unavailable"]

def unavailable() -> str | None:
    """Why the native hooks cannot run in this process, or None when they can (builds them)."""
    if core.impl.IMPLEMENTATION != "c":
        return f"the recorder is the pure-Python twin ({core.impl.__name__}), native hooks need the C one"
    try:
        native.load()
    except BuildError as error:
        return str(error)
    return None


class NativeProcessGroupHooks(ProcessGroupHooks):
    """The logger's native hooks on every process group; ``remove()`` takes them off again.
    Building the extension happens in ``__init__``: BuildError when this machine cannot."""

    def __init__(self, session: Any, *, on_destroy: Callable[[], None] | None = None) -> None:
        super().__init__(session, on_destroy=on_destroy)
        # One capture for the hooks' life: its counters outlive a remove() and install().
        self._capture = native.load().Capture(
            session.recorder, self._resolve, op_kinds_by_hook_number(),
            send=int(OpKind.SEND), recv=int(OpKind.RECV), output_side=sorted(OUTPUT_SIDE_OPS),
        )

    def _resolve(self, key: int) -> tuple[int, list[int]] | None:
        """A group's first native operator: its communicator code and members (global ranks)."""
        try:
            group = self._hooked[key]
            self._register_groups()
            info = self.session.group(group)
            return info.code, list(info.ranks)
        except Exception as error:  # the group's operators go unrecorded, the job runs on
            _fail_once("resolving a process group for the native hooks", error)
            return None

    def hook(self, group: Any) -> None:
        if group is None or id(group) in self._hooked or not isinstance(group, dist.ProcessGroup):
            return
        if self.cuda or (self.defer_nccl and "nccl" in backend_names(group)):
            super().hook(group)  # CUDA events, or NCCL's operators left to the plugin: the Python hooks'
            return
        self._hooked[id(group)] = group  # first: another thread's first operator may resolve it at once
        try:
            self._capture.hook(group, id(group), HOOK_ID)
        except Exception as error:
            del self._hooked[id(group)]
            _fail_once("hooking a process group natively", error)

    def poll_waiting(self) -> None:
        super().poll_waiting()
        self._capture.poll()
        failure = self._capture.failure
        if failure:
            _fail_once("a native hook", RuntimeError(failure))

    def _wait(self, original: Callable) -> Callable:
        wait = super()._wait(original)
        capture = self._capture

        @functools.wraps(original)
        def wait_and_end(work: Any, *args: Any, **kwargs: Any) -> Any:
            result = wait(work, *args, **kwargs)
            try:
                capture.waited(work)  # a native record whose work has no future ends when the job has waited
            except Exception as error:  # the training loop never sees the logger's errors
                _fail_once("ending a native record at a wait", error)
            return result

        return wait_and_end
