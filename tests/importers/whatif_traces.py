"""Traces in the What-if paper's released format (``sleuth.importers.whatif_trace``), from a small
pipeline-and-data-parallel schedule played out here: each worker runs its operations one after
another (a send or receive blocks until its pair ran), micro-batches go forward through the stages
then back (GPipe's order), then the stage's data-parallel reduce-scatter, the embedding all-reduce
of the first and last stage, the world's gradient-norm all-reduce and the optimizer.

Like the real profiler, each step also holds sends and receives that never ran: the first stage's
forward receives and the last stage's forward sends (pipeline ends), and a forward receive after
a middle stage's last forward computation.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np


def play(*, dp: int, pp: int, microbatches: int = 4, steps: int = 12, forward_s: float = 0.010,
         backward_s: float = 0.020, transfer_s: float = 0.002, reduce_s: float = 0.008,
         slow: dict[tuple[int, int], float] | None = None, stage_factor: dict[int, float] | None = None,
         data_factor: np.ndarray | None = None, jitter: float = 0.01, seed: int = 0,
         first_rank_stride: int = 1) -> tuple[list[dict], np.ndarray]:
    """The trace's rows and each step's length (s). ``slow``: (dp_rank, stage) → compute factor;
    ``stage_factor``: stage → compute factor (an uneven split); ``data_factor``: (step, dp_rank) →
    compute factor (uneven batches); ``first_rank_stride``: global ranks between two traced workers
    (the tensor-parallel size)."""
    rng = np.random.default_rng(seed)
    slow, stage_factor = slow or {}, stage_factor or {}
    rows: list[dict] = []
    clock = np.zeros((dp, pp))
    lengths = []
    for step in range(steps):
        begun = clock.max()
        clock[:] = begun
        seq: Counter = Counter()

        def add(d: int, s: int, optype: str, start: float, end: float, mb: int = -1) -> None:
            rows.append({"dp_rank": d, "stage": s, "rank": (s * dp + d) * first_rank_stride, "step": step,
                         "optype": optype, "start_ts": start, "duration": end - start,
                         "seq_id": seq[(d, s, optype)], "mc": 0, "gmc": s, "mb_id": mb})
            seq[(d, s, optype)] += 1

        def compute(d: int, s: int, base: float) -> float:
            factor = slow.get((d, s), 1.0) * stage_factor.get(s, 1.0)
            if data_factor is not None:
                factor *= float(data_factor[step, d])
            return base * factor * (1 + jitter * rng.standard_normal())

        for direction, base, stages, toward in (("forward", forward_s, range(pp), 1),
                                                ("backward", backward_s, range(pp - 1, -1, -1), -1)):
            for d in range(dp):
                posted = np.full(pp, np.nan)  # each stage's pending send of this micro-batch
                for mb in range(microbatches):
                    for s in stages:
                        sender = s - toward
                        if 0 <= sender < pp:
                            post = clock[d, s]
                            end = max(posted[sender], post) + transfer_s * (1 + jitter * abs(rng.standard_normal()))
                            add(d, s, f"{direction}-recv", post, end, mb)
                            add(d, sender, f"{direction}-send", posted[sender], end, mb)
                            clock[d, s] = end
                            clock[d, sender] = max(clock[d, sender], end)
                        elif direction == "forward":
                            add(d, s, "forward-recv", clock[d, s], clock[d, s])  # the first stage's: never ran
                        began_compute = clock[d, s]
                        clock[d, s] += compute(d, s, base)
                        add(d, s, f"{direction}-compute", began_compute, clock[d, s], mb)
                        if 0 <= s + toward < pp:
                            posted[s] = clock[d, s]
                        elif direction == "forward":
                            add(d, s, "forward-send", clock[d, s], clock[d, s])  # the last stage's: never ran
                if direction == "forward" and pp > 2:
                    add(d, 1, "forward-recv", clock[d, 1], clock[d, 1] + 1e-6)  # after its last forward: never ran
        for s in range(pp):
            for d in range(dp):
                add(d, s, "layernorm-grads-all-reduce", clock[d, s], clock[d, s] + 0.0005)
                clock[d, s] += 0.0005
            _collective(add, clock, [(d, s) for d in range(dp)], "grads-reduce-scatter", reduce_s)
        if pp > 1:
            for d in range(dp):
                _collective(add, clock, [(d, 0), (d, pp - 1)], "embedding-grads-all-reduce", reduce_s / 4)
        _collective(add, clock, [(d, s) for d in range(dp) for s in range(pp)], "optimizer-clip-main-grad", 0.0005)
        for d in range(dp):
            for s in range(pp):
                add(d, s, "optimizer", clock[d, s], clock[d, s] + 0.003)
                clock[d, s] += 0.003
        lengths.append(clock.max() - begun)
    return rows, np.asarray(lengths)


def _collective(add, clock: np.ndarray, members: list[tuple[int, int]], optype: str, seconds: float) -> None:
    end = max(clock[m] for m in members) + seconds
    for d, s in members:
        add(d, s, optype, clock[d, s], end)
        clock[d, s] = end


def write(folder: Path, rows: list[dict], *, dp: int, pp: int, tp: int = 1, name: str = "T") -> tuple[Path, Path]:
    """``trace-<name>.parquet`` and ``meta-<name>.yaml`` in ``folder``, as the artifact names them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    columns = {key: [row[key] for row in rows] for key in rows[0]}
    table = pa.table({key: pa.array(values, pa.string() if key == "optype" else
                                    (pa.float64() if key in ("start_ts", "duration") else pa.int64()))
                      for key, values in columns.items()})
    trace, meta = folder / f"trace-{name}.parquet", folder / f"meta-{name}.yaml"
    pq.write_table(table, trace)
    meta.write_text(f"trial_name: {name}\nrun_id: 0\ndp_size: {dp}\ndsp_size: 1\npp_size: {pp}\n"
                    f"tp_size: {tp}\nvpp_size: 1\nworld_size: {dp * pp * tp}\n")
    return trace, meta
