"""Writing an emulation to a folder: the files a logger deployment would leave, plus the truth.

``DIR/records.parquet``      CommOps records (rank, then iteration, then program order)
``DIR/iterations.parquet``   iteration records
``DIR/job.json``             the job spec (``sleuth.jobspec``)
``DIR/truth.json``           the scenario, its faults (device, kind, profile, active
                             iterations), per-iteration times, counterfactuals and
                             δ-irregularity, and the count of abnormal operators
``DIR/labels/abnormal.parquet``  per record, in records.parquet's order: ``abnormal`` (the
                             operator lasts > 5% longer than in the fault-free counterfactual)
                             and ``counterfactual_ns`` (its fault-free duration). In a subfolder
                             so that ``read_parquet(DIR)``-style globbing of DIR stays unambiguous.

Records are written a chunk of ranks at a time, so memory stays bounded at any scale.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from sleuth.recordio import to_arrow, write_parquet

from sleuth.sim.scenario import Emulation

__all__ = ["write_emulation"]


def write_emulation(emulation: Emulation, out: str | Path, *, chunk_ranks: int = 512, labels: bool = True) -> dict[str, Path]:
    """Write records, iterations, job spec, truth (and labels) into folder ``out``; returns the files."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "records": out / "records.parquet",
        "iterations": out / "iterations.parquet",
        "job": out / "job.json",
        "truth": out / "truth.json",
    }
    world = emulation.scenario.layout.world
    abnormal_total = 0
    label_writer = None
    if labels:
        files["labels"] = out / "labels" / "abnormal.parquet"
        files["labels"].parent.mkdir(exist_ok=True)
        label_schema = pa.schema([("abnormal", pa.bool_()), ("counterfactual_ns", pa.int64())])
        label_writer = pq.ParquetWriter(files["labels"], label_schema, compression="zstd")
    writer = None
    try:
        for first in range(0, world, chunk_ranks):
            ranks = range(first, min(first + chunk_ranks, world))
            table = to_arrow(emulation.ranks_records(ranks))
            if writer is None:
                writer = pq.ParquetWriter(files["records"], table.schema, compression="zstd")
            writer.write_table(table)
            if label_writer is not None:
                abnormal, base = emulation.abnormal(ranks)
                abnormal_total += int(abnormal.sum())
                label_writer.write_table(pa.table({"abnormal": abnormal, "counterfactual_ns": base}, schema=label_schema))
    finally:
        if writer is not None:
            writer.close()
        if label_writer is not None:
            label_writer.close()
    write_parquet(emulation.iterations(), files["iterations"])
    emulation.job_spec().write(files["job"])
    truth = emulation.truth().to_dict()
    document = {
        "scenario": emulation.scenario.describe(),
        "faults": truth.pop("faults"),
        "abnormal_operators": abnormal_total if labels else None,
        "irregular_iterations": [row["iteration"] for row in truth["iterations"] if row["irregular"]],
        **truth,
    }
    files["truth"].write_text(json.dumps(document, indent=1, default=_json_default) + "\n", encoding="utf-8")
    return files


def _json_default(value: object) -> object:
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    raise TypeError(f"not JSON serializable: {type(value).__name__}")
