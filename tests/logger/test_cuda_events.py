"""The C recorder's CUDA-event path, on machines without a GPU: against a runtime double.

``fake_cudart.c`` exports the libcudart entry points the extension dlopens, with a training
stream that runs behind the host and a device clock of its own. ``cuda_scenario.py`` drives the
recorder in a separate process (libcudart is loaded once per process) and reports what it saw.
What a real GPU adds (the cost of real event calls) is measured by
benchmarks/bench_logger_cuda.py on a machine that has one.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def seen(tmp_path_factory) -> dict:
    compiler = shutil.which("gcc") or shutil.which("cc")
    assert compiler, "a C compiler (gcc) is needed to build the CUDA runtime double; the extension needs one too"
    library = tmp_path_factory.mktemp("cudart") / "libfakecudart.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", str(library), str(HERE / "fake_cudart.c")], check=True)
    run = subprocess.run(
        [sys.executable, str(HERE / "cuda_scenario.py"), str(library)], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_the_extension_loads_a_runtime_by_path(seen):
    assert seen["available"] is True


def test_records_wait_for_the_device_and_nothing_synchronizes_the_training_stream(seen):
    # The operators were issued while the stream ran 0.4 s behind: none was complete at once,
    # all 50 were in flight, and the recorder never waited on that stream to find out.
    assert seen["completed_at_once"] == 0
    assert seen["pending_while_running"] == 50
    assert seen["syncs_on_training_stream"] == 0 and seen["syncs_on_training_stream_after"] == 0
    assert seen["syncs_on_private_stream"] >= 1  # the clock reference, on the recorder's own stream
    assert len(seen["records"]) == 50


def test_a_poll_while_the_device_is_behind_asks_about_the_oldest_operator_only(seen):
    # Events on one stream complete in order: the other 49 cannot be done if the first is not.
    # A poll holds the GIL, so one query rather than 50 is what the training thread waits for.
    assert seen["queries_by_a_poll_while_behind"] == 1


def test_device_times_are_mapped_to_the_host_clock(seen):
    # The double's device clock is offset by ~987 s from the host's; a mapped start lies one
    # stream delay after the host issued the operator, whatever the offset.
    delay_ns = seen["delay_ns"]
    records = seen["records"]
    assert [r["seq"] for r in records] == list(range(50))
    assert {(r["comm"], r["iteration"], r["nbytes"]) for r in records} == {(3, 7, 1024)}
    for r in records:
        lag = r["start"] - r["issue"]
        assert abs(lag - delay_ns) < delay_ns * 0.05, f"device start mapped {lag / 1e6:.1f} ms after issue"
        assert r["end"] >= r["start"]
    starts = [r["start"] for r in records]
    assert starts == sorted(starts)


def test_events_are_reused_from_the_pool(seen):
    # 1,000 more operators through the same 64 slots: no event created beyond the first ones.
    assert seen["events_created_by_20_more_rounds"] == 0


def test_more_operators_in_flight_than_slots_are_dropped_and_counted(seen):
    assert seen["over_handles"][:4] == [0, 1, 2, 3]
    assert seen["over_handles"][4:] == [-1, -1]
    assert seen["over_dropped"] == 2


def test_a_failing_event_record_is_reported_and_frees_its_slot(seen):
    assert "cudaEventRecord" in seen["end_error"]
    assert seen["after_failure"] == {"dropped": 1, "pending": 0}
