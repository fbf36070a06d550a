"""Capture at the process-group level: every operator a group runs, whoever issues it.

DDP's reducer, FSDP, functional collectives and DTensor issue their collectives from C++ or
through the dispatcher, never through the ``torch.distributed`` functions that
:mod:`sleuth.logger.hooks` wraps. All of them end in a ``ProcessGroup`` method, and torch (2.15
and later) calls a process group's *pre-hooks* before it issues each operator and its
*post-hooks* right after, with the operator's kind, tensors, root or peer, and its ``Work``.
So the logger registers one pre- and one post-hook on every process group:

* the pre-hook begins the record (kind, bytes, peer, sequence number: the same bookkeeping as
  the function wrappers);
* the post-hook hands the record to the operator's ``Work``, which ends it on completion (its
  future where the backend has one, else when the job waits on it or the drainer sees it done).

Groups that exist when the logger starts get their hooks at once; every later one (``new_group``,
``split_group``, ``DeviceMesh``) when torch registers it (``_register_pg_in_world``, the one
place every group passes through), before its first operator can run.

Only the process-group hooks record operators; the function wrappers of :mod:`~.hooks` stay
for torch versions without them (:func:`supported`).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d

from sleuth.logger.hooks import _RECV, _SEND, Hooks, _fail_once
from sleuth.records import OpKind

__all__ = ["HOOK_ID", "ProcessGroupHooks", "backend_names", "supported"]

log = logging.getLogger("sleuth.logger")

#: The id our hooks are registered under on each group ("sleuth" in ASCII, as an int).
HOOK_ID = int.from_bytes(b"sleuth", "big")


def supported() -> bool:
    """Whether this torch calls process-group pre- and post-hooks (torch 2.15 and later)."""
    return hasattr(dist.ProcessGroup, "register_pre_hook") and hasattr(c10d, "_register_pg_in_world")


def backend_names(group: Any) -> set[str]:
    """The backends a group runs on: ``{"nccl"}``, or ``{"gloo", "nccl"}`` for torch's per-device
    form (``cpu:gloo,cuda:nccl``); empty when torch does not say."""
    try:
        text = str(dist.get_backend(group))
    except Exception:  # a group torch no longer lists
        return set()
    return {part.split(":")[-1].strip().lower() for part in text.split(",") if part.strip()}


def _op_table() -> dict[Any, int]:
    """torch's ``HookOpName`` → our operator kind; names torch adds later map to UNKNOWN."""
    names = {
        "SEND": OpKind.SEND, "RECV": OpKind.RECV, "BROADCAST": OpKind.BROADCAST,
        "ALLREDUCE": OpKind.ALL_REDUCE, "ALLREDUCE_COALESCED": OpKind.ALL_REDUCE,
        "REDUCE": OpKind.REDUCE, "ALLGATHER": OpKind.ALL_GATHER, "ALLGATHER_BASE": OpKind.ALL_GATHER,
        "ALLGATHER_COALESCED": OpKind.ALL_GATHER, "ALLGATHER_INTO_TENSOR_COALESCED": OpKind.ALL_GATHER,
        "REDUCE_SCATTER": OpKind.REDUCE_SCATTER, "REDUCE_SCATTER_BASE": OpKind.REDUCE_SCATTER,
        "REDUCE_SCATTER_TENSOR_COALESCED": OpKind.REDUCE_SCATTER, "ALLTOALL": OpKind.ALL_TO_ALL,
        "ALLTOALL_BASE": OpKind.ALL_TO_ALL, "BARRIER": OpKind.BARRIER, "SCATTER": OpKind.SCATTER,
        "GATHER": OpKind.GATHER,
    }
    hook_names = torch_hook_names()
    return {member: int(names.get(name, OpKind.UNKNOWN)) for name, member in hook_names.items()}


#: The native hooks' mark of a hook name that is not an operator.
NOT_AN_OPERATOR = 255


def op_kinds_by_hook_number() -> list[int]:
    """Our operator kind per torch hook name's number, ``NOT_AN_OPERATOR`` for group management:
    :func:`_op_table` for the native hooks (:mod:`~.capture_native`), which index it in C++."""
    ops = _op_table()
    names = torch_hook_names()
    table = [NOT_AN_OPERATOR] * (max(int(member) for member in names.values()) + 1)
    for name, member in names.items():
        table[int(member)] = NOT_AN_OPERATOR if name in _NOT_OPERATORS else ops[member]
    return table


def torch_hook_names() -> dict[str, Any]:
    from torch._C._distributed_c10d import HookOpName

    return dict(HookOpName.__members__)


#: Hook names that are not communication operators (group management).
_NOT_OPERATORS = {"SPLIT", "NEW_WINDOW"}


def _nbytes(tensors: list) -> int:
    if len(tensors) == 1:
        return tensors[0].nbytes
    return sum(t.nbytes for t in tensors)


