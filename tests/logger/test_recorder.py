"""One suite for both twins of the recorder (C extension and pure Python)."""

import threading

import numpy as np
import pytest

from sleuth.logger import core


def drained(recorder, max=-1):
    return core.records_from_bytes(recorder.drain(max))


def test_the_c_twin_is_built_and_chosen_by_default():
    # The extension must build with plain gcc; the fallback is for machines where it cannot.
    assert core.load("c").IMPLEMENTATION == "c"
    assert core.load("python").IMPLEMENTATION == "python"


def test_record_size_matches_the_dtype(impl):
    assert impl.RECORD_SIZE == core.RECORD_DTYPE.itemsize == 64


def test_begin_end_gives_one_record_with_the_fields_and_host_times(impl):
    recorder = impl.Recorder(16)
    before = impl.now_ns()
    handle = recorder.begin(3, 2**64 - 1, 7, 5, 2**40, 12)
    assert recorder.pending == 1 and recorder.size == 0
    recorder.end(handle)
    after = impl.now_ns()
    assert recorder.pending == 0 and recorder.size == 1
    (rec,) = drained(recorder)
    assert (rec["comm"], rec["seq"], rec["op"], rec["peer"], rec["nbytes"], rec["iteration"]) == (
        3, 2**64 - 1, 7, 5, 2**40, 12,
    )
    assert before <= rec["t_issue_ns"] == rec["t_start_ns"] <= rec["t_end_ns"] <= after
    assert recorder.size == 0 and len(recorder.drain()) == 0


def test_now_ns_is_the_monotonic_clock(impl):
    import time

    assert abs(impl.now_ns() - time.monotonic_ns()) < 10**8


def test_records_come_out_in_completion_order_not_begin_order(impl):
    recorder = impl.Recorder(16)
    a = recorder.begin(0, 0, 1, -1, 1, 0)
    b = recorder.begin(0, 1, 1, -1, 1, 0)
    recorder.end(b)
    recorder.end(a)
    assert drained(recorder)["seq"].tolist() == [1, 0]


def test_capacity_rounds_up_to_a_power_of_two_and_bad_sizes_fail(impl):
    assert impl.Recorder(5).capacity == 8
    assert impl.Recorder(1).capacity == 1
    for bad in (0, -1):
        with pytest.raises(ValueError):
            impl.Recorder(bad)
    with pytest.raises(ValueError):
        impl.Recorder(4, 0)


def test_a_full_ring_drops_new_records_and_counts_them(impl):
    recorder = impl.Recorder(4)
    kept = [recorder.record(0, seq, 1, -1, 0, 0, 1, 2, 3) for seq in range(6)]
    assert kept == [True] * 4 + [False] * 2
    assert recorder.dropped == 2
    assert drained(recorder)["seq"].tolist() == [0, 1, 2, 3]
    assert recorder.record(0, 9, 1, -1, 0, 0, 1, 2, 3)
    assert drained(recorder)["seq"].tolist() == [9]


def test_drain_wraps_around_the_ring_and_honours_max(impl):
    recorder = impl.Recorder(8)
    seq = 0
    seen = []
    for _ in range(5):
        for _ in range(5):
            recorder.record(1, seq, 2, -1, seq, -1, seq, seq, seq + 1)
            seq += 1
        part = drained(recorder, 3)
        seen += part["seq"].tolist()
        seen += drained(recorder)["seq"].tolist()
    assert seen == list(range(25))


def test_no_free_slot_returns_minus_one_counts_a_drop_and_end_ignores_it(impl):
    recorder = impl.Recorder(8, slots=2)
    h1 = recorder.begin(0, 0, 1, -1, 0, 0)
    h2 = recorder.begin(0, 1, 1, -1, 0, 0)
    assert recorder.begin(0, 2, 1, -1, 0, 0) == -1
    assert recorder.dropped == 1
    recorder.end(-1)
    recorder.end(h1)
    recorder.end(h1)  # a stale handle: ignored, not a second record
    recorder.end(h2)
    assert drained(recorder)["seq"].tolist() == [0, 1]
    assert recorder.begin(0, 3, 1, -1, 0, 0) >= 0


def test_extreme_values_survive(impl):
    recorder = impl.Recorder(4)
    i64 = np.iinfo(np.int64)
    recorder.record(2**32 - 1, 2**64 - 1, 255, -(2**31), 2**64 - 1, i64.min, i64.min, 0, i64.max)
    (rec,) = drained(recorder)
    assert rec.tolist() == (i64.min, 0, i64.max, 2**64 - 1, 2**64 - 1, i64.min, 2**32 - 1, -(2**31), 255)


def test_out_of_range_arguments_raise(impl):
    recorder = impl.Recorder(4)
    with pytest.raises((ValueError, OverflowError)):
        recorder.begin(0, 0, 256, -1, 0, 0)
    with pytest.raises((ValueError, OverflowError)):
        recorder.record(0, 0, 300, -1, 0, 0, 0, 0, 0)
    assert recorder.pending == 0 and recorder.size == 0


def test_ends_from_another_thread_while_draining_lose_nothing(impl):
    # Async operators end on torch's callback thread while the sender drains: nothing may be lost.
    recorder = impl.Recorder(1 << 16, slots=1 << 16)
    n = 20000
    handles = [recorder.begin(0, seq, 1, -1, 0, 0) for seq in range(n)]
    got = []
    done = threading.Event()

    def finish():
        for h in handles:
            recorder.end(h)
        done.set()

    thread = threading.Thread(target=finish)
    thread.start()
    while not done.is_set():
        got += drained(recorder)["seq"].tolist()
    thread.join()
    got += drained(recorder)["seq"].tolist()
    assert got == list(range(n)) and recorder.dropped == 0


def test_without_cuda_the_cuda_path_refuses_and_poll_is_idle(impl):
    recorder = impl.Recorder(4)
    assert recorder.poll() == 0
    if not impl.cuda_available():
        with pytest.raises(RuntimeError):
            recorder.begin_cuda(0, 0, 1, -1, 0, 0, 0)
        assert recorder.pending == 0
