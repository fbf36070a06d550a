"""``sleuth import`` on an emulated job with one slow GPU: speed, and what Flight Recorder's
watchdog lag does to localization. Prints one JSON object.

The job: 8 ranks (tp 2, pp 2, dp 2) on two hosts, 40 iterations, rank 5 (gpu:h0001/1) 1.5x
slower from iteration 20. Its records are written as the NCCL Inspector, torch's Flight Recorder
and torch's profiler (an NCCL job's Kineto traces) write theirs (the tests' writers,
tests/importers/writers.py, which follow the tools' sources), imported, and localized. For Flight Recorder, the watchdog's discovery lag (torch polls
every 100 ms) is swept, with and without TORCH_NCCL_ENABLE_TIMING's durations (without them the
dumps have no start, and a cost under the lag is not reported), each import told the lag
(``--watchdog-poll-ms``); and its dumps are
given a long job's shapes (``SHAPES``: an all-reduce outside the step's pattern after every 10th
step; buffers that wrapped at a different operator on each rank), each read against the whole
dumps (the same-run baseline): per-step S over the fault's steps and before them, the first suspect.

    .venv/bin/python benchmarks/bench_import.py
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' format writers

from sleuth.cli import main  # noqa: E402
from sleuth.jobspec import JobSpec  # noqa: E402
from sleuth.progress import Steps, progress  # noqa: E402
from sleuth.recordio import read_parquet  # noqa: E402
from sleuth.records_folder import read_records  # noqa: E402
from tests.importers.writers import (  # noqa: E402
    EPOCH_NS, with_world_all_reduces, wrap_flight_recorder, write_flight_recorder, write_inspector, write_torch_profiler,
)


def _quiet(argv: list[str], *, err: io.StringIO | None = None) -> str:
    """What the CLI printed on stdout; its stderr into ``err`` (else dropped)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err or io.StringIO()):
        assert main(argv) == 0, argv
    return out.getvalue()


def _top(folder: Path) -> str | None:
    """The first suspect of the first incident that names a device (a non-hardware one names none)."""
    return _localized(folder)[0]


def _localized(folder: Path) -> tuple[str | None, int]:
    """``_top``, and how many incidents went unreported for costing less than the records resolve."""
    err = io.StringIO()
    incidents = json.loads(_quiet(["localize", "--records", str(folder), "--json"], err=err))
    top = next((i["suspects"][0]["device"] for i in incidents if i["suspects"]), None)
    return top, err.getvalue().count("sleuth localize: not reported:")


def _start_errors_us(folder: Path, truth: dict) -> np.ndarray:
    records, _ = read_records(folder)
    return np.array([abs(r["t_start_ns"] - EPOCH_NS - truth[k]) / 1e3 for r in records.rows()
                     if (k := (r["rank"], r["comm"], r["op"], r["peer"], r["seq"])) in truth])


#: Flight Recorder's sweep: the watchdog's discovery lag (ms); with TORCH_NCCL_ENABLE_TIMING, without it, and with
#: it where the host issues each operator 20 ms before its GPU starts it (a host running ahead; the emulator's keep up),
#: or 0-20 ms before, uniform per operator (how far a host runs ahead varies with the work queued on its GPU).
SWEEP = [(poll_ms, timing, ahead_ms, spread_ms) for poll_ms in (0.1, 1, 5, 20, 100)
         for timing, ahead_ms, spread_ms in ((True, 0, 0), (False, 0, 0), (True, 20, 0), (True, 0, 20))]


def main_() -> None:
    base = Path(tempfile.mkdtemp(prefix="bench-import-"))
    # One bar over the emulation and each import (and its localize), drawn only as it advances, between the
    # timed imports; the CLI calls, their stderr swallowed, draw none of their own.
    with progress("import: emulating the job", total=4 + len(SWEEP), redraw_on_timer=False) as steps:
        result = _run(base, steps)
    print(json.dumps(result, indent=1))


