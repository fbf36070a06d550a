"""The spill after a crash: a torn segment end is cut off, what it lost is counted where it can be,
and whatever the next process appends replays whole."""

from __future__ import annotations

import logging
import os

import pytest

from sleuth.logger.spill import Spill


def message(k: int) -> tuple[bytes, int]:
    return (f"message {k} ".encode() * (k + 3), 10 + k)


def open_spill(folder) -> Spill:
    return Spill(folder, max_bytes=1 << 20, segment_bytes=1 << 16)


def replay(spill: Spill) -> list[tuple[bytes, int]]:
    items = []
    while spill:
        items += spill.pop_segment()
    return items


def segment_of(folder):
    (path,) = sorted(folder.glob("seg-*.bin"))
    return path


def left_by_a_crashed_process(folder, tear) -> None:
    """Three messages spilled, then ``tear`` done to the segment's end."""
    first = open_spill(folder)
    for k in range(3):
        first.append(message(k))
    tear(segment_of(folder))


def cut_mid_message(path) -> None:
    os.truncate(path, path.stat().st_size - 5)


def cut_mid_header(path) -> None:
    os.truncate(path, path.stat().st_size - len(message(2)[0]) - 9)


def append_garbage(path) -> None:
    # Bytes that read as a whole message of 5 records under a length-and-count header.
    with open(path, "ab") as out:
        out.write(b"\x04\x00\x00\x00\x05\x00\x00\x00junk" + b"\x01\x00\x00\x00\x07\x00\x00\x00\x00" * 3)


def append_zeros(path) -> None:
    # What a file system can leave after a crash: the size grown, the data never written.
    with open(path, "ab") as out:
        out.write(bytes(64))


@pytest.mark.parametrize("tear, kept, counted", [
    (cut_mid_message, [0, 1], 12),  # the torn message's header checks: its 12 records are counted
    (cut_mid_header, [0, 1], 0),
    (append_garbage, [0, 1, 2], 0),
    (append_zeros, [0, 1, 2], 0),
])
def test_what_the_next_process_appends_after_a_torn_end_replays_and_nothing_torn_counts(tmp_path, tear, kept, counted):
    left_by_a_crashed_process(tmp_path, tear)
    torn_size = segment_of(tmp_path).stat().st_size
    spill = open_spill(tmp_path)  # the next process of the job and rank
    assert spill.take_dropped() == counted
    assert spill.records == sum(message(k)[1] for k in kept)
    for k in range(3, 6):
        spill.append(message(k))
    assert replay(spill) == [message(k) for k in [*kept, 3, 4, 5]]
    assert torn_size > 0 and not list(tmp_path.glob("seg-*.bin"))


def test_a_torn_end_whose_records_cannot_be_counted_is_logged_as_unknown(tmp_path, caplog):
    left_by_a_crashed_process(tmp_path, append_garbage)
    with caplog.at_level(logging.WARNING, logger="sleuth.logger"):
        spill = open_spill(tmp_path)
    assert spill.take_dropped() == 0
    assert "records they held are unknown" in caplog.text and str(segment_of(tmp_path)) in caplog.text


def test_a_segment_torn_before_its_first_message_ended_is_removed(tmp_path):
    first = open_spill(tmp_path)
    first.append(message(0))
    os.truncate(segment_of(tmp_path), 7)
    spill = open_spill(tmp_path)
    assert not spill and not list(tmp_path.glob("seg-*.bin"))
    spill.append(message(1))
    assert replay(spill) == [message(1)]


def test_a_write_cut_short_leaves_no_torn_message_for_the_next_append(tmp_path, monkeypatch):
    spill = open_spill(tmp_path)
    spill.append(message(0))
    real_open = open

    class FullDisk:
        def __init__(self, path, mode):
            self.out = real_open(path, mode)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.out.close()

        def write(self, data):
            self.out.write(data[:5])
            self.out.flush()
            raise OSError(28, "No space left on device")

    monkeypatch.setattr("builtins.open", FullDisk)
    with pytest.raises(OSError):
        spill.append(message(1))
    monkeypatch.setattr("builtins.open", real_open)
    spill.append(message(2))
    assert replay(spill) == [message(0), message(2)]
