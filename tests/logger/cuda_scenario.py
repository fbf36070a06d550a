"""Drives the C recorder's CUDA-event path against the runtime double (fake_cudart.c); prints JSON.

Run in its own process by test_cuda_events.py: the extension loads libcudart once per process,
so the double must not leak into the other tests.

    python cuda_scenario.py LIBFAKECUDART.so
"""

from __future__ import annotations

import ctypes
import json
import sys
import time

from sleuth.logger import _commops, core

TRAINING_STREAM = 0x5EED  # any handle the recorder has not created is a busy "training stream"
DELAY_NS = 400_000_000  # how far the training stream runs behind the host


def operators(recorder, n: int, *, first_seq: int = 0) -> tuple[list[int], int]:
    """Issue ``n`` operators on the training stream; their handles and the host time after."""
    handles = []
    for k in range(n):
        handle = recorder.begin_cuda(3, first_seq + k, 1, -1, 1024, 7, TRAINING_STREAM)
        recorder.end_cuda(handle, TRAINING_STREAM)
        handles.append(handle)
    return handles, _commops.now_ns()


def wait_for(recorder, n: int) -> list[dict]:
    records: list = []
    deadline = time.monotonic() + 30
    while len(records) < n and time.monotonic() < deadline:
        recorder.poll()
        records += core.records_from_bytes(recorder.drain()).tolist()
        time.sleep(0.01)
    names = core.RECORD_DTYPE.names
    return [dict(zip(names, r)) for r in records]


def main(library: str) -> dict:
    fake = ctypes.CDLL(library)  # the same handle dlopen gives the extension: shared counters
    fake.fake_cuda_set_delay_ns.argtypes = [ctypes.c_int64]
    fake.fake_cuda_queries.restype = ctypes.c_long
    out: dict = {"available": _commops.cuda_available(library)}

    fake.fake_cuda_set_delay_ns(DELAY_NS)
    recorder = _commops.Recorder(1 << 12, 64)
    issued_at = _commops.now_ns()
    handles, issued_by = operators(recorder, 50)
    out["issue_seconds"] = (issued_by - issued_at) / 1e9
    queries_before = fake.fake_cuda_queries()
    out["completed_at_once"] = recorder.poll()
    out["queries_by_a_poll_while_behind"] = fake.fake_cuda_queries() - queries_before
    out["pending_while_running"] = recorder.pending
    records = wait_for(recorder, 50)
    out["delay_ns"] = DELAY_NS
    out["records"] = [
        {"seq": r["seq"], "comm": r["comm"], "iteration": r["iteration"], "nbytes": r["nbytes"],
         "issue": r["t_issue_ns"], "start": r["t_start_ns"], "end": r["t_end_ns"]}
        for r in records
    ]
    out["syncs_on_training_stream"] = fake.fake_cuda_syncs_on_other_streams()
    out["syncs_on_private_stream"] = fake.fake_cuda_syncs_on_private_streams()

    # A busy hour of a job: many rounds through the same 64 slots reuse their events.
    fake.fake_cuda_set_delay_ns(0)
    created_before = fake.fake_cuda_events_created()
    for round_ in range(20):
        operators(recorder, 50, first_seq=1000 + 50 * round_)
        wait_for(recorder, 50)
        if round_ == 10:
            recorder.recalibrate()  # the sender's periodic recalibration: on the private stream
    out["events_created_by_20_more_rounds"] = fake.fake_cuda_events_created() - created_before
    out["syncs_on_training_stream_after"] = fake.fake_cuda_syncs_on_other_streams()

    # More operators in flight than slots: the extras are dropped and counted, nothing waits.
    fake.fake_cuda_set_delay_ns(DELAY_NS)
    small = _commops.Recorder(64, 4)
    over = [small.begin_cuda(3, k, 1, -1, 8, 0, TRAINING_STREAM) for k in range(6)]
    out["over_handles"] = over
    out["over_dropped"] = small.dropped

    # A failing cudaEventRecord at the end of an operator: an error for the caller, the slot back.
    fake.fake_cuda_set_delay_ns(0)
    failing = _commops.Recorder(64, 4)
    handle = failing.begin_cuda(3, 0, 1, -1, 8, 0, TRAINING_STREAM)
    fake.fake_cuda_fail_records_after(0)
    try:
        failing.end_cuda(handle, TRAINING_STREAM)
        out["end_error"] = None
    except RuntimeError as error:
        out["end_error"] = str(error)
    fake.fake_cuda_fail_records_after(-1)
    out["after_failure"] = {"dropped": failing.dropped, "pending": failing.pending}
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
