"""An emulated job with one slow GPU: the truth the importers' tests write foreign files from."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from sleuth.cli import main
from sleuth.jobspec import JobSpec
from sleuth.recordio import read_parquet
from sleuth.records import RecordBatch

#: 8 ranks (tp 2, pp 2, dp 2) on two hosts of four GPUs; rank 5 (h0001/1) computes 1.5x slower
#: from iteration 20 of 40.
SLOW_GPU = "gpu:h0001/1"


@dataclass(frozen=True)
class Emulated:
    folder: Path
    records: RecordBatch
    spec: JobSpec


@pytest.fixture(scope="session")
def emulated(tmp_path_factory: pytest.TempPathFactory) -> Emulated:
    out = tmp_path_factory.mktemp("emulated") / "run"
    assert main([
        "sim", "--generate", "fattree:hosts=2,gpus=4,pod=2,spines=1", "--tp", "2", "--pp", "2", "--dp", "2",
        "--iterations", "40", "--microbatches", "2", "--fault", f"{SLOW_GPU},slow=1.5,start=20", "--seed", "3",
        "--out", str(out), "--no-labels",
    ]) == 0
    return Emulated(out, read_parquet(out / "records.parquet"), JobSpec.read(out))