def _run(base: Path, steps: Steps) -> dict:
    """The figures, in ``base``; ``steps`` advanced after the emulation and after each import."""
    _quiet(["sim", "--generate", "fattree:hosts=2,gpus=4,pod=2,spines=1", "--tp", "2", "--pp", "2", "--dp", "2",
            "--iterations", "40", "--microbatches", "2", "--fault", "gpu:h0001/1,slow=1.5,start=20", "--seed", "3",
            "--out", str(base / "sim"), "--no-labels"])
    records, spec = read_parquet(base / "sim" / "records.parquet"), JobSpec.read(base / "sim")
    truth = {(r["rank"], r["comm"], r["op"], r["peer"], r["seq"]): r["t_start_ns"] for r in records.rows()}
    result: dict = {"records": len(records), "ranks": spec.world}
    steps.advance(description="import: NCCL Inspector's files")

    write_inspector(base / "inspector", records, spec)
    t0 = time.perf_counter()
    _quiet(["import", "nccl-inspector", str(base / "inspector"), "--out", str(base / "inspector-out")])
    seconds = time.perf_counter() - t0
    result["nccl_inspector"] = {"import_s": round(seconds, 3), "records_per_s": round(len(records) / seconds),
                                "top_suspect": _top(base / "inspector-out")}
    steps.advance(description="import: PyTorch profiler traces")

    write_torch_profiler(base / "profiler", records, spec)
    t0 = time.perf_counter()
    _quiet(["import", "torch-profiler", str(base / "profiler"), "--out", str(base / "profiler-out")])
    seconds = time.perf_counter() - t0
    errors = _start_errors_us(base / "profiler-out", truth)
    result["torch_profiler"] = {"import_s": round(seconds, 3), "records_per_s": round(len(records) / seconds),
                                "start_error_us_max": round(float(errors.max()), 3),
                                "top_suspect": _top(base / "profiler-out")}
    steps.advance(description="import: Flight Recorder's dumps, watchdog lag swept")

    sweep = []
    for poll_ms, timing, ahead_ms, spread_ms in SWEEP:
        name = f"fr-{poll_ms}-{timing}-{ahead_ms}-{spread_ms}"
        write_flight_recorder(base / name, records, spec, poll_ns=int(poll_ms * 1e6), timing=timing,
                              host_ahead_ns=int(ahead_ms * 1e6), host_ahead_spread_ns=int(spread_ms * 1e6))
        t0 = time.perf_counter()
        _quiet(["import", "flight-recorder", str(base / name), "--out", str(base / f"{name}-out"),
                "--gpus-per-host", "4", "--watchdog-poll-ms", str(poll_ms)])
        seconds = time.perf_counter() - t0
        errors = _start_errors_us(base / f"{name}-out", truth)
        top, not_reported = _localized(base / f"{name}-out")
        sweep.append({"watchdog_lag_ms": poll_ms, "timing": timing, "host_ahead_ms": ahead_ms,
                      "host_ahead_spread_ms": spread_ms, "import_s": round(seconds, 3),
                      "start_error_us_median": round(float(np.median(errors)), 1),
                      "start_error_us_p99": round(float(np.percentile(errors, 99)), 1),
                      "top_suspect": top, "not_reported": not_reported})
        steps.advance()
    result["flight_recorder"] = sweep
    steps.advance(description="import: Flight Recorder's dumps of a long job's shapes")
    result["flight_recorder_shapes"] = [_shape(base, shape, records, spec) for shape in SHAPES]
    result["truth"] = "gpu:h0001/1"
    return result


#: A long job's dumps: as written; a world all-reduce after every 10th step (a loss or timer
#: all-reduce); buffers of 2,000 entries that wrapped, ranks 4-7 1,020 operators ahead of the others.
SHAPES = ("whole", "world_all_reduce_every_10", "wrapped_2000_ranks_4_7_ahead")


def _shape(base: Path, shape: str, records, spec) -> dict:
    """The Flight Recorder import of the job in ``shape``: its per-step S over the fault's steps
    (20-39) and before it (5-19), the steps kept, and the first suspect with its incident's first step."""
    folder, out = base / f"shape-{shape}", base / f"shape-{shape}-out"
    written = with_world_all_reduces(records, spec, 10) if shape == "world_all_reduce_every_10" else records
    files = write_flight_recorder(folder, written, spec)
    if shape.startswith("wrapped"):
        wrap_flight_recorder(files, 2_000, {rank: 1_020 for rank in range(4, 8)})
    _quiet(["import", "flight-recorder", str(folder), "--out", str(out), "--gpus-per-host", "4"])
    attributed = json.loads(_quiet(["attribute", "--records", str(out), "--json"]))
    per_step = dict(zip(attributed["iterations"], attributed["per_iteration"]))
    incidents = json.loads(_quiet(["localize", "--records", str(out), "--json"]))
    named = next((i for i in incidents if i["suspects"]), None)
    return {
        "shape": shape, "steps": [min(per_step), max(per_step)],
        "fault_steps_s": round(float(np.mean([v for k, v in per_step.items() if k >= 20])), 4),
        "before_s": round(float(np.mean([v for k, v in per_step.items() if k < 20] or [np.nan])), 4),
        "top_suspect": named["suspects"][0]["device"] if named else None,
        "incident_from": named["iterations"][0] if named else None,
    }


if __name__ == "__main__":
    main_()
