"""Pure-Python twin of ``sleuth.logger._commops``: the same API, used when the C extension
cannot be loaded (or with ``SLEUTH_LOGGER_IMPL=python``). The same tests run against both.

Records are packed with ``struct`` into the C layout (``sleuth.logger.core.RECORD_DTYPE``), so
``drain`` returns bytes that the rest of the logger reads the same way for either twin. The
CUDA path exists only in C: here ``cuda_available`` is always false.
"""

from __future__ import annotations

import struct
import time

IMPLEMENTATION = "python"
_RECORD = struct.Struct("<qqqQQqIiB7x")
RECORD_SIZE = _RECORD.size
now_ns = time.monotonic_ns  # CLOCK_MONOTONIC, as in C

_FREE, _HOST = 0, 1


class Recorder:
    """Fixed-size ring of CommOps records with begin/end timing (see ``_commops.pyi``)."""

    __slots__ = ("_ring", "_capacity", "_head", "_tail", "_slots", "_state", "_free", "_dropped", "_begun", "iteration")

    def __init__(self, capacity: int, slots: int = 4096) -> None:
        if not 1 <= capacity <= 2**40:
            raise ValueError("capacity must be between 1 and 2**40")
        if not 1 <= slots <= 2**30:
            raise ValueError("slots must be between 1 and 2**30")
        if getattr(self, "_ring", None) is not None:
            return
        size = 1
        while size < capacity:
            size <<= 1
        self._capacity = size
        self._ring: list[bytes | None] = [None] * size
        self._head = self._tail = 0
        self._slots: list[tuple | None] = [None] * slots
        self._state = [_FREE] * slots
        self._free = list(range(slots - 1, -1, -1))
        self._dropped = 0
        self._begun = 0
        self.iteration = 0  # the session's current iteration (native hooks read it in C)

    def _push(self, packed: bytes) -> bool:
        if self._head - self._tail >= self._capacity:
            self._dropped += 1
            return False
        self._ring[self._head & (self._capacity - 1)] = packed
        self._head += 1
        return True

    def begin(self, comm: int, seq: int, op: int, peer: int, nbytes: int, iteration: int) -> int:
        if not 0 <= op <= 255:
            raise ValueError("op must fit in a byte")
        self._begun += 1
        if not self._free:
            self._dropped += 1
            return -1
        i = self._free.pop()
        self._slots[i] = (comm, seq, op, peer, nbytes, iteration, now_ns())
        self._state[i] = _HOST
        return i

    def end(self, handle: int) -> None:
        if 0 <= handle < len(self._state) and self._state[handle] == _HOST:
            comm, seq, op, peer, nbytes, iteration, t0 = self._slots[handle]  # type: ignore[misc]  # a slot in the _HOST state holds its tuple
            self._push(_RECORD.pack(t0, t0, now_ns(), seq, nbytes, iteration, comm, peer, op))
            self._state[handle] = _FREE
            self._slots[handle] = None
            self._free.append(handle)

    def record(
        self, comm: int, seq: int, op: int, peer: int, nbytes: int, iteration: int,
        t_issue_ns: int, t_start_ns: int, t_end_ns: int,
    ) -> bool:
        if not 0 <= op <= 255:
            raise ValueError("op must fit in a byte")
        self._begun += 1
        packed = _RECORD.pack(t_issue_ns, t_start_ns, t_end_ns, seq, nbytes, iteration, comm, peer, op)
        return self._push(packed)

    def drain(self, max: int = -1) -> bytes:
        n = self._head - self._tail
        if 0 <= max < n:
            n = max
        mask = self._capacity - 1
        ring = self._ring
        out = []
        for k in range(self._tail, self._tail + n):
            out.append(ring[k & mask])
            ring[k & mask] = None
        self._tail += n
        return b"".join(out)  # type: ignore[arg-type]  # the ring holds bytes from tail to head

    def begin_cuda(
        self, comm: int, seq: int, op: int, peer: int, nbytes: int, iteration: int, stream: int
    ) -> int:
        raise RuntimeError("the CUDA path needs cuda_available() to be true first")

    def end_cuda(self, handle: int, stream: int) -> None:
        return None

    def poll(self) -> int:
        return 0

    def recalibrate(self) -> bool:
        return False

    @property
    def dropped(self) -> int:
        return self._dropped

    @property
    def size(self) -> int:
        return self._head - self._tail

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def pending(self) -> int:
        return len(self._state) - len(self._free)

    @property
    def begun(self) -> int:
        return self._begun


def cuda_available(path: str | None = None) -> bool:
    """Always false: the CUDA-event path is the C extension's."""
    return False
