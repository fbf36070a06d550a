"""A bounded on-disk queue for serialized messages the collector could not take yet.

Messages are appended to segment files (``seg-00000001.bin``: per message a 16-byte header, then
the bytes) and read back oldest segment first. Past ``max_bytes`` the oldest segment is deleted and
its records are counted as dropped, so the caller can tell the collector how many it lost. Segments
left by an earlier process for the same job and rank are picked up and replayed.

A process that died mid-write leaves a torn message at a segment's end. It is cut off when the next
process opens the spill, so that nothing appended later follows it (read back after a torn message,
every later message would be misaligned garbage), and its records are counted as dropped when its
header still checks (else the loss is unknown, and logged as such). Used from one thread (the sender's).
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import struct
import zlib
from collections import deque
from pathlib import Path

from sleuth.errors import ConfigError
from sleuth.validation import positive_int

log = logging.getLogger("sleuth.logger")

#: Per message: its length, its record count, the CRC-32 of its bytes, and the CRC-32 of those three.
#: The data's CRC tells a message from what a crash left (zeros, a torn write, stray bytes); the
#: header's own lets a torn message's record count be trusted, so its loss is counted.
_HEADER = struct.Struct("<IIII")
_COUNTED = struct.Struct("<III")  # the part of the header its CRC covers

#: The count of records dropped that no sent batch reported, left by the last sender to close.
_DROPPED = "dropped"

#: The first segment number of a new spill: room below it for segments put before the oldest.
_FIRST_SEGMENT = 1 << 20

#: One queued message: its serialized bytes and how many records it carries.
Item = tuple[bytes, int]


def _frame(data: bytes, count: int) -> bytes:
    """The header that goes before ``data`` (a message of ``count`` records) in a segment."""
    counted = _COUNTED.pack(len(data), count, zlib.crc32(data))
    return counted + zlib.crc32(counted).to_bytes(4, "little")


def _parse(data: bytes) -> tuple[list[tuple[int, int, int]], int, int | None]:
    """The messages of a segment, ``(start, length, records)`` each, up to the first that does not
    check; where that one starts (the valid prefix's length); and the records lost from there on:
    0 when nothing follows the valid prefix, the torn message's count when its header checks and
    nothing lies past its claimed end, None when unknown."""
    view = memoryview(data)
    messages: list[tuple[int, int, int]] = []
    offset = 0
    while offset < len(data):
        if offset + _HEADER.size > len(data):
            return messages, offset, None
        length, count, data_crc, header_crc = _HEADER.unpack_from(data, offset)
        if zlib.crc32(view[offset : offset + _COUNTED.size]) != header_crc:
            return messages, offset, None
        start = offset + _HEADER.size
        end = start + length
        if end > len(data) or zlib.crc32(view[start:end]) != data_crc:
            return messages, offset, count if end >= len(data) else None
        messages.append((start, length, count))
        offset = end
    return messages, offset, 0


def private_folder(folder: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None) -> Path:
    """``folder``, created readable by its owner only; ConfigError when it, or any folder between
    it and ``root`` (default: ``folder`` itself), is a link, someone else's, or open to others:
    its segments are replayed as this job's records, so nobody else may plant or read them (the
    default lies in the shared temporary folder, where anyone may make the root first). Every
    folder made on the way is made mode 700."""
    path = Path(os.path.abspath(folder))
    top = path if root is None else Path(os.path.abspath(root))
    if top != path and top not in path.parents:
        raise ConfigError(f"spill folder {path} does not lie inside its private root {top}")
    # Made one by one (mkdir(parents=True) gives the parents the default mode, not 700), and each
    # checked before the next is made in it.
    for level in [*reversed(path.parents), path]:
        if not os.path.lexists(level):
            with contextlib.suppress(FileExistsError):
                os.mkdir(level, 0o700)
                os.chmod(level, 0o700)  # mkdir's mode passes through the umask
        if level == top or top in level.parents:
            _check_private(level)
    return path


def _check_private(path: Path) -> None:
    status = os.lstat(path)  # never follows a link: the link itself is what is refused
    if stat.S_ISLNK(status.st_mode) or not stat.S_ISDIR(status.st_mode):
        raise ConfigError(f"spill folder {path} is a link or not a folder: refusing to replay from it")
    if status.st_uid != os.getuid():
        raise ConfigError(f"spill folder {path} belongs to uid {status.st_uid}, not to this user ({os.getuid()})")
    if status.st_mode & 0o022:  # others could have planted segments in it: never replayed
        raise ConfigError(f"spill folder {path} is open to other users (mode {stat.S_IMODE(status.st_mode):o}); "
                          "chmod 700 it or choose another SLEUTH_SPILL_DIR")
    if status.st_mode & 0o077:
        # Ours and written by nobody else (an older logger made its parents with the default mode):
        # closing it to others keeps what it holds ours, and the job keeps its logger.
        os.chmod(path, 0o700)


class Spill:
    """``root``: the private folder ``folder`` lies in (``private_folder``)."""

    def __init__(
        self, folder: str | os.PathLike[str], *, max_bytes: int, segment_bytes: int,
        root: str | os.PathLike[str] | None = None,
    ) -> None:
        positive_int("max_bytes", max_bytes, error=ValueError)
        positive_int("segment_bytes", segment_bytes, error=ValueError)
        self.folder = private_folder(folder, root=root)
        self.max_bytes = max_bytes
        self.segment_bytes = min(segment_bytes, max_bytes)
        # (path, bytes, records) of each closed or open segment, oldest first.
        self._segments: deque[list] = deque()
        # Numbers start high so that segments can be put before the oldest (``prepend``).
        self._next = _FIRST_SEGMENT
        # Records lost (to the bound, torn, or left unreported by the last sender) since the
        # caller last took the count.
        self.dropped = self._adopt_dropped()
        for path in sorted(self.folder.glob("seg-*.bin")):
            self._next = max(self._next, int(path.stem[4:]) + 1)
            size, records = self._adopt(path)
            if size:
                self._segments.append([path, size, records])

    def _adopt_dropped(self) -> int:
        """The count an earlier sender left (``keep_dropped``), taken off disk: this one reports it."""
        path = self.folder / _DROPPED
        try:
            text = path.read_text()
        except FileNotFoundError:
            return 0
        path.unlink()
        try:
            return int(text)
        except ValueError:
            log.warning("sleuth logger: %s holds %r, not a count of dropped records: an unknown number of "
                        "records an earlier logger dropped go unreported", path, text[:40])
            return 0

    def keep_dropped(self, count: int) -> None:
        """Leave ``count`` dropped records, not reported yet, for the next sender of this job and rank."""
        path = self.folder / _DROPPED
        written = path.with_name(_DROPPED + ".new")
        written.write_text(str(count))
        os.replace(written, path)  # whole or not at all: a count cut short would be a wrong one

    def _adopt(self, path: Path) -> tuple[int, int]:
        """The bytes and records of an earlier process's segment, cut to its valid prefix."""
        data = path.read_bytes()
        messages, valid, lost = _parse(data)
        if valid < len(data):
            # Nothing may be appended after a torn message: it would be read back as garbage.
            if valid:
                os.truncate(path, valid)
            else:
                path.unlink()
            if lost is None:
                log.warning("sleuth logger: spill segment %s ended in %d bytes that are no whole message "
                            "(a process died writing it); cut off, the records they held are unknown, not counted",
                            path, len(data) - valid)
            else:
                self.dropped += lost
                log.warning("sleuth logger: spill segment %s ended in a torn message of %d records "
                            "(a process died writing it); cut off, counted as dropped", path, lost)
        return valid, sum(count for _, _, count in messages)

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
        try:
            with open(segment[0], "ab") as out:
                out.write(_frame(data, count))
                out.write(data)
        except OSError:
            # A write cut short (a full disk) would leave a torn message for the next append to follow.
            with contextlib.suppress(OSError):
                os.truncate(segment[0], segment[1])
            raise
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
        try:
            with open(path, "wb") as out:
                for data, count in items:
                    out.write(_frame(data, count))
                    out.write(data)
        except OSError:
            # The caller keeps or counts these items: a part left on disk would replay them again.
            path.unlink(missing_ok=True)
            raise
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
        messages, _, _ = _parse(data)
        path.unlink(missing_ok=True)
        return [(data[start : start + length], count) for start, length, count in messages]
