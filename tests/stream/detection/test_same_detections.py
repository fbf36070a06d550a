"""The deployed detectors find exactly what they found before their hot path was optimised
(``benchmarks/bench_detection_throughput.py``): the abnormal-operator rows with their scores, the
irregular iterations, and the operator windows they leave, on two faulty emulated jobs interleaved
in worker batches that split and span iterations. ``data/same_detections.npz`` was written by the
code before the optimisation (``python -m tests.stream.detection.test_same_detections --write``)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from sleuth.records import IterationBatch, RecordBatch
from sleuth.settings import Settings
from sleuth.stream.detection import StreamDetector
from sleuth.stream.detection.model_file import load_default_model
from sleuth.stream.services.worker import Decoded, Worker

from .conftest import emulation

GOLDEN = Path(__file__).parent / "data" / "same_detections.npz"
JOBS = (("gpu:h0003/1,slow=1.5,start=15", 0), ("nic:h0002/0,slow=4,profile=fluctuation,start=10", 4))
BLOCK = 8  # ranks per logger batch
BLOCKS_PER_BATCH = 3  # worker batches cut across iterations and jobs


def worker_batches() -> list[Decoded]:
    """Per iteration, per job, per block of ranks: a logger batch; three of them make a worker batch."""
    ems = [emulation(fault, seed=seed, iterations=30) for fault, seed in JOBS]
    blocks = []
    for it in range(30):
        for em in ems:
            records, iterations = em.records(iterations=[it]), em.iterations(iterations=[it])
            for lo in range(0, em.scenario.layout.world, BLOCK):
                pick = (records["rank"] >= lo) & (records["rank"] < lo + BLOCK)
                ipick = (iterations["rank"] >= lo) & (iterations["rank"] < lo + BLOCK)
                blocks.append((records.take(np.flatnonzero(pick)), iterations.take(np.flatnonzero(ipick))))
    return [Decoded(RecordBatch.concat([r for r, _ in blocks[i:i + BLOCKS_PER_BATCH]]),
                    IterationBatch.concat([t for _, t in blocks[i:i + BLOCKS_PER_BATCH]]), [], [])
            for i in range(0, len(blocks), BLOCKS_PER_BATCH)]


def outputs() -> dict[str, np.ndarray]:
    """What the deployed detector (and one with the counterfactual replay on) found and kept."""
    out: dict[str, np.ndarray] = {}
    for name, counterfactual in (("deployed", False), ("counterfactual", True)):
        detector = StreamDetector(load_default_model(), counterfactual=counterfactual, clock=lambda: 0)
        worker = Worker(Settings.from_env({}), client=None, detectors=[detector])
        rows, irregular = [], []
        for batch in worker_batches():
            found = worker.detect(batch)
            rows += found.abnormal
            irregular += [(d.job, d.iteration, d.kind.value, d.duration_ns, d.baseline_ns, d.change_point)
                          for d in found.irregularities]
        out[f"{name}_rows"] = np.array([tuple(map(str, r)) for r in rows], dtype=str).reshape(len(rows), -1)
        out[f"{name}_irregular"] = np.array([tuple(map(str, r)) for r in irregular], dtype=str).reshape(len(irregular), -1)
        windows = detector.windows
        n = len(windows)
        out[f"{name}_ring"] = _in_order(windows._ring[:n])
        out[f"{name}_filled"] = windows._filled[:n]
        out[f"{name}_stats"] = windows._stats[:n]
        out[f"{name}_last_ratio"] = windows._last_ratio[:n]
        out[f"{name}_counts"] = np.array([detector.scored, detector.flagged])
    return out


def test_the_detectors_find_what_they_found_before_the_optimisation() -> None:
    golden = np.load(GOLDEN)
    now = outputs()
    assert sorted(now) == sorted(golden.files)
    assert len(golden["deployed_rows"]) > 100 and len(golden["deployed_irregular"]) > 0
    for name in golden.files:
        kept = _in_order(golden[name]) if name.endswith("_ring") else golden[name]
        assert np.array_equal(now[name], kept, equal_nan=now[name].dtype.kind == "f"), name


def test_the_numpy_stand_ins_of_the_compiled_parts_find_the_same(monkeypatch) -> None:
    """Where the C extensions are not built (no compiler), numpy's versions keep the windows and
    decide the kinds: the same rows, scores, windows and statistics."""
    from sleuth.stream.detection import features, vote_screen

    monkeypatch.setattr(features, "_window_stats", None)
    monkeypatch.setattr(vote_screen, "_screen", None)
    golden, now = np.load(GOLDEN), outputs()
    for name in golden.files:
        kept = _in_order(golden[name]) if name.endswith("_ring") else golden[name]
        assert np.array_equal(now[name], kept, equal_nan=now[name].dtype.kind == "f"), name


def _in_order(ring: np.ndarray) -> np.ndarray:
    """Each window's values ascending, its empty slots last: what it holds, however it keeps them."""
    return np.sort(ring, axis=1)


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    np.savez_compressed(GOLDEN, **outputs())