class ProcessGroupHooks(Hooks):
    """The logger's hooks on every process group; ``remove()`` takes them off again."""

    def __init__(self, session: Any, *, on_destroy: Callable[[], None] | None = None) -> None:
        super().__init__(session, on_destroy=on_destroy)
        self._ops = _op_table()
        self._skipped = {member for name, member in torch_hook_names().items() if name in _NOT_OPERATORS}
        self._hooked: dict[int, Any] = {}  # id(group) → group, with our hooks on it
        self._register_original: Callable | None = None
        self.defer_nccl = False  # sleuth's NCCL profiler plugin records NCCL's operators (set before install)

    # -- the two hooks -----------------------------------------------------------------------

    def _pre(self, group: Any, started: dict, *, skip_cuda: bool = False) -> Callable[[Any], None]:
        """The pre-hook of ``group``; ``skip_cuda``: its CUDA tensors' operators are NCCL's, left to the plugin."""
        session, ops, skipped = self.session, self._ops, self._skipped
        recorder = session.recorder
        resolved: list = []  # the group's GroupInfo, looked up at its first operator

        def pre(args: Any) -> None:
            name = args.name
            if name in skipped:
                return
            try:
                if resolved:
                    info = resolved[0]
                else:
                    self._register_groups()
                    info = session.group(group)
                    resolved.append(info)
                op = ops[name]
                # An operator's size is its larger side: an all-gather's output, a reduce-scatter's
                # input; a receive has only outputs. Reading one side saves building a list.
                if op in OUTPUT_SIDE_OPS:
                    inputs, outputs = (), args.output_tensors
                    nbytes = _nbytes(outputs)
                else:
                    inputs, outputs = args.input_tensors, ()
                    nbytes = _nbytes(inputs)
                if skip_cuda:
                    tensor = inputs[0] if inputs else (outputs[0] if outputs else None)
                    if tensor is not None and tensor.is_cuda:
                        return
                if op == _SEND_OP or op == _RECV_OP:
                    root = args.root
                    if root < 0:  # a receive from any source: its peer is known at completion
                        started[args.op_id] = (_ANY_SOURCE, (info, nbytes, session.impl.now_ns()))
                        return
                    peer, direction = info.ranks[root], (_SEND if op == _SEND_OP else _RECV)
                else:
                    peer, direction = -1, 0
                if self.cuda:
                    tensor = inputs[0] if inputs else (outputs[0] if outputs else None)
                    started[args.op_id] = self._start(info, op, peer, nbytes, direction, tensor)
                else:  # the host clock: Session.begin, inlined on the hot path
                    seq = session.take_seq(info, peer, direction)
                    started[args.op_id] = (recorder.begin(info.code, seq, op, peer, nbytes, session.iteration), None)
            except Exception as error:  # the training loop never sees the logger's errors
                _fail_once("a process-group pre-hook", error)

        return pre

    def _post(self, started: dict) -> Callable[[Any], None]:
        end = self.session.recorder.end

        def post(args: Any) -> None:
            entry = started.pop(args.op_id, None)
            if entry is None:
                return
            try:
                handle, device = entry
                work = args.work
                if handle is _ANY_SOURCE:
                    self._end_any_source(work, *device)
                elif work is None:
                    self._finish(handle, device)
                elif device is None:  # the host clock, one record: the cheapest callback
                    self._when_done(work, lambda *_: end(handle))
                else:
                    self._end_later(work, [handle], device)
            except Exception as error:
                _fail_once("a process-group post-hook", error)

        return post

    def _register_groups(self) -> None:
        """Every group this rank is in goes into the job spec, used or not yet: the layout is
        inferred from all of them (a job may create pipeline groups and send on the world)."""
        for other in list(self._hooked.values()):
            self.session.group(other)

    def _end_any_source(self, work: Any, info: Any, nbytes: int, t0: int) -> None:
        """A receive from any source is recorded whole once its sender is known."""

        def done(*_: Any) -> None:
            try:
                source = info.ranks[work._source_rank()]
            except Exception:
                self.unrecorded += 1
                return
            self.session.record_done(info, _RECV_OP, source, nbytes, _RECV, t0)

        if work is None:
            self.unrecorded += 1
        else:
            self._when_done(work, done)

    # -- install / remove --------------------------------------------------------------------

    def hook(self, group: Any) -> None:
        """Put our hooks on ``group`` (once)."""
        if group is None or id(group) in self._hooked or not isinstance(group, dist.ProcessGroup):
            return
        backends = backend_names(group) if self.defer_nccl else set()
        if backends == {"nccl"}:
            return
        started: dict[int, tuple[Any, Any]] = {}  # op_id → (handle, device), from pre to post
        skip_cuda = "nccl" in backends
        try:
            group.register_pre_hook(HOOK_ID, self._pre(group, started, skip_cuda=skip_cuda))
            group.register_post_hook(HOOK_ID, self._post(started))
        except Exception as error:
            _fail_once("hooking a process group", error)
            return
        self._hooked[id(group)] = group

    def install(self) -> ProcessGroupHooks:
        self._install_common()
        for group in list(c10d._world.pg_map):
            self.hook(group)
        original = c10d._register_pg_in_world
        hooks = self

        @functools.wraps(original)
        def register(pg: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(pg, *args, **kwargs)
            hooks.hook(pg)
            return result

        self._register_original = original
        c10d._register_pg_in_world = register
        return self

    def remove(self) -> None:
        if self._register_original is not None:
            c10d._register_pg_in_world = self._register_original
            self._register_original = None
        for group in self._hooked.values():
            try:
                group.unregister_pre_hook(HOOK_ID)
                group.unregister_post_hook(HOOK_ID)
            except Exception:  # a destroyed group has no hooks left to take off
                pass
        self._hooked.clear()
        self._remove_common()


_SEND_OP, _RECV_OP = int(OpKind.SEND), int(OpKind.RECV)
#: The kinds an operator's size is read from its outputs (else from its inputs).
OUTPUT_SIDE_OPS = frozenset({int(OpKind.ALL_GATHER), _RECV_OP, int(OpKind.GATHER)})
_ANY_SOURCE = object()  # marks a receive from any source between its pre- and post-hook
