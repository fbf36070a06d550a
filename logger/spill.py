"""A bounded on-disk queue for serialized messages the collector could not take yet.

Messages are appended to segment files (``seg-00000001.bin``: per message a 4-byte length, a
4-byte record count, then the bytes) and read back oldest segment first. Past ``max_bytes`` the
oldest segment is deleted and its records are counted as dropped, so the caller can tell the
collector how many it lost. Segments left by an earlier process for the same job and rank are
picked up and replayed. Used from one thread (the sender's).
"""

from __future__ import annotations

import os
import stat
import struct
from collections import deque
from pathlib import Path

from sleuth.errors import ConfigError
from sleuth.validation import positive_int

_HEADER = struct.Struct("<II")

#: The first segment number of a new spill: room below it for segments put before the oldest.
_FIRST_SEGMENT = 1 << 20

#: One queued message: its serialized bytes and how many records it carries.
Item = tuple[bytes, int]


def private_folder(folder: str | os.PathLike[str]) -> Path:
    """``folder``, created readable by its owner only; ConfigError when it is a link, someone
    else's, or open to others: its segments are replayed as this job's records, so nobody else
    may plant or read them (the default lies in the shared temporary folder)."""
    path = Path(folder)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    status = os.lstat(path)
    if stat.S_ISLNK(status.st_mode) or not stat.S_ISDIR(status.st_mode):
        raise ConfigError(f"spill folder {path} is a link or not a folder: refusing to replay from it")
    if status.st_uid != os.getuid():
        raise ConfigError(f"spill folder {path} belongs to uid {status.st_uid}, not to this user ({os.getuid()})")
    if status.st_mode & 0o077:
        raise ConfigError(f"spill folder {path} is open to other users (mode {stat.S_IMODE(status.st_mode):o}); "
                          "chmod 700 it or choose another SLEUTH_SPILL_DIR")
    return path


class Spill:
    def __init__(self, folder: str | os.PathLike[str], *, max_bytes: int, segment_bytes: int) -> None:
        positive_int("max_bytes", max_bytes, error=ValueError)
        positive_int("segment_bytes", segment_bytes, error=ValueError)
        self.folder = private_folder(folder)
        self.max_bytes = max_bytes
        self.segment_bytes = min(segment_bytes, max_bytes)
        # (path, bytes, records) of each closed or open segment, oldest first.
        self._segments: deque[list] = deque()
        # Numbers start high so that segments can be put before the oldest (``prepend``).
        self._next = _FIRST_SEGMENT
        self.dropped = 0  # records lost to the bound since the caller last took the count
        for path in sorted(self.folder.glob("seg-*.bin")):
            size, records = self._scan(path)
            self._segments.append([path, size, records])
            self._next = max(self._next, int(path.stem[4:]) + 1)

    @staticmethod
    def _scan(path: Path) -> tuple[int, int]:
        data = path.read_bytes()
        offset = records = 0
        while offset + _HEADER.size <= len(data):
            length, count = _HEADER.unpack_from(data, offset)
            if offset + _HEADER.size + length > len(data):
                break  # a torn last write: ignored
            offset += _HEADER.size + length
            records += count
        return offset, records

    @property
    def bytes(self) -> int:
        return sum(s[1] for s in self._segments)

    @property
    def records(self) -> int:
        return sum(s[2] for s in self._segments)

    def __bool__(self) -> bool:
        return bool(self._segments)

    def append(self, item: Item) -> None:
        data, count = item
        if not self._segments or self._segments[-1][1] >= self.segment_bytes:
            self._segments.append([self.folder / f"seg-{self._next:08d}.bin", 0, 0])
            self._next += 1
        segment = self._segments[-1]
        with open(segment[0], "ab") as out:
            out.write(_HEADER.pack(len(data), count))
            out.write(data)
        segment[1] += _HEADER.size + len(data)
        segment[2] += count
        while self.bytes > self.max_bytes and len(self._segments) > 1:
            path, _, records = self._segments.popleft()
            path.unlink(missing_ok=True)
            self.dropped += records

    def prepend(self, items: list[Item]) -> None:
        """Put ``items`` (older than everything spilled) before the oldest segment."""
        if not items:
            return
        first = int(self._segments[0][0].stem[4:]) if self._segments else self._next
        if first <= 1:
            raise OSError(f"no segment number left before seg-{first:08d}.bin in {self.folder}")
        path = self.folder / f"seg-{first - 1:08d}.bin"
        with open(path, "wb") as out:
            for data, count in items:
                out.write(_HEADER.pack(len(data), count))
                out.write(data)
        self._segments.appendleft([path, sum(_HEADER.size + len(d) for d, _ in items), sum(c for _, c in items)])
        if self._next <= first - 1:
            self._next = first

    def take_dropped(self) -> int:
        dropped, self.dropped = self.dropped, 0
        return dropped

    def pop_segment(self) -> list[Item]:
        """The oldest segment's messages, removed from disk; empty when nothing is spilled."""
        if not self._segments:
            return []
        path, _, _ = self._segments.popleft()
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return []
        items: list[Item] = []
        offset = 0
        while offset + _HEADER.size <= len(data):
            length, count = _HEADER.unpack_from(data, offset)
            start = offset + _HEADER.size
            if start + length > len(data):
                break
            items.append((data[start : start + length], count))
            offset = start + length
        path.unlink(missing_ok=True)
        return items
