"""Hooks on torch.distributed: each communication operator becomes one record.

The public functions of ``torch.distributed`` (and their home, ``distributed_c10d``, whose
internals call them by their global names) are replaced by thin wrappers. A wrapper finds the
operator's group, bytes and peer, takes a sequence number, starts the recorder, calls the
original and ends the record when the operator completes: at return for a synchronous call,
through the work's future for ``async_op=True`` and the ``i*`` P2P calls. A call made inside
another wrapped call (``batch_isend_irecv`` calling ``isend``) is not recorded twice.

A failure inside a wrapper's own bookkeeping is logged once and the original is called as if
the logger were not there: the training loop never sees the logger's errors.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d

from sleuth.logger.identity import Identity
from sleuth.logger.naming import name_groups
from sleuth.logger.session import Session
from sleuth.records import OpKind

log = logging.getLogger("sleuth.logger")

_SEND, _RECV = 0, 1


def _stream_getter() -> Callable[[int], int]:
    """The current CUDA stream's handle on a device, as an int.

    ``torch.cuda.current_stream(device).cuda_stream`` builds a Stream object on every call: 4.7 us
    on an H200 machine, twice per operator, more than the two event records themselves
    (docs/logger-gpu.md). Torch's own generated code reads the raw handle through
    ``torch._C._cuda_getCurrentRawStream`` (0.18 us); the public call is the fallback where that
    is gone.
    """
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw
    return lambda device: torch.cuda.current_stream(device).cuda_stream


_current_stream = _stream_getter()


class _Guard(threading.local):
    inside = False


_guard = _Guard()
_failures: set[str] = set()


def _fail_once(what: str, error: BaseException) -> None:
    if what not in _failures:
        _failures.add(what)
        log.warning("sleuth logger: %s failed, not recorded from now on when it fails: %r", what, error)


def _size(tensor: Any) -> int:
    return tensor.nbytes


def _sizes(tensors: Any) -> int:
    return sum(t.nbytes for t in tensors)


def _arg(args: tuple, kwargs: dict, position: int, name: str, default: Any = None) -> Any:
    if name in kwargs:
        return kwargs[name]
    return args[position] if len(args) > position else default


# name → (op kind, bytes from (args, kwargs), position of `group`, position of `async_op`)
_COLLECTIVES: dict[str, tuple[OpKind, Callable[[tuple, dict], int], int, int]] = {
    "all_reduce": (OpKind.ALL_REDUCE, lambda a, k: _size(_arg(a, k, 0, "tensor")), 2, 3),
    "all_gather": (OpKind.ALL_GATHER, lambda a, k: _sizes(_arg(a, k, 0, "tensor_list")), 2, 3),
    "all_gather_into_tensor": (
        OpKind.ALL_GATHER, lambda a, k: _size(_arg(a, k, 0, "output_tensor")), 2, 3,
    ),
    "reduce_scatter": (OpKind.REDUCE_SCATTER, lambda a, k: _sizes(_arg(a, k, 1, "input_list")), 3, 4),
    "reduce_scatter_tensor": (OpKind.REDUCE_SCATTER, lambda a, k: _size(_arg(a, k, 1, "input")), 3, 4),
    "all_to_all": (OpKind.ALL_TO_ALL, lambda a, k: _sizes(_arg(a, k, 1, "input_tensor_list")), 2, 3),
    "all_to_all_single": (OpKind.ALL_TO_ALL, lambda a, k: _size(_arg(a, k, 1, "input")), 4, 5),
    "broadcast": (OpKind.BROADCAST, lambda a, k: _size(_arg(a, k, 0, "tensor")), 2, 3),
    "reduce": (OpKind.REDUCE, lambda a, k: _size(_arg(a, k, 0, "tensor")), 3, 4),
    "barrier": (OpKind.BARRIER, lambda a, k: 0, 0, 1),
}


def _global_peer(group: Any, peer: Any, group_peer: Any) -> int:
    if peer is not None:
        return int(peer)
    if group_peer is not None:
        return int(dist.get_global_rank(group if group is not None else dist.group.WORLD, group_peer))  # type: ignore[arg-type]  # WORLD is set once a group exists
    return -1


class Hooks:
    """The installed wrappers; ``remove()`` puts the originals back."""

    def __init__(self, session: Session, *, on_destroy: Callable[[], None] | None = None) -> None:
        self.session = session
        self.on_destroy = on_destroy
        self.cuda = False  # set by install() when the CUDA-event path is usable
        self.unrecorded = 0  # operators passed through without a record (irecv from any source)
        self._originals: dict[str, Callable] = {}
        self._optimizer_hook: Any = None
        # Works without a future (gloo's P2P): id → (work, what to run once it has completed).
        self._waiting: dict[int, tuple[Any, Callable[..., None]]] = {}
        self._work_wait: Callable | None = None

    # -- wrappers ----------------------------------------------------------------------------

    def _end_all(self, handles: list[int], device: int | None) -> None:
        if device is not None:
            for h in handles:
                self._finish(h, device)
        else:
            end = self.session.recorder.end
            for h in handles:
                end(h)

    def _end_later(self, work: Any, handles: list[int], device: int | None) -> None:
        """End the records when ``work`` completes (a record's ``device`` is its CUDA device
        index when CUDA events time it, else None)."""
        self._when_done(work, lambda *_: self._end_all(handles, device))

    def _when_done(self, work: Any, callback: Callable[..., None]) -> None:
        """Run ``callback`` when ``work`` completes: through its future where the backend has
        one, else when the job waits on it (gloo's P2P works have no future) or, for a work
        nobody waits on, when the drainer sees it completed."""
        try:
            future = work.get_future()
        except Exception:
            self._waiting[id(work)] = (work, callback)
            return
        future.add_done_callback(callback)

    def poll_waiting(self) -> None:
        """Ends the records of works without a future that have completed (drainer thread)."""
        for key, (work, callback) in list(self._waiting.items()):
            try:
                done = work.is_completed()
            except Exception:
                done = True
            if done and self._waiting.pop(key, None) is not None:
                callback()

    def _wait(self, original: Callable) -> Callable:
        hooks = self

        @functools.wraps(original)
        def wait(work: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(work, *args, **kwargs)
            entry = hooks._waiting.pop(id(work), None)
            if entry is not None:
                entry[1]()
            return result

        return wait

    def _start(
        self, info: Any, op: int, peer: int, nbytes: int, direction: int, tensor: Any
    ) -> tuple[int, int | None]:
        """Begin a record: its handle, and the CUDA device whose events time it (None: host clock)."""
        if self.cuda and tensor is not None and tensor.is_cuda:
            session = self.session
            seq = session.take_seq(info, peer, direction)
            device = tensor.get_device()
            handle = session.recorder.begin_cuda(
                info.code, seq, op, peer, nbytes, session.iteration, _current_stream(device)
            )
            return handle, device
        return self.session.begin(info, op, peer, nbytes, direction), None

    def _finish(self, handle: int, device: int | None) -> None:
        if device is None:
            self.session.recorder.end(handle)
            return
        try:
            self.session.recorder.end_cuda(handle, _current_stream(device))
        except Exception as error:  # a CUDA error ends the record (counted as dropped), never the step
            _fail_once("ending a CUDA-timed operator", error)

    def _collective(self, name: str, original: Callable) -> Callable:
        op, nbytes_of, group_at, async_at = _COLLECTIVES[name]
        op = int(op)  # type: ignore[assignment]  # the record takes the OpKind as its byte
        hooks, session = self, self.session

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if _guard.inside:
                return original(*args, **kwargs)
            try:
                info = session.group(_arg(args, kwargs, group_at, "group"))
                tensor = args[0] if args and hasattr(args[0], "is_cuda") else None
                handle, device = hooks._start(info, op, -1, nbytes_of(args, kwargs), 0, tensor)
                async_op = _arg(args, kwargs, async_at, "async_op", False)
            except Exception as error:
                _fail_once(name, error)
                return original(*args, **kwargs)
            return hooks._timed_call(original, args, kwargs, handle, device, async_op)

        return wrapper

    def _p2p(self, name: str, original: Callable) -> Callable:
        sending = name in ("send", "isend")
        is_async = name in ("isend", "irecv")
        op = int(OpKind.SEND if sending else OpKind.RECV)
        direction = _SEND if sending else _RECV
        peer_name = "dst" if sending else "src"
        hooks, session = self, self.session

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if _guard.inside:
                return original(*args, **kwargs)
            try:
                tensor = _arg(args, kwargs, 0, "tensor")
                group = _arg(args, kwargs, 2, "group")
                peer = _global_peer(group, _arg(args, kwargs, 1, peer_name), kwargs.get(f"group_{peer_name}"))
                info = session.group(group)
                if peer < 0:  # a receive from any source: the peer is known only afterwards
                    return hooks._recv_any(name, original, info, tensor, args, kwargs)
                handle, device = hooks._start(info, op, peer, _size(tensor), direction, tensor)
            except Exception as error:
                _fail_once(name, error)
                return original(*args, **kwargs)
            return hooks._timed_call(original, args, kwargs, handle, device, is_async)

        return wrapper

    def _timed_call(
        self, original: Callable, args: tuple, kwargs: dict, handle: Any, device: int | None, is_async: bool
    ) -> Any:
        """Run the wrapped torch call; the operator ends now, or when its async work completes."""
        _guard.inside = True  # calls torch makes inside this one are not operators of their own
        try:
            result = original(*args, **kwargs)
        except BaseException:
            self._finish(handle, device)
            raise
        finally:
            _guard.inside = False
        if is_async and result is not None:
            self._end_later(result, [handle], device)
        elif device is not None:
            self._finish(handle, device)
        else:
            self.session.recorder.end(handle)
        return result

    def _recv_any(self, name: str, original: Callable, info: Any, tensor: Any, args: tuple, kwargs: dict) -> Any:
        if name == "irecv":
            self.unrecorded += 1
            return original(*args, **kwargs)
        t0 = self.session.impl.now_ns()
        _guard.inside = True
        try:
            src = original(*args, **kwargs)
        finally:
            _guard.inside = False
        self.session.record_done(info, int(OpKind.RECV), int(src), _size(tensor), _RECV, t0)
        return src

    def _batch(self, original: Callable) -> Callable:
        hooks = self

        @functools.wraps(original)
        def wrapper(p2p_op_list: list, *args: Any, **kwargs: Any) -> Any:
            if _guard.inside:
                return original(p2p_op_list, *args, **kwargs)
            try:
                started = []
                for p2p in p2p_op_list:
                    sending = p2p.op in (c10d.isend, hooks._originals.get("isend"))
                    info = hooks.session.group(p2p.group)
                    started.append(
                        hooks._start(
                            info, int(OpKind.SEND if sending else OpKind.RECV), int(p2p.peer),
                            _size(p2p.tensor), _SEND if sending else _RECV, p2p.tensor,
                        )
                    )
            except Exception as error:
                _fail_once("batch_isend_irecv", error)
                return original(p2p_op_list, *args, **kwargs)
            _guard.inside = True
            try:
                works = original(p2p_op_list, *args, **kwargs)
            except BaseException:
                for handle, device in started:
                    hooks._finish(handle, device)
                raise
            finally:
                _guard.inside = False
            works = list(works or [])
            if len(works) == len(started):
                for work, (handle, device) in zip(works, started):
                    hooks._end_later(work, [handle], device)
            elif works:  # a coalesced batch: one work completes them all
                device = next((d for _, d in started if d is not None), None)
                hooks._end_later(works[-1], [h for h, _ in started], device)
            else:
                for handle, device in started:
                    hooks._finish(handle, device)
            return works

        return wrapper

    def _destroy(self, original: Callable) -> Callable:
        hooks = self

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            group = _arg(args, kwargs, 0, "group")
            if group is None and hooks.on_destroy is not None:
                try:
                    # The last chance to use the store and to flush while every rank is alive.
                    hooks.on_destroy()
                except Exception as error:
                    _fail_once("the final flush", error)
            return original(*args, **kwargs)

        return wrapper

    # -- install / remove --------------------------------------------------------------------

    def install(self) -> Hooks:
        """Wrap the ``torch.distributed`` functions (torch without process-group hooks)."""
        wrappers: dict[str, Callable] = {}
        for name in _COLLECTIVES:
            wrappers[name] = self._collective(name, getattr(c10d, name))
        for name in ("send", "recv", "isend", "irecv"):
            wrappers[name] = self._p2p(name, getattr(c10d, name))
        wrappers["batch_isend_irecv"] = self._batch(c10d.batch_isend_irecv)
        self._wrap(wrappers)
        self._install_common()
        return self

    def _wrap(self, wrappers: dict[str, Callable]) -> None:
        for name, wrapper in wrappers.items():
            self._originals[name] = getattr(c10d, name)
            setattr(c10d, name, wrapper)
            if getattr(dist, name, None) is self._originals[name]:
                setattr(dist, name, wrapper)

    def _install_common(self) -> None:
        """What every way of capturing needs: the final flush, waits, drains and iterations."""
        self._wrap({"destroy_process_group": self._destroy(c10d.destroy_process_group)})
        self._work_wait = dist.Work.wait
        dist.Work.wait = self._wait(self._work_wait)  # type: ignore[method-assign]  # the hook wraps the wait of every Work
        self.session.pollers.append(self.poll_waiting)
        # torch.optim may still be importing when torch runs the startup hook: the optimizer
        # hook is registered when the first operator is seen.
        self.session.on_identity.append(self._hook_optimizer)

    def _hook_optimizer(self) -> None:
        from torch.optim.optimizer import register_optimizer_step_post_hook

        if self._optimizer_hook is None and self._originals:
            self._optimizer_hook = register_optimizer_step_post_hook(
                lambda optimizer, args, kwargs: self.session.step(explicit=False)
            )

    def remove(self) -> None:
        self._remove_common()

    def _remove_common(self) -> None:
        for name, original in self._originals.items():
            wrapper = getattr(c10d, name)
            setattr(c10d, name, original)
            if getattr(dist, name, None) is wrapper:
                setattr(dist, name, original)
        self._originals.clear()
        if self._work_wait is not None:
            dist.Work.wait = self._work_wait  # type: ignore[method-assign]  # and puts the original back
            self._work_wait = None
        if self.poll_waiting in self.session.pollers:
            self.session.pollers.remove(self.poll_waiting)
        if self._optimizer_hook is not None:
            self._optimizer_hook.remove()
            self._optimizer_hook = None


def identity_from_torch(job: str, host: str, gpu: int | None) -> Callable[[], Identity]:
    """A resolver the session calls at its first operator, when the process group exists."""

    def resolve() -> Identity:
        device = gpu
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            device = torch.cuda.current_device()
        return Identity(job, dist.get_rank(), dist.get_world_size(), host, device)

    return resolve


def group_ranks(group: Any) -> tuple[tuple[int, ...], str, str, str]:
    """Members (group-rank order), torch's group name, and the kind and name the job gives it
    (``sleuth.logger.naming``; an empty name where none fits)."""
    pg = group if group is not None else dist.group.WORLD
    ranks = tuple(dist.get_process_group_ranks(pg))
    torch_name = getattr(pg, "group_name", "") or ""
    kind, name = _kind_and_name(ranks, pg, _torch_groups())
    return ranks, torch_name, kind, name


def members_naming(members: tuple[int, ...]) -> tuple[str, str]:
    """Kind and name (``""`` where none fits) of a communicator over ``members`` (group-rank order)
    that the logger knows from elsewhere (the NCCL plugin): those of torch's group with the same
    members, where there is one, else what its shape among torch's groups implies."""
    groups = _torch_groups()
    same = next((pg for pg, ranks in groups if ranks == members), None)
    return _kind_and_name(members, same, groups)


def _torch_groups() -> list[tuple[Any, tuple[int, ...]]]:
    """This rank's process groups, each with its members in group-rank order."""
    return [
        (pg, tuple(sorted(members, key=members.__getitem__)))
        for pg, members in c10d._world.pg_group_ranks.items()
        if isinstance(pg, dist.ProcessGroup)
    ]


def _kind_and_name(ranks: tuple[int, ...], pg: Any, groups: list[tuple[Any, tuple[int, ...]]]) -> tuple[str, str]:
    """``naming`` over ``ranks`` (described as ``pg``, None: undescribed) among this rank's other groups."""
    mine = [(ranks, getattr(pg, "group_desc", None) if pg is not None else None)]
    mine += [(members, getattr(other, "group_desc", None)) for other, members in groups if other is not pg]
    named = name_groups(mine, dist.get_world_size())
    if named[0] is None:
        return "world" if len(ranks) == dist.get_world_size() else "group", ""
    name, kind = named[0]
    return kind, name
